"""A transaction's completion record (CompleteCommit in ``__transaction_state``) is taken
before it is fsync'ed: a power cut right after a commit loses it, and the restarted broker,
finding the commit decided (PrepareCommit) but not complete, writes its markers again. The
transaction is read whole, once, by read_committed readers, no partition is left with an
open transaction (the last stable offset reaches the log end), and the producer's next
instance goes on. Once the producer's next transaction has a partition, the completion is
durable with it (the same partition of ``__transaction_state``, fsync'ed after it): a cut then
leaves that transaction open, and the coordinator aborts it at its timeout. ``odradek serve``
runs on the power-cut file system (tests/powercut_fs.py) and dies with the power.
"""

from __future__ import annotations

import signal
import time

import pytest
from serve_process import ServeProcess

from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.values.list_offsets import LATEST_TIMESTAMP
from odradek.topic_partition import TopicPartition
from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import powercut_fs  # noqa: F401

TOPIC = "t"
TP = TopicPartition(TOPIC, 0)
TRANSACTIONAL_ID = "pc-tx"
SETTINGS = (
    "--set",
    "transaction.state.log.num.partitions=1",
    "--set",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
)
REDONE = "completing the commit of producer"
pytestmark = pytest.mark.timeout(300)


def commit(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer(bootstrap_servers=bootstrap, transactional_id=TRANSACTIONAL_ID)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for value in values:
            producer.send(TOPIC, value, partition=0)
        producer.commit_transaction()
    finally:
        producer.close()


def create_topic(bootstrap: str) -> None:
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, 1)])
    finally:
        admin.close()


def state_of(bootstrap: str) -> str:
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        return admin.describe_transactions([TRANSACTIONAL_ID])[TRANSACTIONAL_ID].state
    finally:
        admin.close()


def eventually(bootstrap: str, wanted: str = "CompleteCommit") -> None:
    deadline = time.monotonic() + 30
    while (state := state_of(bootstrap)) != wanted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state == wanted


def read_committed(bootstrap: str) -> tuple[list[bytes], int, int]:
    """Every value read_committed readers get, the last stable offset and the log end."""
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        stable = admin.list_offsets({TP: LATEST_TIMESTAMP}, IsolationLevel.TXN_COMMITTED)[TP].offset
        end = admin.list_offsets({TP: LATEST_TIMESTAMP}, IsolationLevel.LOG_END)[TP].offset
    finally:
        admin.close()
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([TP])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while consumer.position(TP) < stable and time.monotonic() < deadline:
            values += [record.value for record in consumer.poll(200)]
        return values, stable, end
    finally:
        consumer.close()


def test_a_completion_lost_to_a_power_cut_is_redone_at_start_up(fs: PowerCutFS) -> None:
    data = fs.mount / "data"
    broker = ServeProcess(data, *SETTINGS)
    try:
        create_topic(broker.bootstrap)
        commit(broker.bootstrap, [b"a", b"b", b"c"])
        eventually(broker.bootstrap)
        fs.cut(abandon=lambda: broker.stop(signal.SIGKILL))
    finally:
        broker.stop(signal.SIGKILL)

    with ServeProcess(data, *SETTINGS) as broker:
        eventually(broker.bootstrap)
        # The completion was not durable: the restart ended the decided commit again.
        assert any(REDONE in line for line in broker.lines), (
            "the CompleteCommit record survived the cut: the scenario did not happen"
        )
        values, stable, end = read_committed(broker.bootstrap)
        assert values == [b"a", b"b", b"c"]
        assert stable == end  # no open transaction pins the partition
        commit(broker.bootstrap, [b"d"])  # the producer's next instance goes on
        eventually(broker.bootstrap)
        values, stable, end = read_committed(broker.bootstrap)
        assert values == [b"a", b"b", b"c", b"d"]
        assert stable == end


def test_the_next_transaction_makes_the_completion_durable(fs: PowerCutFS) -> None:
    data = fs.mount / "data"
    broker = ServeProcess(data, *SETTINGS)
    try:
        create_topic(broker.bootstrap)
        commit(broker.bootstrap, [b"a"])
        eventually(broker.bootstrap)
        producer = Producer(
            bootstrap_servers=broker.bootstrap,
            transactional_id=TRANSACTIONAL_ID,
            transaction_timeout_ms=1000,
        )
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(TOPIC, b"never committed", partition=0)
            producer.flush()  # answered: the partition is in the transaction, durably
            fs.cut(abandon=lambda: broker.stop(signal.SIGKILL))
        finally:
            producer.close(timeout=0)
    finally:
        broker.stop(signal.SIGKILL)

    with ServeProcess(data, *SETTINGS) as broker:
        # The open transaction survived, so its partition is known and its timeout aborts it.
        eventually(broker.bootstrap, "CompleteAbort")
        assert not any(REDONE in line for line in broker.lines)
        values, stable, end = read_committed(broker.bootstrap)
        assert values == [b"a"]
        assert stable == end
