"""A Kafka Produce or Fetch a connection answers at once (one partition at acks 0 or 1, or
appended at once at acks=all and answered once fsync'ed, or nothing new to fetch) gets, through
a real broker and for every served version, the very bytes the general path gives the same
request in the same state, and leaves the same log; whatever that path does not take reaches the
general one, and responses keep their request order."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from kafka_helpers import KafkaSocket, consume
from security_helpers import PASSWORD, USER, address, secure_broker
from server_helpers import RunningBroker, batch, running_broker

from odradek.client.event_loop_thread import EventLoopThread
from odradek.config.broker_config_loader import load_broker_config
from odradek.errors import KafkaStorageError
from odradek.network.connection import MAX_IN_FLIGHT_REQUESTS
from odradek.protocol.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from odradek.protocol.kafka.fetch_request import read_immediate_fetch
from odradek.protocol.kafka.message_codec import (
    decode,
    encode_parts,
    request_spec,
    response_spec,
)
from odradek.protocol.kafka.produce_request import (
    IMMEDIATE_COPY_MAX_BYTES,
    read_immediate_produce,
)
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.server.broker import Broker
from odradek.server.kafka.request_handler import KafkaRequestHandler
from odradek.server.replica_manager import ReplicaManager
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

ANSWER_AT_ONCE = KafkaRequestHandler.answer_at_once
ANSWER_WHEN_DURABLE = KafkaRequestHandler.answer_when_durable
PRODUCE_VERSIONS = range(3, 13)
FETCH_VERSIONS = range(4, 13)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with running_broker(tmp_path) as running:
        yield running


class Paths:
    """Switches every Kafka connection between the immediate path (noting which API each
    answer it gives is for) and the general one alone."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.answered: list[int | None] = []
        self.joined = 0
        """acks=all answers that joined others waiting for their fsync."""

    def immediate(self) -> None:
        def spy(handler: KafkaRequestHandler, frame: memoryview) -> object:
            answer = ANSWER_AT_ONCE(handler, frame)
            self.answered.append(None if answer is None else frame[1])
            return answer

        def joining(handler: KafkaRequestHandler, frame: memoryview) -> object:
            answer = ANSWER_WHEN_DURABLE(handler, frame)
            self.joined += answer is not None
            return answer

        self._monkeypatch.setattr(KafkaRequestHandler, "answer_at_once", spy)
        self._monkeypatch.setattr(KafkaRequestHandler, "answer_when_durable", joining)

    def general(self) -> None:
        self._monkeypatch.setattr(KafkaRequestHandler, "answer_at_once", lambda *_: None)
        self._monkeypatch.setattr(KafkaRequestHandler, "answer_when_durable", lambda *_: None)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Paths:
    return Paths(monkeypatch)


def body(api_key: int, version: int, values: dict[str, Any]) -> tuple[bytes, bool]:
    spec = request_spec(api_key, version)
    return b"".join(bytes(part) for part in encode_parts(spec, values)), spec.flexible


def exchange(kafka: KafkaSocket, api_key: int, version: int, values: dict[str, Any]) -> bytes:
    """The response to one request, without its correlation id (checked)."""
    correlation_id = kafka.send(api_key, version, *body(api_key, version, values))
    response = kafka.read_frame()
    assert struct.unpack_from(">i", response)[0] == correlation_id
    return response[4:]


def produce_values(topic: str, partition: int, records: bytes | None, acks: int) -> dict:
    entry = {"index": partition, "records": records}
    return {
        "acks": acks,
        "timeout": 30000,
        "topic_data": [{"name": topic, "partition_data": [entry]}],
    }


def fetch_values(partition: int, offset: int, topic: str = "t", **options: Any) -> dict:
    entry = {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
    return {
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [entry]}],
        **options,
    }


def create(broker: RunningBroker, *topics: str, partitions: int = 2) -> None:
    with broker.connect() as client:
        client.call(CreateTopicsRequest(tuple(CreatableTopic(t, partitions) for t in topics)))


def log_files(broker: RunningBroker, topic: str) -> dict[str, bytes]:
    """Every partition's segment files of ``topic``, by partition and file name."""
    return {
        f"{path.parent.name.removeprefix(topic)}/{path.name}": path.read_bytes()
        for path in sorted(broker.data_dir.glob(f"{topic}-*/*.log"))
    }


def test_produces_get_the_general_paths_answer(broker: RunningBroker, paths: Paths) -> None:
    good = batch(2)
    requests: list[tuple[str, dict[str, Any]]] = [
        ("p0", produce_values("{topic}", 0, good, 1)),
        ("p1", produce_values("{topic}", 1, good, 1)),
        ("acks=0", produce_values("{topic}", 0, good, 0)),
        ("torn", produce_values("{topic}", 0, b"torn!", 1)),
        ("no such partition", produce_values("{topic}", 9, good, 1)),
        ("null records", produce_values("{topic}", 0, None, 1)),
        ("acks=all", produce_values("{topic}", 1, good, -1)),
        ("acks=2", produce_values("{topic}", 1, good, 2)),
        ("transactional", {**produce_values("{topic}", 0, good, 1), "transactional_id": "tx"}),
        (
            "two partitions",
            {
                "acks": 1,
                "timeout": 30000,
                "topic_data": [
                    {
                        "name": "{topic}",
                        "partition_data": [
                            {"index": 0, "records": good},
                            {"index": 1, "records": good},
                        ],
                    }
                ],
            },
        ),
        ("p0 again", produce_values("{topic}", 0, good, 1)),
    ]
    create(broker, "at-once", "general")  # (names of one length: the answers are compared)
    kafka = KafkaSocket(broker)
    for version in PRODUCE_VERSIONS:
        for label, values in requests:
            answers = []
            for topic, path in (("at-once", paths.immediate), ("general", paths.general)):
                path()
                named = _named(values, topic)
                if values["acks"] == 0:
                    correlation_id = kafka.send(0, version, *body(0, version, named))
                    # done before the path changes: nothing answers acks=0, the fetch after it is
                    exchange(kafka, 1, 12, fetch_values(0, 0, topic, max_bytes=0))
                    assert correlation_id
                    continue
                answers.append(exchange(kafka, 0, version, named).replace(b"at-once", b"general"))
            if answers:
                assert answers[0] == answers[1], (version, label)
    kafka.close()
    assert log_files(broker, "at-once") == log_files(broker, "general")
    assert len(log_files(broker, "general")) == 2
    produce_answers = [api for api in paths.answered if api == 0]
    # per version: p0, p1, acks=0, acks=all, p0 again, and the first partition of nothing else
    assert len(produce_answers) == 5 * len(PRODUCE_VERSIONS)


def _named(values: dict[str, Any], topic: str) -> dict[str, Any]:
    topics = [{**entry, "name": topic} for entry in values["topic_data"]]
    return {**values, "topic_data": topics}


def test_fetches_get_the_general_paths_answer(broker: RunningBroker, paths: Paths) -> None:
    create(broker, "t")
    kafka = KafkaSocket(broker)
    for _ in range(4):
        assert exchange(kafka, 0, 9, produce_values("t", 0, batch(), 1))
    with broker.connect() as client:
        client.call(DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 1),)))
    options = [
        {},
        {"max_wait": 100, "min_bytes": 0},
        {"max_bytes": 0},
        {"isolation_level": 1},
        {"session_id": 5, "session_epoch": 1},
    ]
    cases = [
        (topic, partition, offset, option)
        for topic in ("t", "missing")
        for partition in (0, 1, 5)
        for offset in (-1, 0, 1, 4, 5)
        for option in options
    ]
    for version in FETCH_VERSIONS:
        for topic, partition, offset, option in cases:
            values = fetch_values(partition, offset, topic, **option)
            paths.immediate()
            immediate = exchange(kafka, 1, version, values)
            paths.general()
            assert immediate == exchange(kafka, 1, version, values), (version, values)
    # a fetch that may wait finds nothing new in time: both answer it after its wait
    waiting = fetch_values(1, 0, "t", max_wait=20)
    for version in FETCH_VERSIONS:
        paths.immediate()
        immediate = exchange(kafka, 1, version, waiting)
        paths.general()
        assert immediate == exchange(kafka, 1, version, waiting), version
    kafka.close()
    # at the log end of either partition (offset 4 of partition 0, 0 of partition 1), in the
    # four options outside a fetch session (and in the fifth before v7: no sessions there)
    fetch_answers = [api for api in paths.answered if api == 1]
    assert len(fetch_answers) == 2 * 4 * len(FETCH_VERSIONS) + 2 * 3


def test_an_answer_waits_for_the_responses_before_it(broker: RunningBroker, paths: Paths) -> None:
    """A fetch that waits, then one that could be answered at once: they are answered in
    request order, the second by the general path once the first is out."""
    create(broker, "t", partitions=1)
    paths.immediate()
    kafka = KafkaSocket(broker)
    waiting = kafka.send(1, 12, *body(1, 12, fetch_values(0, 0, max_wait=300)))
    at_once = kafka.send(1, 12, *body(1, 12, fetch_values(0, 0)))
    produced = kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(), 1)))
    order = [struct.unpack_from(">i", kafka.read_frame())[0] for _ in range(3)]
    assert order == [waiting, at_once, produced]
    assert paths.answered == [None]  # (the first; the others were never offered)
    assert exchange(kafka, 1, 12, fetch_values(0, 1))
    assert paths.answered == [None, 1]
    kafka.close()


def test_acks_all_answers_wait_for_their_fsync_and_keep_request_order(
    broker: RunningBroker, paths: Paths
) -> None:
    """Pipelined requests of every kind behind acks=all ones appended at once: each acks=all
    answer leaves only once its offsets are fsync'ed (the recovery point is past them), and
    every answer in request order; the general path takes what may not join them."""
    create(broker, "t", partitions=2)
    log = broker.broker.log_manager.get_log(TopicPartition("t", 0))
    paths.immediate()
    kafka = KafkaSocket(broker)
    two = produce_values("t", 0, batch(), -1)
    two["topic_data"][0]["partition_data"].append({"index": 1, "records": batch()})
    sent = [
        ("all", kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(3), -1)))),
        ("all", kafka.send(0, 9, *body(0, 9, produce_values("t", 1, batch(2), -1)))),
        ("one", kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(), 1)))),
        ("all", kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(), -1)))),
        ("two partitions", kafka.send(0, 9, *body(0, 9, two))),
        ("fetch", kafka.send(1, 12, *body(1, 12, fetch_values(0, 0)))),
        ("all", kafka.send(0, 8, *body(0, 8, produce_values("t", 0, batch(), -1)))),
    ]
    for number, (label, correlation_id) in enumerate(sent):
        response = kafka.read_frame()
        assert struct.unpack_from(">i", response)[0] == correlation_id, label
        if label == "all" and number != 1:  # (of partition 0: the log at hand)
            version = 8 if number == 6 else 9
            values = decode(
                response_spec(0, version), memoryview(response), 5 if version == 9 else 4
            )
            (result,) = values["responses"][0]["partition_responses"]
            assert result["error_code"] == 0
            assert log.recovery_point > result["base_offset"], label
    # the first two appended at once (the second joining the first's wait unless its fsync
    # had ended already), the acks=1 one by the general path behind them, and the rest as
    # they came (the last may find every answer out already)
    assert set(paths.answered) == {0}
    assert 2 <= len(paths.answered) + paths.joined <= 3
    kafka.close()
    assert broker.metrics()["odradek_request_memory_bytes"] == 0


def test_an_acks_all_answer_not_fsynced_in_time_is_the_general_paths(
    broker: RunningBroker, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush slower than the request's timeout_ms: the answer appended at once says
    REQUEST_TIMED_OUT in the general path's very bytes and counts its partition error alike,
    and the next answer still comes."""
    create(broker, "at-once", "general", partitions=1)
    flush = UnifiedLog.flush

    def slow_flush(log: UnifiedLog, offset: int | None = None) -> None:
        time.sleep(0.5)
        flush(log, offset)

    monkeypatch.setattr(UnifiedLog, "flush", slow_flush)
    kafka = KafkaSocket(broker)
    answers = []
    counted = []
    for topic, path in (("at-once", paths.immediate), ("general", paths.general)):
        path()
        before = _partition_errors(broker, "REQUEST_TIMED_OUT")
        values = {**produce_values(topic, 0, batch(), -1), "timeout": 100}
        answers.append(exchange(kafka, 0, 9, values).replace(b"at-once", b"general"))
        counted.append(_partition_errors(broker, "REQUEST_TIMED_OUT") - before)
    assert answers[0] == answers[1]
    assert struct.pack(">h", 7) in answers[0]  # REQUEST_TIMED_OUT
    assert counted == [1, 1]
    assert paths.answered == [0]
    monkeypatch.undo()
    paths.immediate()
    assert exchange(kafka, 0, 9, produce_values("at-once", 0, batch(), -1))
    kafka.close()


def test_an_acks_all_answer_whose_fsync_fails_is_the_general_paths(
    broker: RunningBroker, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush that fails: the answer appended at once carries the flush's error in the
    general path's very bytes and counts it alike; once flushes succeed again, so do
    answers."""
    create(broker, "at-once", "general", partitions=1)

    def failing_flush(log: UnifiedLog, offset: int | None = None) -> None:
        raise KafkaStorageError("the disk is gone")

    monkeypatch.setattr(UnifiedLog, "flush", failing_flush)
    kafka = KafkaSocket(broker)
    answers = []
    counted = []
    for topic, path in (("at-once", paths.immediate), ("general", paths.general)):
        path()
        before = _partition_errors(broker, "KAFKA_STORAGE_ERROR")
        answer = exchange(kafka, 0, 9, produce_values(topic, 0, batch(), -1))
        answers.append(answer.replace(b"at-once", b"general"))
        counted.append(_partition_errors(broker, "KAFKA_STORAGE_ERROR") - before)
    assert answers[0] == answers[1]
    (result,) = decode(response_spec(0, 9), memoryview(answers[0]), 1)["responses"][0][
        "partition_responses"
    ]
    assert (result["error_code"], result["error_message"]) == (
        KafkaStorageError.code,
        "the disk is gone",
    )
    assert counted == [1, 1]
    assert paths.answered == [0]
    monkeypatch.undo()
    paths.immediate()
    answer = exchange(kafka, 0, 9, produce_values("at-once", 0, batch(), -1))
    (result,) = decode(response_spec(0, 9), memoryview(answer), 1)["responses"][0][
        "partition_responses"
    ]
    assert (result["error_code"], result["base_offset"]) == (0, 1)
    kafka.close()
    assert broker.metrics()["odradek_request_memory_bytes"] == 0


def _partition_errors(broker: RunningBroker, error: str) -> float:
    return broker.metrics().get(
        f'odradek_partition_errors_total{{api="Produce",error="{error}"}}', 0.0
    )


def test_a_stopping_broker_still_sends_the_acks_all_answers_waiting_for_their_fsync(
    tmp_path: Path, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graceful stop lets an answer appended at once wait for its (slow) fsync and go out
    before the connection closes, as the general path's requests in flight do."""
    flush = UnifiedLog.flush

    def slow_flush(log: UnifiedLog, offset: int | None = None) -> None:
        time.sleep(0.5)
        flush(log, offset)

    config = load_broker_config(
        overrides={"log.dirs": str(tmp_path / "data"), "port": "0", "metrics.port": "0"}
    )
    loop_thread = EventLoopThread(name="test-broker-loop")
    broker = loop_thread.call(Broker, config)
    loop_thread.run(broker.start(), timeout=30)
    running = RunningBroker(broker, loop_thread)
    try:
        create(running, "t", partitions=1)
        paths.immediate()
        kafka = KafkaSocket(running)
        monkeypatch.setattr(UnifiedLog, "flush", slow_flush)
        correlation_id = kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(), -1)))
        time.sleep(0.1)
        stopping = asyncio.run_coroutine_threadsafe(broker.stop(), loop_thread.loop)
        response = kafka.read_frame()
        assert struct.unpack_from(">i", response)[0] == correlation_id
        values = decode(response_spec(0, 9), memoryview(response), 5)
        assert values["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert kafka.is_closed_by_peer()
        stopping.result(timeout=30)
        kafka.close()
        assert paths.answered == [0]
    finally:
        loop_thread.loop.call_soon_threadsafe(loop_thread.loop.stop)


def test_acks_all_answers_waiting_for_their_fsync_count_against_the_in_flight_limit(
    broker: RunningBroker, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_IN_FLIGHT_REQUESTS answers waiting for a (slow) fsync the broker reads no more
    of the connection, as with waiting tasks: a request sent then is appended only once
    answers have gone out."""
    create(broker, "t", partitions=1)
    log = broker.broker.log_manager.get_log(TopicPartition("t", 0))
    flush = UnifiedLog.flush

    def slow_flush(log: UnifiedLog, offset: int | None = None) -> None:
        time.sleep(1.5)
        flush(log, offset)

    paths.immediate()
    kafka = KafkaSocket(broker)
    monkeypatch.setattr(UnifiedLog, "flush", slow_flush)
    sent = time.monotonic()
    waiting = [
        kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(1), -1)))
        for _ in range(MAX_IN_FLIGHT_REQUESTS + 6)
    ]
    time.sleep(0.3)  # read and appended: the broker stopped reading
    last = kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(1), -1)))
    time.sleep(0.3)
    if time.monotonic() - sent < 1.2:  # (no flush can have ended yet)
        # (those of one read are all handled: the pause holds back the reads after it)
        assert MAX_IN_FLIGHT_REQUESTS <= log.log_end_offset <= len(waiting)
    answered = [struct.unpack_from(">i", kafka.read_frame())[0] for _ in range(len(waiting) + 1)]
    assert answered == [*waiting, last]
    assert log.log_end_offset == len(waiting) + 1
    kafka.close()


def test_requests_are_counted_alike(broker: RunningBroker, paths: Paths) -> None:
    create(broker, "t", partitions=1)
    kafka = KafkaSocket(broker)
    paths.general()
    exchange(kafka, 0, 9, produce_values("t", 0, batch(), 1))
    exchange(kafka, 1, 12, fetch_values(0, 1))
    before = _counts(broker)
    assert before == {"Produce": (1, 1), "Fetch": (1, 1)}
    paths.immediate()
    for offset in range(1, 4):
        exchange(kafka, 0, 9, produce_values("t", 0, batch(), 1))
        exchange(kafka, 1, 12, fetch_values(0, offset + 1))
    assert paths.answered == [0, 1] * 3
    paths.general()
    for offset in range(4, 6):
        exchange(kafka, 0, 9, produce_values("t", 0, batch(), 1))
        exchange(kafka, 1, 12, fetch_values(0, offset + 1))
    kafka.close()
    after = _counts(broker)
    for api in ("Produce", "Fetch"):
        assert after[api] == (before[api][0] + 5, before[api][1] + 5)
    assert broker.metrics()["odradek_request_memory_bytes"] == 0


def _counts(broker: RunningBroker) -> dict[str, tuple[float, float]]:
    """(requests answered without error, latencies observed) of each API, on Kafka's protocol."""
    samples = broker.metrics()
    counts = {}
    for api in ("Produce", "Fetch"):
        requests = [
            v
            for n, v in samples.items()
            if n.startswith("odradek_requests_total")
            and f'api="{api}"' in n
            and 'protocol="kafka"' in n
            and 'error="NONE"' in n
        ]
        latencies = [
            v
            for n, v in samples.items()
            if n.endswith("_count{" + f'api="{api}",protocol="kafka"' + "}")
        ]
        counts[api] = (sum(requests), sum(latencies))
    return counts


def test_an_unexpected_failure_closes_the_connection_as_a_handlers_does(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(broker, "t", partitions=1)

    def broken(*_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(ReplicaManager, "append_at_once", broken)
    kafka = KafkaSocket(broker)
    kafka.send(0, 9, *body(0, 9, produce_values("t", 0, batch(), 1)))
    assert kafka.is_closed_by_peer()
    kafka.close()
    monkeypatch.undo()
    kafka = KafkaSocket(broker)
    assert exchange(kafka, 0, 9, produce_values("t", 0, batch(), 1))
    kafka.close()


def test_a_kafka_client_gets_immediate_answers(broker: RunningBroker, paths: Paths) -> None:
    """librdkafka producing one record at a time at acks=1 and consuming without waiting:
    both take the immediate path, and every record comes back in order."""
    create(broker, "client", partitions=1)
    paths.immediate()
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 0}
    )
    offsets = []
    for index in range(20):
        producer.produce(
            "client",
            f"value-{index}".encode(),
            partition=0,
            on_delivery=lambda error, message: offsets.append((error, message.offset())),
        )
        producer.flush(10)
    assert offsets == [(None, index) for index in range(20)]
    messages = consume(broker.bootstrap, "client", 0, 20)
    assert [m.value() for m in messages] == [f"value-{i}".encode() for i in range(20)]
    assert paths.answered.count(0) >= 20
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "at-once",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 0,
        }
    )
    reader.assign([confluent_kafka.TopicPartition("client", 0, 20)])
    for _ in range(10):
        assert reader.poll(0.1) is None
    reader.close()
    assert paths.answered.count(1) > 0


# --- the readers, on any bytes ----------------------------------------------------------------


def frame_of(api_key: int, version: int, values: dict[str, Any], client_id: bytes = b"c") -> bytes:
    """A request frame without its size prefix, correlation id 7."""
    encoded, flexible = body(api_key, version, values)
    header = struct.pack(">hhih", api_key, version, 7, len(client_id)) + client_id
    return header + (b"\x00" if flexible else b"") + encoded


def mutated(data: bytes, where: int, value: int, cut: int) -> memoryview:
    changed = bytearray(data)
    if changed:
        changed[where % len(changed)] = value
    return memoryview(bytes(changed[: len(changed) - cut]))


@settings(max_examples=examples(400))
@given(
    st.sampled_from(PRODUCE_VERSIONS),
    st.sampled_from([0, 1, -1]),
    st.integers(0, 400),
    st.integers(0, 255),
    st.integers(0, 3),
    st.booleans(),
    st.integers(1, 40),
    st.sampled_from([None, 300]),
)
def test_the_immediate_produce_reader_reads_what_the_general_one_reads(
    version: int,
    acks: int,
    where: int,
    value: int,
    cut: int,
    mutate: bool,
    records: int,
    value_size: int | None,
) -> None:
    # (records of one byte's length to several: the compact length takes one byte or two;
    # frames under IMMEDIATE_COPY_MAX_BYTES and over it, whose head alone is copied)
    values = batch(records) if value_size is None else batch(records, value_size=value_size)
    good = frame_of(0, version, produce_values("topic", 3, values, acks))
    frame = mutated(good, where, value, cut) if mutate else memoryview(good)
    read = read_immediate_produce(frame)
    if not mutate:
        assert (read is not None) == (acks in (0, 1, -1))
    if read is None:
        return
    request = DECODER.decode(frame)  # it must not be refused
    assert request.refusal is None
    produce = request.body
    (entry,) = produce.partitions
    assert produce.transactional_id is None
    assert read == (
        request.api_version,
        request.correlation_id,
        entry.topic,
        entry.partition,
        entry.records,
        produce.acks,
        produce.timeout_ms,
    )


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("value_size", [10, 300])
def test_the_immediate_produce_reader_reads_small_and_large_frames_alike(
    version: int, value_size: int
) -> None:
    """A frame copied whole to be read and one of which only the head is copied (past
    IMMEDIATE_COPY_MAX_BYTES), each read again by its remembered head, give the general
    path's values; a cut or changed end is refused either way."""
    records = batch(20, value_size=value_size)
    assert (len(records) > IMMEDIATE_COPY_MAX_BYTES) == (value_size == 300)
    for client_id in (b"first", b"second", b"first"):
        good = frame_of(0, version, produce_values("topic", 3, records, 1), client_id)
        for _ in range(2):
            read = read_immediate_produce(memoryview(good))
            request = DECODER.decode(memoryview(good))
            (entry,) = request.body.partitions
            expected = (version, 7, "topic", 3, entry.records, request.body.acks)
            assert read == (*expected, request.body.timeout_ms)
        assert read_immediate_produce(memoryview(good[:-1])) is None
        changed = bytearray(good)
        changed[-1] = 1  # the request's tagged fields (v9+), or a record's last byte
        if version >= 9:
            assert read_immediate_produce(memoryview(bytes(changed))) is None


@settings(max_examples=examples(400))
@given(
    st.sampled_from(FETCH_VERSIONS),
    st.sampled_from([0, 100]),
    st.integers(0, 200),
    st.integers(0, 255),
    st.integers(0, 3),
    st.booleans(),
)
def test_the_immediate_fetch_reader_reads_what_the_general_one_reads(
    version: int, max_wait: int, where: int, value: int, cut: int, mutate: bool
) -> None:
    good = frame_of(1, version, fetch_values(3, 42, "topic", max_wait=max_wait))
    frame = mutated(good, where, value, cut) if mutate else memoryview(good)
    read = read_immediate_fetch(frame)
    if not mutate:
        assert (read is not None) == (max_wait == 0)
    if read is None:
        return
    request = DECODER.decode(frame)
    assert request.refusal is None and request.api_key == 1
    fetch = request.body
    (entry,) = fetch.partitions
    correlation_id, immediate = read
    assert request.body.session_id == 0 and not (fetch.max_wait_ms and fetch.min_bytes)
    assert (correlation_id, immediate.topic, immediate.partition, immediate.fetch_offset) == (
        request.correlation_id,
        entry.topic,
        entry.partition,
        entry.fetch_offset,
    )


class _Decoder:
    """The general path's decoding alone (KafkaRequestHandler.decode needs no broker)."""

    decode = KafkaRequestHandler.decode


DECODER: Any = _Decoder()


def test_versions_not_served_are_left_to_the_general_path() -> None:
    produce = bytearray(frame_of(0, 12, produce_values("topic", 0, batch(), 1)))
    fetch = bytearray(frame_of(1, 12, fetch_values(0, 0, "topic")))
    assert read_immediate_produce(memoryview(bytes(produce))) is not None
    assert read_immediate_fetch(memoryview(bytes(fetch))) is not None
    for frame in (produce, fetch):
        struct.pack_into(">h", frame, 2, 13)  # the same bytes, as the next version
    assert read_immediate_produce(memoryview(bytes(produce))) is None
    assert read_immediate_fetch(memoryview(bytes(fetch))) is None


def test_a_sasl_client_is_answered_at_once_only_once_authenticated(
    tmp_path: Path, paths: Paths
) -> None:
    with secure_broker(tmp_path) as (broker, _):
        create(broker, "t", partitions=1)
        paths.immediate()
        sasl = address(broker, "SASL_PLAINTEXT")
        produce = body(0, 9, produce_values("t", 0, batch(), 1))
        kafka = KafkaSocket(sasl)
        kafka.send(17, 1, _string("PLAIN"))
        assert struct.unpack_from(">h", kafka.read_frame(), 4)[0] == 0
        kafka.send(0, 9, *produce)  # after the handshake, before SaslAuthenticate
        assert kafka.is_closed_by_peer()
        kafka.close()
        assert paths.answered == []  # never offered
        kafka = KafkaSocket(sasl)
        kafka.send(17, 1, _string("PLAIN"))
        assert struct.unpack_from(">h", kafka.read_frame(), 4)[0] == 0
        token = f"\0{USER}\0{PASSWORD}".encode()
        kafka.send(36, 1, struct.pack(">i", len(token)) + token)
        assert struct.unpack_from(">h", kafka.read_frame(), 4)[0] == 0
        kafka.send(0, 9, *produce)
        # no error, base offset 0: the produce refused before authentication left nothing
        assert struct.unpack_from(">hq", kafka.read_frame(), 13) == (0, 0)
        assert exchange(kafka, 1, 12, fetch_values(0, 1))
        kafka.close()
        assert paths.answered == [0, 1]


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()
