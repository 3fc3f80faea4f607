"""read_committed on Kafka's protocol: Fetch stops at the last stable offset and lists the
aborted transactions of the range, ListOffsets latest answers the LSO, on the general path
and on the one answering at once, with a real client (librdkafka) and raw requests decoded
by Kafka's schemas. The transactional batches and markers are written as the transaction
coordinator and a transactional producer write them (the coordinator is not this test's)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from kafka_helpers import create_topic, kafka_call
from server_helpers import RunningBroker, running_broker

from odradek.protocol.fetch import FetchRequest
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.kafka.api_versions import DESCRIBE_PRODUCERS, FETCH, LIST_OFFSETS
from odradek.protocol.list_offsets import ListOffsetsPartition, ListOffsetsRequest
from odradek.protocol.values.fetch import AbortedTransaction, FetchPartition
from odradek.protocol.values.produce import Acks
from odradek.record.record_batch_builder import build_batch
from odradek.server.transaction.transaction_marker import TransactionMarker
from odradek.topic_partition import TopicPartition

TOPIC = "rc"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("read-committed")) as running:
        create_topic(running.bootstrap, TOPIC)
        yield running


def append(broker: RunningBroker, pid: int, seq: int, values: list[bytes]) -> None:
    """A batch as a transactional producer (pid >= 0) or a plain one (pid -1) sends it."""
    now = int(time.time() * 1000)
    records = build_batch(
        [(now, b"k", value, ()) for value in values],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq if pid >= 0 else -1,
        is_transactional=pid >= 0,
    )
    partition = broker.broker.replica_manager.partition(TOPIC, 0)

    async def run() -> None:
        await partition.append(records, Acks.ALL)
        await partition.durable(partition.log.log_end_offset - 1)

    broker.loop_thread.run(run(), timeout=30)


def end_transaction(broker: RunningBroker, pid: int, committed: bool) -> None:
    marker = TransactionMarker(pid, 0, 0, committed, (TopicPartition(TOPIC, 0),))
    results = broker.loop_thread.run(
        broker.broker.replica_manager.write_transaction_markers([marker]), timeout=30
    )
    assert results == {TopicPartition(TOPIC, 0): None}


def consume(broker: RunningBroker, isolation: str, until: int) -> list[bytes]:
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "rc-test",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    reader.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    values = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        message = reader.poll(0.2)
        if message is not None and not message.error():
            values.append(message.value())
        position = reader.position([confluent_kafka.TopicPartition(TOPIC, 0)])[0].offset
        if position >= until:
            time.sleep(0.5)  # anything a wrong broker would still hand out comes now
            message = reader.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
            break
    reader.close()
    return values


def fetch(broker: RunningBroker, offset: int, version: int, isolation_level: int = 1) -> dict:
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    response = kafka_call(broker, FETCH, version, body)
    return response["responses"][0]["partitions"][0]


def latest(broker: RunningBroker, isolation_level: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    response = kafka_call(broker, LIST_OFFSETS, 7, body)
    return response["topics"][0]["partitions"][0]["offset"]


def describe_producers(broker: RunningBroker, partition: int = 0) -> dict:
    body = {"topics": [{"name": TOPIC, "partition_indexes": [partition]}]}
    response = kafka_call(broker, DESCRIBE_PRODUCERS, 0, body)
    (topic,) = response["topics"]
    (answer,) = topic["partitions"]
    assert answer["partition_index"] == partition
    return answer


def test_read_committed_sees_committed_transactions_only_and_waits_at_the_lso(broker) -> None:
    append(broker, 7, 0, [b"a0", b"a1", b"a2"])  # 0-2, aborted below
    append(broker, -1, 0, [b"p3"])  # 3
    append(broker, 8, 0, [b"c4", b"c5"])  # 4-5, committed below
    end_transaction(broker, 7, committed=False)  # 6
    end_transaction(broker, 8, committed=True)  # 7
    append(broker, 9, 0, [b"o8"])  # 8, open
    append(broker, -1, 0, [b"p9"])  # 9

    log = broker.broker.replica_manager.partition(TOPIC, 0).log
    assert (log.high_watermark, log.last_stable_offset) == (10, 8)
    assert latest(broker, 1) == 8
    assert latest(broker, 0) == 10
    for version in (4, 11, 12):
        found = fetch(broker, 0, version)
        assert found["aborted_transactions"] == [{"producer_id": 7, "first_offset": 0}]
        assert (found["high_watermark"], found["last_stable_offset"]) == (10, 8)
        at_lso = fetch(broker, 8, version)  # finds nothing: the answer-at-once shape
        assert (at_lso["high_watermark"], at_lso["last_stable_offset"]) == (10, 8)
        assert at_lso["aborted_transactions"] == [] and not at_lso["records"]
        uncommitted = fetch(broker, 0, version, isolation_level=0)
        assert uncommitted["aborted_transactions"] is None
        assert uncommitted["last_stable_offset"] == 8  # the partition's LSO, as Kafka answers

    assert consume(broker, "read_committed", until=8) == [b"p3", b"c4", b"c5"]
    assert consume(broker, "read_uncommitted", until=10) == [
        b"a0", b"a1", b"a2", b"p3", b"c4", b"c5", b"o8", b"p9"
    ]  # fmt: skip

    # odradek's own protocol: isolation txn_committed, the same answer.
    with broker.connect() as client:
        answer = client.call(
            FetchRequest(
                (FetchPartition(TOPIC, 0, 0),),
                max_wait_ms=0,
                isolation=IsolationLevel.TXN_COMMITTED,
            )
        ).partitions[0]
        assert (answer.high_watermark, answer.last_stable_offset) == (10, 8)
        assert answer.aborted_transactions == (AbortedTransaction(7, 0),)
        plain = client.call(FetchRequest((FetchPartition(TOPIC, 0, 0),), max_wait_ms=0))
        assert plain.partitions[0].aborted_transactions == ()
        assert plain.partitions[0].last_stable_offset == 8
        listed = client.call(
            ListOffsetsRequest(
                (ListOffsetsPartition(TOPIC, 0, -1),), isolation=IsolationLevel.TXN_COMMITTED
            )
        )
        assert listed.partitions[0].offset == 8

    producers = describe_producers(broker)
    assert producers["error_code"] == 0
    assert {p["producer_id"]: (p["coordinator_epoch"], p["current_txn_start_offset"],
            p["last_sequence"], p["producer_epoch"]) for p in producers["active_producers"]} == {
        7: (0, -1, 2, 0), 8: (0, -1, 1, 0), 9: (-1, 8, 0, 0)
    }  # fmt: skip
    assert describe_producers(broker, partition=3)["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION

    end_transaction(broker, 9, committed=True)  # 10
    assert log.last_stable_offset == log.high_watermark == 11
    assert latest(broker, 1) == 11
    assert consume(broker, "read_committed", until=11) == [b"p3", b"c4", b"c5", b"o8", b"p9"]
    at_end = fetch(broker, 11, 12)
    assert (at_end["high_watermark"], at_end["last_stable_offset"]) == (11, 11)
