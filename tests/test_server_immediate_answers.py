"""A produce or fetch a connection answers at once (one partition at acks 0 or 1, or appended at
once at acks=all and answered once fsync'ed, or nothing new to fetch) gets, through a real
broker, the very bytes the general path gives the same request in the same state, errors
included; whatever that path does not take reaches the general one, and acks=all answers keep
their request order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_helpers import RawClient, RunningBroker, batch, read_partition, running_broker

from odradek.client.event_loop_thread import EventLoopThread
from odradek.config.broker_config_loader import load_broker_config
from odradek.errors import KafkaStorageError, RequestTimedOutError, UnknownServerError
from odradek.network.connection import MAX_IN_FLIGHT_REQUESTS
from odradek.protocol.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.server.broker import Broker
from odradek.server.msgpack.connection import MsgpackConnection
from odradek.server.replica_manager import ReplicaManager
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

ANSWER_AT_ONCE = MsgpackConnection._answer_at_once


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with running_broker(tmp_path) as running:
        yield running


class Paths:
    """Switches every connection between the immediate path (counting what it answers) and
    the general one alone."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.answered: list[bool] = []

    def immediate(self) -> None:
        def spy(connection: MsgpackConnection, *request: object) -> object:
            answer = ANSWER_AT_ONCE(connection, *request)
            self.answered.append(answer is not None)
            return answer

        self._monkeypatch.setattr(MsgpackConnection, "_answer_at_once", spy)

    def general(self) -> None:
        self._monkeypatch.setattr(MsgpackConnection, "_answer_at_once", lambda *_: None)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Paths:
    return Paths(monkeypatch)


def exchange(client: RawClient, header: dict[str, Any], payload: bytes = b"") -> tuple[Any, ...]:
    client.send_frame({"api": header.pop("api"), "v": 0, "id": 7, **header}, payload)
    frame = client.read_frame()
    return frame.header, bytes(frame.payload)


def fetch_header(topic: str, partition: int, offset: int, **options: object) -> dict[str, Any]:
    entry = {"topic": topic, "partition": partition, "fetch_offset": offset}
    return {"api": 1, "partitions": [entry], "max_wait_ms": 0, **options}


def produce_header(
    topic: str, partition: int, size: int, acks: int, **options: object
) -> dict[str, Any]:
    entry = {"topic": topic, "partition": partition, "size": size}
    return {"api": 0, "partitions": [entry], "acks": acks, **options}


def create(broker: RunningBroker, *topics: str, partitions: int = 1) -> None:
    with broker.connect() as client:
        client.call(CreateTopicsRequest(tuple(CreatableTopic(t, partitions) for t in topics)))


def slowed_flush(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every log's fsync takes ``seconds`` longer."""
    flush = UnifiedLog.flush

    def slow_flush(log: UnifiedLog, offset: int | None = None) -> None:
        time.sleep(seconds)
        flush(log, offset)

    monkeypatch.setattr(UnifiedLog, "flush", slow_flush)


def partition_errors(broker: RunningBroker, error: str) -> float:
    return broker.metrics().get(
        f'odradek_partition_errors_total{{api="Produce",error="{error}"}}', 0.0
    )


def same_topic(response: dict[str, Any], topic: str) -> dict[str, Any]:
    """``response`` of a produce to ``topic`` as if it were to ``{topic}``."""
    for partition in response.get("partitions", []):
        partition["topic"] = "{topic}"
        if partition["message"]:
            partition["message"] = partition["message"].replace(topic, "{topic}")
    return response


def test_fetches_get_the_general_paths_answer(broker: RunningBroker, paths: Paths) -> None:
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 2),)))
        for _ in range(4):
            assert (
                exchange(client, produce_header("t", 0, len(batch()), 1), batch())[0]["error"] == 0
            )
        client.call(DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 1),)))
        headers = [
            fetch_header(topic, partition, offset, isolation=isolation, **options)
            for topic in ("t", "missing", "bad/name")
            for partition in (0, 1, 5)
            for offset in (-1, 0, 1, 3, 4, 5)
            for isolation in ("high_watermark", "log_end")
            for options in ({}, {"max_wait_ms": 50, "min_bytes": 0}, {"max_bytes": 0})
        ]
        for header in headers:
            paths.immediate()
            immediate = exchange(client, dict(header))
            paths.general()
            assert immediate == exchange(client, dict(header)), header
    # at the log end of either partition (offset 4 of partition 0, 0 of partition 1)
    assert paths.answered.count(True) == 2 * 2 * 3  # partitions, isolations, options


def test_produces_get_the_general_paths_answer(broker: RunningBroker, paths: Paths) -> None:
    good = batch(2)
    requests = [
        (produce_header("{topic}", 0, len(good), 1), good),
        (produce_header("{topic}", 1, len(good), 1), good),
        (produce_header("{topic}", 0, len(good), 0), good),
        (produce_header("{topic}", 0, 5, 1), b"torn!"),  # refused: not a batch
        (produce_header("{topic}", 9, len(good), 1), good),  # no such partition
        (produce_header("{topic}", 0, 0, 1), b""),  # no batch at all
        (produce_header("{topic}", 0, len(good), 1), good),
        (produce_header("{topic}", 0, len(good), -1), good),
        (produce_header("{topic}", 1, len(good), -1, timeout_ms=5000), good),
        (produce_header("{topic}", 0, 5, -1), b"torn!"),
        (produce_header("{topic}", 9, len(good), -1), good),
        (produce_header("{topic}", 0, len(good), -1), good),
    ]
    with broker.connect() as client:
        client.call(
            CreateTopicsRequest((CreatableTopic("immediate", 2), CreatableTopic("general", 2)))
        )
        for header, payload in requests:
            answers = []
            for topic, path in (("immediate", paths.immediate), ("general", paths.general)):
                path()
                entry = dict(header["partitions"][0], topic=topic)
                request = {**header, "partitions": [entry]}
                if header["acks"] == 0:
                    client.send_frame({"api": 0, "v": 0, "id": 7, **request}, payload)
                    exchange(client, fetch_header(topic, 0, 0))  # done before the path changes
                    continue
                response, records = exchange(client, request, payload)
                answers.append((same_topic(response, topic), records))
            if answers:
                assert answers[0] == answers[1], header
        for partition in (0, 1):
            general = read_partition(client, "general", partition)
            assert read_partition(client, "immediate", partition) == general
        # an acks=all produce with no time to wait for its fsync: the general path answers
        paths.immediate()
        header = produce_header("immediate", 0, len(good), -1, timeout_ms=0)
        exchange(client, header, good)
    # (a request of no records is not even read as one answered at once; the fetch after the
    # acks=0 produce finds records)
    acks_one = [True, True, True, False, False, False, True]
    assert paths.answered == [*acks_one, True, True, False, False, True, False]


def test_an_unexpected_failure_is_answered_and_the_connection_goes_on(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 1),)))

        def broken(*_: object) -> None:
            raise RuntimeError("a bug")

        monkeypatch.setattr(ReplicaManager, "append_at_once", broken)
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert (response["id"], response["error"]) == (7, UnknownServerError.code)
        assert "see its log" in response["message"]
        monkeypatch.undo()
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["error"] == 0 and response["partitions"][0]["base_offset"] == 0


def test_a_quota_set_while_running_takes_requests_off_the_immediate_path(
    broker: RunningBroker, paths: Paths
) -> None:
    """Quotas come and go on a running broker: while one is in force a produce is counted
    against it (and throttled) on the general path, and once it is gone the immediate path
    answers again."""
    from odradek.protocol.client_quotas import (
        AlterClientQuotasEntry,
        AlterClientQuotasRequest,
        QuotaEntityPart,
        QuotaOp,
    )

    every_client = (QuotaEntityPart("client-id", None),)
    rate = "producer_byte_rate"
    paths.immediate()
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 1),)))
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["throttle_time_ms"] == 0
        assert paths.answered == [True]
        client.call(
            AlterClientQuotasRequest((AlterClientQuotasEntry(every_client, (QuotaOp(rate, 1),)),))
        )
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["error"] == 0 and response["throttle_time_ms"] > 0
        assert paths.answered == [True, False]
    with broker.connect() as client:  # (the first is muted while its throttle lasts)
        client.call(
            AlterClientQuotasRequest(
                (AlterClientQuotasEntry(every_client, (QuotaOp(rate, remove=True),)),)
            )
        )
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["throttle_time_ms"] == 0
        assert response["partitions"][0]["base_offset"] == 2
        assert paths.answered == [True, False, True]


def _counts(broker: RunningBroker, api: str) -> tuple[float, float, float]:
    """(requests answered without error, latencies observed, their sum in seconds) of ``api``
    on the msgpack protocol."""
    samples = broker.metrics()
    labels = f'api="{api}",protocol="msgpack"'
    return (
        samples.get(f'odradek_requests_total{{api="{api}",error="NONE",protocol="msgpack"}}', 0),
        samples.get(f"odradek_request_latency_seconds_count{{{labels}}}", 0),
        samples.get(f"odradek_request_latency_seconds_sum{{{labels}}}", 0.0),
    )


def test_requests_are_counted_alike(broker: RunningBroker, paths: Paths) -> None:
    """Each request answered at once is counted once, in the general path's series, with a
    latency from its arrival (not from some other time: a few milliseconds at most here)."""
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 1),)))
        paths.general()
        exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        exchange(client, fetch_header("t", 0, 1))
        before = {api: _counts(broker, api) for api in ("Produce", "Fetch")}
        assert [before[api][:2] for api in before] == [(1, 1), (1, 1)]
        paths.immediate()
        for offset in range(2, 5):
            exchange(client, produce_header("t", 0, len(batch()), 1), batch())
            exchange(client, fetch_header("t", 0, offset))
        assert paths.answered == [True] * 6
        after = {api: _counts(broker, api) for api in ("Produce", "Fetch")}
    for api in ("Produce", "Fetch"):
        assert after[api][:2] == (before[api][0] + 3, before[api][1] + 3)
        assert 0 < after[api][2] - before[api][2] < 1.0
    assert broker.metrics()["odradek_request_memory_bytes"] == 0


# --- acks=all: appended at once, answered once fsync'ed ---------------------------------------


def produce_frame(client: RawClient, correlation_id: int, header: dict, payload: bytes) -> int:
    client.send_frame({"api": header.pop("api"), "v": 0, "id": correlation_id, **header}, payload)
    return correlation_id


def test_acks_all_answers_wait_for_their_fsync_and_keep_request_order(
    broker: RunningBroker, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pipelined requests of every kind among acks=all ones appended at once: each acks=all
    answer leaves only once its offsets are fsync'ed (not before a slow fsync could end; the
    recovery point is past them), and those answers leave in request order; the general path
    takes what may not be appended at once, and its answers are the general path's."""
    create(broker, "t", partitions=2)
    log = broker.broker.log_manager.get_log(TopicPartition("t", 0))
    paths.immediate()
    slowed_flush(monkeypatch, 0.3)
    two = produce_header("t", 0, len(batch()), -1)
    two["partitions"].append({"topic": "t", "partition": 1, "size": len(batch())})
    with broker.connect() as client:
        sent_at = time.monotonic()
        sent = [
            ("all", produce_frame(client, 1, produce_header("t", 0, len(batch(3)), -1), batch(3))),
            ("all", produce_frame(client, 2, produce_header("t", 1, len(batch(2)), -1), batch(2))),
            ("one", produce_frame(client, 3, produce_header("t", 0, len(batch()), 1), batch())),
            ("all", produce_frame(client, 4, produce_header("t", 0, len(batch()), -1), batch())),
            ("two partitions", produce_frame(client, 5, two, batch() + batch())),
            ("fetch", produce_frame(client, 6, fetch_header("t", 0, 0), b"")),
            ("all", produce_frame(client, 7, produce_header("t", 0, len(batch()), -1), batch())),
        ]
        labels = dict((correlation_id, label) for label, correlation_id in sent)
        answered = []
        for _ in sent:
            frame = client.read_frame()
            correlation_id = frame.header["id"]
            answered.append(correlation_id)
            assert frame.header["error"] == 0
            if labels[correlation_id] != "all":
                continue
            assert time.monotonic() - sent_at > 0.25, correlation_id
            (result,) = frame.header["partitions"]
            assert result["error"] == 0
            if result["partition"] == 0:  # (the log at hand)
                assert log.recovery_point > result["base_offset"], correlation_id
        assert [i for i in answered if labels[i] == "all"] == [1, 2, 4, 7]
    # the acks=all ones appended at once; the acks=1 one not, queued behind them in its
    # partition (an append waits for none of their fsyncs: it may be done at once too)
    assert paths.answered.count(True) >= 4
    assert broker.metrics()["odradek_request_memory_bytes"] == 0


def test_an_acks_all_answer_not_fsynced_in_time_is_the_general_paths(
    broker: RunningBroker, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush slower than the request's timeout_ms: the answer appended at once says
    REQUEST_TIMED_OUT in the general path's very bytes and counts its partition error alike,
    and the next answer still comes."""
    create(broker, "at-once", "general")
    slowed_flush(monkeypatch, 0.5)
    answers = []
    counted = []
    with broker.connect() as client:
        for topic, path in (("at-once", paths.immediate), ("general", paths.general)):
            path()
            before = partition_errors(broker, "REQUEST_TIMED_OUT")
            header = produce_header(topic, 0, len(batch()), -1, timeout_ms=100)
            response, _ = exchange(client, header, batch())
            answers.append(same_topic(response, topic))
            counted.append(partition_errors(broker, "REQUEST_TIMED_OUT") - before)
        assert answers[0] == answers[1]
        assert answers[0]["partitions"][0]["error"] == RequestTimedOutError.code
        assert counted == [1, 1]
        assert paths.answered == [True]
        monkeypatch.undo()
        paths.immediate()
        response, _ = exchange(client, produce_header("at-once", 0, len(batch()), -1), batch())
        assert response["partitions"][0]["error"] == 0
        assert paths.answered == [True, True]
    assert broker.metrics()["odradek_request_memory_bytes"] == 0


def test_an_acks_all_answer_whose_fsync_fails_is_the_general_paths(
    broker: RunningBroker, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush that fails: the answer appended at once carries the flush's error in the
    general path's very bytes, and counts it alike; once flushes succeed again, so do
    answers."""
    create(broker, "at-once", "general")

    def failing_flush(log: UnifiedLog, offset: int | None = None) -> None:
        raise KafkaStorageError("the disk is gone")

    monkeypatch.setattr(UnifiedLog, "flush", failing_flush)
    answers = []
    counted = []
    with broker.connect() as client:
        for topic, path in (("at-once", paths.immediate), ("general", paths.general)):
            path()
            before = partition_errors(broker, "KAFKA_STORAGE_ERROR")
            header = produce_header(topic, 0, len(batch()), -1)
            response, _ = exchange(client, header, batch())
            answers.append(same_topic(response, topic))
            counted.append(partition_errors(broker, "KAFKA_STORAGE_ERROR") - before)
        assert answers[0] == answers[1]
        assert answers[0]["partitions"][0]["error"] == KafkaStorageError.code
        assert answers[0]["partitions"][0]["message"] == "the disk is gone"
        assert counted == [1, 1]
        assert paths.answered == [True]
        monkeypatch.undo()
        paths.immediate()
        response, _ = exchange(client, produce_header("at-once", 0, len(batch()), -1), batch())
        assert response["partitions"][0]["error"] == 0
        assert response["partitions"][0]["base_offset"] == 1
    assert broker.metrics()["odradek_request_memory_bytes"] == 0


def test_a_stopping_broker_still_sends_the_acks_all_answers_waiting_for_their_fsync(
    tmp_path: Path, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graceful stop lets an answer appended at once wait for its (slow) fsync and go out
    before the connection closes, as the general path's requests in flight do."""
    config = load_broker_config(
        overrides={"log.dirs": str(tmp_path / "data"), "port": "0", "metrics.port": "0"}
    )
    loop_thread = EventLoopThread(name="test-broker-loop")
    broker = loop_thread.call(Broker, config)
    loop_thread.run(broker.start(), timeout=30)
    running = RunningBroker(broker, loop_thread)
    try:
        create(running, "t")
        paths.immediate()
        with running.connect() as client:
            slowed_flush(monkeypatch, 0.5)
            produce_frame(client, 7, produce_header("t", 0, len(batch()), -1), batch())
            time.sleep(0.1)
            stopping = asyncio.run_coroutine_threadsafe(broker.stop(), loop_thread.loop)
            frame = client.read_frame()
            assert frame.header["id"] == 7
            assert frame.header["partitions"][0]["error"] == 0
            assert client.is_closed_by_peer()
            stopping.result(timeout=30)
        assert paths.answered == [True]
    finally:
        loop_thread.loop.call_soon_threadsafe(loop_thread.loop.stop)


def test_acks_all_answers_waiting_for_their_fsync_count_against_the_in_flight_limit(
    broker: RunningBroker, paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_IN_FLIGHT_REQUESTS answers waiting for a (slow) fsync the broker reads no more
    of the connection, as with waiting tasks: a request sent then is appended only once
    answers have gone out."""
    create(broker, "t")
    log = broker.broker.log_manager.get_log(TopicPartition("t", 0))
    paths.immediate()
    with broker.connect() as client:
        slowed_flush(monkeypatch, 1.5)
        sent = time.monotonic()
        waiting = [
            produce_frame(client, i, produce_header("t", 0, len(batch()), -1), batch())
            for i in range(MAX_IN_FLIGHT_REQUESTS + 6)
        ]
        time.sleep(0.3)  # read and appended: the broker stopped reading
        last = produce_frame(client, 1000, produce_header("t", 0, len(batch()), -1), batch())
        time.sleep(0.3)
        if time.monotonic() - sent < 1.2:  # (no flush can have ended yet)
            # (those of one read are all handled: the pause holds back the reads after it)
            assert MAX_IN_FLIGHT_REQUESTS <= log.log_end_offset <= len(waiting)
        answered = [client.read_frame().header["id"] for _ in range(len(waiting) + 1)]
        assert answered == [*waiting, last]
        assert log.log_end_offset == len(waiting) + 1
    assert broker.metrics()["odradek_request_memory_bytes"] == 0
