"""odradek's transactional producer and read_committed consumer against ``odradek serve``:
commit and abort as Kafka's semantics say, to odradek's consumer and to librdkafka's."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from serve_process import ServeProcess

from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.client.consumer_coordinator import ConsumerGroupMetadata
from odradek.client.transaction_manager import (
    IllegalStateError,
    TransactionAbortedError,
    TransactionState,
)
from odradek.errors import (
    InvalidConfigError,
    InvalidProducerEpochError,
    KafkaError,
    ProducerFencedError,
)
from odradek.topic_partition import TopicPartition

POLL_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ServeProcess(
        tmp_path_factory.mktemp("broker") / "data",
        "--set",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
    ) as process:
        yield process.bootstrap


@pytest.fixture
def topic(bootstrap: str, request: pytest.FixtureRequest) -> str:
    name = request.node.name.replace("[", "-").replace("]", "")[:200]
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 2)])
    finally:
        admin.close()
    return name


def transactional(bootstrap: str, transactional_id: str, **configs: object) -> Producer:
    configs.setdefault("linger_ms", 1)
    return Producer(bootstrap_servers=bootstrap, transactional_id=transactional_id, **configs)


def eventually(read: object, expected: object, timeout_s: float = POLL_TIMEOUT_S) -> None:
    """``read()`` comes to return ``expected`` (a commit's markers and offsets complete after
    EndTxn is answered, as in Kafka)."""
    deadline = time.monotonic() + timeout_s
    while (got := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert got == expected


def consume(bootstrap: str, topic: str, isolation_level: str, expected: int) -> list:
    """Every record of ``topic`` from the start, read until ``expected`` are read and then
    until the end offsets are passed (so extra records would show)."""
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    try:
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        records = []
        deadline = time.monotonic() + POLL_TIMEOUT_S
        while time.monotonic() < deadline:
            records += consumer.poll(200)
            if len(records) >= expected and all(
                consumer.position(tp) >= ends[tp] for tp in partitions
            ):
                break
        return records
    finally:
        consumer.close()


def values(records: list) -> list[bytes]:
    return sorted(record.value for record in records)


def test_a_committed_transaction_is_read_whole_after_its_commit(bootstrap: str, topic: str) -> None:
    producer = transactional(bootstrap, f"{topic}-tx")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(10):
            producer.send(topic, f"v{i}".encode(), partition=i % 2)
        producer.flush()
        # Sent, not committed: read_committed readers see nothing yet (the LSO holds them).
        assert consume(bootstrap, topic, "read_committed", 0) == []
        assert len(consume(bootstrap, topic, "read_uncommitted", 10)) == 10
        producer.commit_transaction()
    finally:
        producer.close()
    committed = consume(bootstrap, topic, "read_committed", 10)
    assert values(committed) == sorted(f"v{i}".encode() for i in range(10))
    # The markers take an offset each, and no consumer is handed one.
    uncommitted = consume(bootstrap, topic, "read_uncommitted", 10)
    assert values(uncommitted) == values(committed)
    offsets = sorted((r.partition, r.offset) for r in uncommitted)
    assert offsets == [(p, o) for p in (0, 1) for o in range(5)]


def test_an_aborted_transaction_is_never_read_committed(bootstrap: str, topic: str) -> None:
    producer = transactional(bootstrap, f"{topic}-tx")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(6):
            producer.send(topic, f"aborted-{i}".encode(), partition=i % 2)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, f"kept-{i}".encode(), partition=i % 2)
        producer.commit_transaction()
    finally:
        producer.close()
    committed = consume(bootstrap, topic, "read_committed", 4)
    assert values(committed) == sorted(f"kept-{i}".encode() for i in range(4))
    # read_uncommitted: the aborted records too, never a marker.
    uncommitted = consume(bootstrap, topic, "read_uncommitted", 10)
    assert len(uncommitted) == 10
    assert {r.partition: r.offset for r in committed if r.value == b"kept-0"}[0] == 4


def test_records_not_sent_when_the_transaction_aborts_fail(bootstrap: str, topic: str) -> None:
    producer = transactional(bootstrap, f"{topic}-tx", linger_ms=60000, batch_size=1 << 20)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        future = producer.send(topic, b"never", partition=0)
        producer.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            future.result(timeout=10)
    finally:
        producer.close()
    assert consume(bootstrap, topic, "read_committed", 0) == []


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(
    bootstrap: str, topic: str
) -> None:
    old = transactional(bootstrap, f"{topic}-tx")
    new = transactional(bootstrap, f"{topic}-tx")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send(topic, b"zombie", partition=0)
        old.flush()
        new.init_transactions()  # fences old; its open transaction is aborted
        new.begin_transaction()
        new.send(topic, b"fresh", partition=0)
        new.commit_transaction()
        # Its next batch is refused with INVALID_PRODUCER_EPOCH, which leaves the transaction
        # to abort (KIP-588: so it is after a timeout abort too); the abort says fenced.
        old.send(topic, b"more", partition=0)
        with pytest.raises(InvalidProducerEpochError, match="must be aborted"):
            old.commit_transaction()
        with pytest.raises(ProducerFencedError):
            old.abort_transaction()
        with pytest.raises(ProducerFencedError):
            old.begin_transaction()
    finally:
        old.close()
        new.close()
    assert values(consume(bootstrap, topic, "read_committed", 1)) == [b"fresh"]


def test_offsets_sent_to_a_transaction_commit_with_it(bootstrap: str, topic: str) -> None:
    group = f"{topic}-group"
    metadata = ConsumerGroupMetadata(group, -1, "", None)
    producer = transactional(bootstrap, f"{topic}-tx")
    admin = Admin(bootstrap_servers=bootstrap)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"out", partition=0)
        producer.send_offsets_to_transaction({TopicPartition(topic, 1): 42}, metadata)
        producer.abort_transaction()
        assert admin.list_consumer_group_offsets(group) == {}
        producer.begin_transaction()
        producer.send(topic, b"out", partition=0)
        producer.send_offsets_to_transaction({TopicPartition(topic, 1): 43}, metadata)
        producer.commit_transaction()
        eventually(lambda: admin.list_consumer_group_offsets(group), {TopicPartition(topic, 1): 43})
    finally:
        admin.close()
        producer.close()


def test_the_transactional_methods_keep_kafkas_order(bootstrap: str, topic: str) -> None:
    producer = transactional(bootstrap, f"{topic}-tx")
    try:
        with pytest.raises(IllegalStateError, match="init_transactions"):
            producer.begin_transaction()
        with pytest.raises(IllegalStateError, match="UNINITIALIZED"):
            producer.send(topic, b"x")
        producer.init_transactions()
        with pytest.raises(IllegalStateError, match="READY"):
            producer.send(topic, b"x")
        with pytest.raises(IllegalStateError, match="commit"):
            producer.commit_transaction()
        producer.begin_transaction()
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
        producer.commit_transaction()  # nothing sent: nothing to end at the coordinator
        assert producer._producer._transactions.state is TransactionState.READY
    finally:
        producer.close()
    with pytest.raises(InvalidConfigError, match="idempotence"):
        Producer(bootstrap_servers=bootstrap, transactional_id="x", enable_idempotence=False)
    with pytest.raises(IllegalStateError, match="transactional_id"):
        Producer(bootstrap_servers=bootstrap).begin_transaction()


def test_librdkafka_read_committed_sees_what_odradeks_producer_committed(
    bootstrap: str, topic: str
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = transactional(bootstrap, f"{topic}-tx")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0)
        producer.flush()  # written, then aborted (unsent records would just fail)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"committed-0", partition=0)
        producer.send(topic, b"committed-1", partition=1)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"open", partition=0)
        producer.flush()  # sent, left open: read_committed readers stop before it
        seen = []
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": f"{topic}-{isolation}",
                    "isolation.level": isolation,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            try:
                consumer.subscribe([topic])
                got: list[bytes] = []
                deadline = time.monotonic() + POLL_TIMEOUT_S
                want = 2 if isolation == "read_committed" else 4
                while time.monotonic() < deadline and len(got) < want:
                    message = consumer.poll(0.5)
                    if message is not None and message.error() is None:
                        got.append(message.value())
                end = time.monotonic() + 2  # nothing more comes
                while time.monotonic() < end:
                    message = consumer.poll(0.2)
                    if message is not None and message.error() is None:
                        got.append(message.value())
                seen.append(sorted(got))
            finally:
                consumer.close()
        producer.commit_transaction()
    finally:
        producer.close()
    assert seen[0] == [b"committed-0", b"committed-1"]
    assert seen[1] == [b"aborted", b"committed-0", b"committed-1", b"open"]


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(
    bootstrap: str, topic: str
) -> None:
    producer = transactional(bootstrap, f"{topic}-tx", transaction_timeout_ms=1000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"too-late", partition=0)
        producer.flush()
        admin = Admin(bootstrap_servers=bootstrap)
        try:
            eventually(
                lambda: admin.describe_transactions([f"{topic}-tx"])[f"{topic}-tx"].state,
                "CompleteAbort",
            )
        finally:
            admin.close()
        with pytest.raises(KafkaError) as raised:
            producer.commit_transaction()
        failure = raised.value
    finally:
        producer.close()
    assert isinstance(failure, InvalidProducerEpochError | ProducerFencedError), failure
    assert consume(bootstrap, topic, "read_committed", 0) == []
    # The transactional id goes on with a new instance.
    again = transactional(bootstrap, f"{topic}-tx")
    try:
        again.init_transactions()
        again.begin_transaction()
        again.send(topic, b"in-time", partition=0)
        again.commit_transaction()
    finally:
        again.close()
    assert values(consume(bootstrap, topic, "read_committed", 1)) == [b"in-time"]
