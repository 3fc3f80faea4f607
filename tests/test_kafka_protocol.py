"""Kafka's protocol on odradek's port: detection beside the msgpack protocol, hostile frames,
request order, zero-copy fetches, and records crossing between the two protocols."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest
from click.testing import CliRunner
from kafka_helpers import KafkaSocket, consume, create_topic, fetch_v12
from server_helpers import RunningBroker, running_broker

from odradek.cli.main import cli
from odradek.network.protocol_detector import WireProtocol, detect_protocol
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.kafka.byte_reader import ByteReader

MAX_REQUEST_BYTES = 1024 * 1024
TLS_CLIENT_HELLO = bytes.fromhex("160301020001000200fc0303") + bytes(500)
SENDFILE = 'odradek_fetch_bytes_total{path="sendfile"}'


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    settings = {"socket.request.max.bytes": str(MAX_REQUEST_BYTES)}
    with running_broker(tmp_path_factory.mktemp("kafka-protocol"), settings) as running:
        yield running


def api_versions_v3() -> bytes:
    return b"\x05test\x041.0\x00"  # compact strings: software name, version; no tags


def read_api_versions(frame: bytes, flexible_body: bool) -> tuple[int, int, list[tuple]]:
    """(correlation id, error, [(key, min, max)]) of an ApiVersions response (header v0)."""
    reader = ByteReader(memoryview(frame))
    correlation_id = reader.int32()
    error = reader.int16()
    if flexible_body:
        count = reader.unsigned_varint() - 1
    else:
        count = reader.int32()
    entries = []
    for _ in range(count):
        entries.append((reader.int16(), reader.int16(), reader.int16()))
        if flexible_body:
            reader.skip_tagged_fields()
    return correlation_id, error, entries


def still_serves(broker: RunningBroker) -> None:
    with broker.connect() as client:
        assert client.call(ApiVersionsRequest()).broker_id == 0
    kafka = KafkaSocket(broker)
    kafka.send(18, 3, api_versions_v3(), True)
    assert read_api_versions(kafka.read_frame(), True)[1] == 0
    kafka.close()
    # and what the refused requests reserved of the request memory is back
    deadline = time.monotonic() + 30
    while broker.metrics()["odradek_request_memory_bytes"] != 0:
        assert time.monotonic() < deadline, "request memory still reserved"
        time.sleep(0.05)


# --- detection -------------------------------------------------------------------------------


def test_the_detection_rule() -> None:
    msgpack_frame = struct.pack(">II", 40, 20) + b"\x83" + bytes(30)
    assert detect_protocol(msgpack_frame, 1 << 20) is WireProtocol.MSGPACK
    kafka_api_versions = struct.pack(">ihhi", 30, 18, 3, 0)
    assert detect_protocol(kafka_api_versions, 1 << 20) is WireProtocol.KAFKA
    kafka_produce = struct.pack(">ihhi", 30, 0, 9, 7)
    assert detect_protocol(kafka_produce, 1 << 20) is WireProtocol.KAFKA
    assert detect_protocol(TLS_CLIENT_HELLO[:9], 1 << 30) is None
    assert detect_protocol(b"GET / HTTP/1.1"[:9], 1 << 30) is None
    assert detect_protocol(struct.pack(">ihhi", 30, -1, 0, 0), 1 << 20) is None
    assert detect_protocol(struct.pack(">ihhi", 4, 18, 0, 0), 1 << 20) is None


def test_both_protocols_share_the_port(broker: RunningBroker) -> None:
    still_serves(broker)
    metadata = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": broker.bootstrap}
    ).list_topics(timeout=10)
    assert [b.id for b in metadata.brokers.values()] == [0]


@pytest.mark.parametrize(
    "first_bytes",
    [TLS_CLIENT_HELLO, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x00\x00\x00\x00", bytes(64)],
    ids=["tls-client-hello", "http", "size-zero", "zeros"],
)
def test_neither_protocol_is_closed_and_the_broker_stays_up(
    broker: RunningBroker, first_bytes: bytes
) -> None:
    kafka = KafkaSocket(broker)
    kafka.send_raw(first_bytes)
    assert kafka.is_closed_by_peer()
    kafka.close()
    still_serves(broker)


# --- bad Kafka frames ------------------------------------------------------------------------


def test_a_frame_above_the_request_limit_is_refused_before_it_is_read(
    broker: RunningBroker,
) -> None:
    kafka = KafkaSocket(broker)
    kafka.send(18, 3, api_versions_v3(), True)
    kafka.read_frame()
    kafka.send_raw(struct.pack(">ihhi", MAX_REQUEST_BYTES + 1, 3, 12, 9))
    assert kafka.is_closed_by_peer()
    kafka.close()
    still_serves(broker)


@pytest.mark.parametrize(
    ("api_key", "version", "flexible", "body"),
    [
        (3, 4, False, struct.pack(">i", -5)),  # negative array length
        (3, 4, False, struct.pack(">i", 2**31 - 1)),  # array larger than the frame
        (3, 4, False, struct.pack(">ih", 1, 30000) + b"ab"),  # string longer than the frame
        (3, 12, True, b"\x05"),  # truncated compact array
        (3, 12, True, b"\x01\x00\x00\x02\x03\x00\x01\x00"),  # tags out of order
        (3, 12, True, b"\x01\x00\x00\x01\x00\xff\xff\xff\xff\x0f"),  # tag size past the end
        (3, 12, True, b"\x01\x00\x00\x01\x00\xff\xff\xff\xff\xff\xff"),  # varint too long
        (0, 9, True, b"\x00\x01\x00"),  # produce cut short
    ],
    ids=[
        "negative-array",
        "huge-array",
        "huge-string",
        "truncated",
        "tags-out-of-order",
        "tag-past-end",
        "long-varint",
        "produce-cut-short",
    ],
)
def test_malformed_bodies_close_the_connection(
    broker: RunningBroker, api_key: int, version: int, flexible: bool, body: bytes
) -> None:
    kafka = KafkaSocket(broker)
    kafka.send(api_key, version, body, flexible)
    assert kafka.is_closed_by_peer()
    kafka.close()
    still_serves(broker)


def test_a_truncated_frame_and_a_dropped_connection_leave_the_broker_serving(
    broker: RunningBroker,
) -> None:
    kafka = KafkaSocket(broker)
    kafka.send_raw(struct.pack(">ihhi", 100, 18, 3, 1) + b"\x00\x04te")
    kafka.close()
    still_serves(broker)


def test_unknown_api_keys_and_versions(broker: RunningBroker) -> None:
    kafka = KafkaSocket(broker)
    correlation_id = kafka.send(18, 99, b"", False)
    received_id, error, entries = read_api_versions(kafka.read_frame(), False)
    assert (received_id, error) == (correlation_id, 35)
    assert (18, 0, 5) in entries and (0, 0, 12) in entries and (1, 4, 12) in entries
    assert (11, 0, 9) in entries and (9, 1, 8) in entries  # JoinGroup, OffsetFetch
    assert (22, 0, 5) in entries and (23, 2, 4) in entries  # producer ids, leader epochs
    assert (24, 0, 5) in entries and (26, 0, 5) in entries  # AddPartitionsToTxn, EndTxn
    assert (17, 0, 1) in entries and (36, 0, 2) in entries  # SASL

    kafka.send(1, 3, b"", False)  # Fetch v3: below the versions served
    assert kafka.is_closed_by_peer()
    kafka.close()

    kafka = KafkaSocket(broker)
    kafka.send(9999, 0, b"", False)
    assert kafka.is_closed_by_peer()
    kafka.close()
    still_serves(broker)


def test_produce_v2_is_refused_on_every_partition_and_writes_nothing(
    broker: RunningBroker,
) -> None:
    create_topic(broker.bootstrap, "legacy")
    records = bytes(40)  # a message set v0/v1 would be here
    body = struct.pack(">hi", 1, 1000) + struct.pack(">i", 1) + struct.pack(">h", 6) + b"legacy"
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(records)) + records
    kafka = KafkaSocket(broker)
    correlation_id = kafka.send(0, 2, body, False)
    reader = ByteReader(memoryview(kafka.read_frame()))
    assert reader.int32() == correlation_id
    assert reader.int32() == 1 and reader.string(False, False) == "legacy"
    assert reader.int32() == 1
    assert (reader.int32(), reader.int16(), reader.int64()) == (0, 35, -1)
    kafka.close()
    log = broker.broker.log_manager.get_log(_tp("legacy", 0))
    assert log.log_end_offset == 0


def _tp(topic: str, partition: int):
    from odradek.topic_partition import TopicPartition

    return TopicPartition(topic, partition)


# --- order, zero copy, metrics ---------------------------------------------------------------


def test_responses_leave_in_request_order(broker: RunningBroker) -> None:
    """A fetch that waits for data answers before the ApiVersions sent after it."""
    from kafka.protocol.consumer import FetchRequest

    create_topic(broker.bootstrap, "order")
    fetch = FetchRequest[11](
        replica_id=-1,
        max_wait_ms=400,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic="order",
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    kafka = KafkaSocket(broker)
    started = time.monotonic()
    fetch_id = kafka.send_message(fetch, 11)
    versions_id = kafka.send(18, 3, api_versions_v3(), True)
    first = struct.unpack(">i", kafka.read_frame()[:4])[0]
    second = struct.unpack(">i", kafka.read_frame()[:4])[0]
    assert (first, second) == (fetch_id, versions_id)
    assert time.monotonic() - started >= 0.35
    kafka.close()


def test_kafka_fetches_send_records_with_sendfile(broker: RunningBroker) -> None:
    topic = "zero-copy"
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for n in range(200):
        producer.produce(topic, value=bytes(1000) + b"%d" % n)
    assert producer.flush(30) == 0
    before = broker.metrics()[SENDFILE]

    received = [message.value() for message in consume(broker.bootstrap, topic, 0, 200)]

    assert received == [bytes(1000) + b"%d" % n for n in range(200)]
    assert broker.metrics()[SENDFILE] - before >= 200 * 1000
    requests = broker.metrics()
    assert requests['odradek_requests_total{api="Fetch",error="NONE",protocol="kafka"}'] >= 1


# --- across protocols ------------------------------------------------------------------------


def test_what_one_protocol_writes_the_other_reads(broker: RunningBroker, tmp_path: Path) -> None:
    lines = [f"k{n}\tvalue {n}" for n in range(20)]
    result = CliRunner().invoke(
        cli,
        [
            "produce",
            "crossing",
            "--partition",
            "0",
            "--key-separator",
            "\t",
            "--bootstrap",
            broker.bootstrap,
        ],
        input="\n".join(lines) + "\n",
    )
    assert result.exit_code == 0, result.output

    received = [
        (message.offset(), message.key(), message.value())
        for message in consume(broker.bootstrap, "crossing", 0, 20)
    ]
    assert received == [(n, b"k%d" % n, b"value %d" % n) for n in range(20)]

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "zstd"}
    )
    for n in range(20, 30):
        producer.produce(
            "crossing",
            key=b"k%d" % n,
            value=b"value %d" % n,
            partition=0,
            headers=[("h", b"v%d" % n)],
        )
    assert producer.flush(30) == 0
    result = CliRunner().invoke(
        cli,
        [
            "consume",
            "crossing",
            "--from-beginning",
            "--max-messages",
            "30",
            "--format",
            "json",
            "--timeout-ms",
            "10000",
            "--bootstrap",
            broker.bootstrap,
        ],
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (n, f"k{n}", f"value {n}") for n in range(30)
    ]
    assert records[25]["headers"] == [{"key": "h", "value": "v25"}]


def test_topic_ids_survive_a_restart(tmp_path: Path) -> None:
    with running_broker(tmp_path) as first:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": first.bootstrap})
        admin.create_topics([confluent_kafka.admin.NewTopic("kept", 2)])["kept"].result(10)
        before = admin.describe_topics(confluent_kafka.TopicCollection(["kept"]))["kept"].result(10)
        del admin
    with running_broker(tmp_path) as second:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": second.bootstrap})
        after = admin.describe_topics(confluent_kafka.TopicCollection(["kept"]))["kept"].result(10)
    assert str(after.topic_id) == str(before.topic_id)
    assert str(before.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"


def test_metadata_returns_the_advertised_listener(tmp_path: Path) -> None:
    settings = {"advertised.listeners": "PLAINTEXT://localhost:0"}  # port 0: the one bound
    with running_broker(tmp_path, settings) as running:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": running.bootstrap})
        [advertised] = admin.list_topics(timeout=10).brokers.values()
        assert (advertised.host, advertised.port) == ("localhost", running.port)
        with running.connect() as client:
            assert client.call(ApiVersionsRequest()).broker_id == 0


KCAT = shutil.which("kcat")


@pytest.mark.skipif(KCAT is None and not os.environ.get("CI"), reason="kcat is not installed")
def test_kcat_lists_produces_and_consumes(broker: RunningBroker) -> None:
    assert KCAT is not None, "CI installs kcat (.ci/run)"
    listing = subprocess.run(
        [KCAT, "-b", broker.bootstrap, "-L"], capture_output=True, text=True, timeout=30
    )
    assert listing.returncode == 0 and "1 brokers:" in listing.stdout, listing.stderr
    produced = subprocess.run(
        [KCAT, "-b", broker.bootstrap, "-P", "-t", "kcat", "-z", "snappy", "-K", ":"],
        input="a:1\nb:2\nc:3\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [
            KCAT,
            "-b",
            broker.bootstrap,
            "-C",
            "-t",
            "kcat",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %k %s\n",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.stdout.splitlines() == ["0 a 1", "1 b 2", "2 c 3"], consumed.stderr


def test_invalid_records_get_a_partition_error_and_never_reach_a_segment(
    broker: RunningBroker,
) -> None:
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    create_topic(broker.bootstrap, "guarded")
    good = bytes(confluent_free_batch())
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    before = broker.metrics()
    kafka = KafkaSocket(broker)
    for records, expected in ((bytes(corrupt), 2), (b"\x00" * 7, 2), (good, 0)):
        request = ProduceRequest[9](
            transactional_id=None,
            acks=1,
            timeout_ms=1000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name="guarded",
                    partition_data=[
                        ProduceRequest.TopicProduceData.PartitionProduceData(
                            index=0, records=records
                        )
                    ],
                )
            ],
        )
        kafka.send_message(request, 9)
        frame = kafka.read_frame()
        response = ProduceResponse[9].decode(frame[5:])  # correlation id, header tags
        [topic] = response.responses
        [partition] = topic.partition_responses
        assert partition.error_code in ((expected,) if expected == 0 else (2, 87, 42)), partition
    kafka.close()
    after = broker.metrics()
    assert sum(after.get(name, 0.0) - before.get(name, 0.0) for name in PRODUCE_ERRORS) == 2
    log = broker.broker.log_manager.get_log(_tp("guarded", 0))
    assert log.log_end_offset == 1  # only the good batch


PRODUCE_ERRORS = tuple(
    f'odradek_partition_errors_total{{api="Produce",error="{name}"}}'
    for name in ("CORRUPT_MESSAGE", "INVALID_RECORD", "INVALID_REQUEST")
)


def confluent_free_batch() -> bytes:
    """One valid record batch, built by odradek's own builder."""
    from server_helpers import batch

    return batch(1)


def test_offset_out_of_range_carries_the_partition_offsets(broker: RunningBroker) -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    create_topic(broker.bootstrap, "range")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for n in range(5):
        producer.produce("range", value=b"%d" % n, partition=0)
    assert producer.flush(30) == 0
    fetch = FetchRequest[12](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=1,  # read_committed reads what read_uncommitted reads
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic="range",
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for offset in (99, 2)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    counted = 'odradek_partition_errors_total{api="Fetch",error="OFFSET_OUT_OF_RANGE"}'
    before = broker.metrics().get(counted, 0.0)
    kafka = KafkaSocket(broker)
    kafka.send_message(fetch, 12)
    response = FetchResponse[12].decode(kafka.read_frame()[5:])
    kafka.close()
    assert broker.metrics()[counted] == before + 1  # counted as the msgpack protocol's are
    assert (response.error_code, response.session_id) == (0, 0)
    [topic] = response.responses
    out_of_range, data = topic.partitions
    assert (out_of_range.error_code, out_of_range.high_watermark) == (1, 5)
    assert (out_of_range.log_start_offset, out_of_range.last_stable_offset) == (0, 5)
    assert data.error_code == 0 and data.high_watermark == 5 and data.records


def test_pipelined_produces_apply_in_arrival_order(broker: RunningBroker) -> None:
    from kafka.protocol.producer import ProduceRequest
    from server_helpers import batch

    create_topic(broker.bootstrap, "arrival")
    kafka = KafkaSocket(broker)
    sent = []
    for n in range(50):
        records = batch(1, value_size=100 + n)  # the size tells the batches apart
        request = ProduceRequest[9](
            transactional_id=None,
            acks=1,
            timeout_ms=1000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name="arrival",
                    partition_data=[
                        ProduceRequest.TopicProduceData.PartitionProduceData(
                            index=0, records=records
                        )
                    ],
                )
            ],
        )
        sent.append(kafka.send_message(request, 9))
    received = [struct.unpack(">i", kafka.read_frame()[:4])[0] for _ in sent]
    kafka.close()
    assert received == sent
    values = [len(m.value()) for m in consume(broker.bootstrap, "arrival", 0, 50)]
    assert values == [100 + n for n in range(50)]


def test_log_append_time_topics_stamp_records_on_arrival(broker: RunningBroker) -> None:
    create_topic(broker.bootstrap, "stamped", **{"message.timestamp.type": "LogAppendTime"})
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    delivered = []
    producer.produce(
        "stamped", value=b"x", timestamp=1_000, on_delivery=lambda e, m: delivered.append(m)
    )
    assert producer.flush(30) == 0
    before = int(time.time() * 1000) - 60_000
    [message] = consume(broker.bootstrap, "stamped", 0, 1)
    kind, stamp = message.timestamp()
    assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME and stamp > before
    assert delivered[0].timestamp()[1] == stamp  # the produce response carried it


def test_a_waiting_fetch_answers_when_data_arrives_and_the_first_batch_comes_whole(
    broker: RunningBroker,
) -> None:
    from kafka.protocol.consumer import FetchResponse

    create_topic(broker.bootstrap, "long-poll")
    kafka = KafkaSocket(broker)
    started = time.monotonic()
    kafka.send_message(fetch_v12("long-poll", 0, max_wait_ms=10_000, partition_max_bytes=10), 12)
    time.sleep(0.3)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("long-poll", value=bytes(5000), partition=0)
    assert producer.flush(30) == 0
    response = FetchResponse[12].decode(kafka.read_frame()[5:])
    kafka.close()
    assert 0.3 <= time.monotonic() - started < 5  # woken by the append, not at max_wait
    [topic] = response.responses
    [partition] = topic.partitions
    assert partition.error_code == 0 and partition.high_watermark == 1
    assert len(partition.records) > 5000  # a whole batch although partition_max_bytes is 10


def test_silent_connections_count_against_max_connections(tmp_path: Path) -> None:
    with running_broker(tmp_path, {"max.connections": "2"}) as running:
        silent = [socket.create_connection(("127.0.0.1", running.port)) for _ in range(2)]
        refused = KafkaSocket(running)
        assert refused.is_closed_by_peer()
        refused.close()
        silent.pop().close()
        time.sleep(0.2)
        kafka = KafkaSocket(running)
        kafka.send(18, 3, api_versions_v3(), True)
        assert read_api_versions(kafka.read_frame(), True)[1] == 0
        kafka.close()
        for sock in silent:
            sock.close()
