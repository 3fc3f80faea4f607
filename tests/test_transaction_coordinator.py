"""The transaction coordinator's state machine against Kafka's (TransactionCoordinator.scala
and its tests): InitProducerId (new ids, epoch bumps, fencing a producer with an open
transaction), AddPartitionsToTxn's errors, EndTxn commit/abort and retries under transaction
versions 1 and 2, the markers written and the completion, the timeout abort, the expiry of
idle ids, and every state rebuilt from ``__transaction_state`` after a restart (a transaction
found prepared is ended then). On a running broker; the clock is the test's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from server_helpers import RunningBroker, running_broker

from odradek.clock import MockClock
from odradek.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
)
from odradek.record.control_record import EndTransactionMarker
from odradek.record.memory_records import MemoryRecords
from odradek.server.transaction.transaction_coordinator import (
    ProducerIdAndEpoch,
    TransactionCoordinator,
)
from odradek.server.transaction.transaction_log import read_key, read_value
from odradek.server.transaction.transaction_marker import TransactionMarker
from odradek.server.transaction.transaction_state import TransactionState
from odradek.server.transaction.transaction_state_manager import TRANSACTION_STATE_TOPIC_NAME
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.topic_partition import TopicPartition

S = TransactionState
TOPIC = "orders"
TP0, TP1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
SETTINGS = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "2",
    "transaction.max.timeout.ms": "60000",
    "transactional.id.expiration.ms": "3600000",
}


class RefusingMarkers:
    """Partition leaders that refuse every marker (an injected failure: the markers are
    retried until they are written)."""

    async def write_transaction_markers(
        self, markers: Sequence[TransactionMarker]
    ) -> dict[TopicPartition, KafkaError | None]:
        refusal = KafkaError("the partition cannot take the marker now")
        return {tp: refusal for marker in markers for tp in marker.partitions}


class Harness:
    def __init__(self, running: RunningBroker, clock: MockClock) -> None:
        self.running = running
        self.clock = clock

    def markers(self, tp: TopicPartition) -> list[tuple[int, int, bool]]:
        """The control batches of ``tp``: (producer id, epoch, committed)."""
        log = self.running.broker.log_manager.get_log(tp)
        info = log.read(0, 1 << 20, FetchIsolation.LOG_END, True)
        if info.records is None:
            return []
        return [
            (
                batch.producer_id,
                batch.producer_epoch,
                EndTransactionMarker.from_record(record).committed,
            )
            for batch in MemoryRecords(info.records.read_bytes()).batches()
            if batch.is_control
            for record in batch.records()
        ]

    @property
    def coordinator(self) -> TransactionCoordinator:
        return self.running.broker.transaction_coordinator

    def run(self, coroutine):  # type: ignore[no-untyped-def]
        return self.running.loop_thread.run(coroutine, timeout=30)

    def init(self, transactional_id: str, timeout_ms: int = 10000, expected=None):  # type: ignore[no-untyped-def]
        return self.run(self.coordinator.init_producer_id(transactional_id, timeout_ms, expected))

    def add(self, transactional_id: str, producer: ProducerIdAndEpoch, *partitions, version=0):  # type: ignore[no-untyped-def]
        return self.run(
            self.coordinator.add_partitions_to_transaction(
                transactional_id,
                producer.producer_id,
                producer.producer_epoch,
                partitions,
                version,
            )
        )

    def end(self, transactional_id: str, producer: ProducerIdAndEpoch, committed: bool, version=0):  # type: ignore[no-untyped-def]
        return self.run(
            self.coordinator.end_transaction(
                transactional_id, producer.producer_id, producer.producer_epoch, committed, version
            )
        )

    def state(self, transactional_id: str) -> TransactionState:
        return self.running.loop_thread.call(
            lambda: self.coordinator.describe_transaction(transactional_id).state
        )

    def settle(self, transactional_id: str) -> TransactionState:
        """The state once the markers under way are written and the completion recorded."""

        async def wait() -> TransactionState:
            for _ in range(500):
                metadata = self.coordinator.state_manager.get(transactional_id)
                if metadata is None or not metadata.pending_transition_in_progress:
                    if metadata is None or metadata.state not in (
                        S.PREPARE_COMMIT,
                        S.PREPARE_ABORT,
                    ):
                        return metadata.state if metadata else S.DEAD
                await asyncio.sleep(0.01)
            raise AssertionError(f"{transactional_id} did not settle")

        return self.run(wait())

    def records(self) -> list[tuple[str, object]]:
        """Every ``__transaction_state`` record: (transactional id, value or None)."""
        found = []
        log_manager = self.running.broker.log_manager
        for tp in log_manager.partitions(TRANSACTION_STATE_TOPIC_NAME):
            log = log_manager.get_log(tp)
            info = log.read(0, 1 << 24, FetchIsolation.LOG_END, True)
            if info.records is None:
                continue
            for batch in MemoryRecords(info.records.read_bytes()).batches():
                for record in batch.records():
                    found.append((read_key(record.key), read_value(record.value)))
        return found


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    with harness_on(tmp_path) as running:
        yield running


@contextmanager
def harness_on(tmp_path: Path, clock: MockClock | None = None) -> Iterator[Harness]:
    mock_clock = clock or MockClock()
    with running_broker(tmp_path, SETTINGS, mock_clock) as running:
        if not running.broker.log_manager.partitions(TOPIC):
            running.loop_thread.call(running.broker.topic_admin.create_topic, TOPIC, 2, {})
        yield Harness(running, mock_clock)


def test_a_new_transactional_id_gets_a_producer_id_and_each_init_the_next_epoch(
    harness: Harness,
) -> None:
    first = harness.init("app")
    again = harness.init("app")
    assert first.producer_epoch == 0 and first.producer_id >= 0
    assert again == ProducerIdAndEpoch(first.producer_id, 1)
    other = harness.init("other")
    assert other.producer_id != first.producer_id
    # Each change is a record of Kafka's layout in the id's partition of __transaction_state.
    mine = [(value.state, value.producer_epoch) for tid, value in harness.records() if tid == "app"]
    assert mine == [(S.EMPTY, 0), (S.EMPTY, 1)]
    assert harness.state("app") is S.EMPTY


def test_a_transaction_timeout_above_the_maximum_is_refused(harness: Harness) -> None:
    with pytest.raises(InvalidTransactionTimeoutError):
        harness.init("app", timeout_ms=60001)
    with pytest.raises(InvalidTransactionTimeoutError):
        harness.init("app", timeout_ms=0)


def test_add_partitions_checks_the_producer_as_kafka_does(harness: Harness) -> None:
    producer = harness.init("app")
    with pytest.raises(InvalidProducerIdMappingError):
        harness.add("app", ProducerIdAndEpoch(producer.producer_id + 100, 0), TP0)
    with pytest.raises(InvalidProducerIdMappingError):
        harness.add("unknown", producer, TP0)
    with pytest.raises(ProducerFencedError):
        harness.add("app", ProducerIdAndEpoch(producer.producer_id, 5), TP0)
    harness.add("app", producer, TP0)
    harness.add("app", producer, TP0)  # already in: answered at once, nothing written
    harness.add("app", producer, TP1)
    assert harness.state("app") is S.ONGOING
    states = [v.state for tid, v in harness.records() if tid == "app"]
    assert states == [S.EMPTY, S.ONGOING, S.ONGOING]
    metadata = harness.coordinator.describe_transaction("app")
    assert metadata.partitions == {TP0, TP1}


def test_commit_writes_markers_then_complete_commit_and_a_retry_is_answered(
    harness: Harness,
) -> None:
    producer = harness.init("app")
    with pytest.raises(InvalidTxnStateError):  # nothing open: Kafka's answer for Empty
        harness.end("app", producer, committed=True)
    harness.add("app", producer, TP0, TP1)
    answered = harness.end("app", producer, committed=True)
    assert answered == producer  # transaction version 1: the epoch stays
    assert harness.settle("app") is S.COMPLETE_COMMIT
    assert harness.markers(TP0) == harness.markers(TP1) == [(producer.producer_id, 0, True)]
    assert harness.end("app", producer, committed=True) == producer  # a retry
    with pytest.raises(InvalidTxnStateError):
        harness.end("app", producer, committed=False)
    states = [v.state for tid, v in harness.records() if tid == "app"]
    assert states == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    # The next transaction starts from CompleteCommit.
    harness.add("app", producer, TP1)
    assert harness.coordinator.describe_transaction("app").partitions == {TP1}


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(harness: Harness) -> None:
    old = harness.init("app")
    harness.add("app", old, TP0)
    with pytest.raises(ConcurrentTransactionsError):
        harness.init("app")
    assert harness.settle("app") is S.COMPLETE_ABORT
    assert harness.markers(TP0) == [(old.producer_id, 1, False)]  # at the fenced epoch
    assert harness.markers(TP1) == []
    new = harness.init("app")  # the retry
    assert new == ProducerIdAndEpoch(old.producer_id, 2)
    with pytest.raises(ProducerFencedError):
        harness.add("app", old, TP1)
    with pytest.raises(ProducerFencedError):
        harness.end("app", old, committed=True)
    states = [v.state for tid, v in harness.records() if tid == "app"]
    assert states == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT, S.COMPLETE_ABORT, S.EMPTY]


def test_transaction_version_2_adds_partitions_on_produce_and_bumps_the_epoch_per_transaction(
    harness: Harness,
) -> None:
    producer = harness.init("app")
    coordinator = harness.coordinator
    results = harness.run(
        coordinator.verify_or_add_partitions(
            "app", producer.producer_id, producer.producer_epoch, [TP0], implicit_add=True
        )
    )
    assert results == {TP0: None}
    # A partition of the transaction verifies; another is TRANSACTION_ABORTABLE (version 1).
    verified = coordinator.verify_partitions_in_transaction(
        "app", producer.producer_id, producer.producer_epoch, [TP0, TP1]
    )
    assert verified[TP0] is None and isinstance(verified[TP1], TransactionAbortableError)
    bumped = harness.end("app", producer, committed=True, version=2)
    assert bumped == ProducerIdAndEpoch(producer.producer_id, 1)
    assert harness.settle("app") is S.COMPLETE_COMMIT
    # The EndTxn retried with the old epoch is answered with the new one.
    assert harness.end("app", producer, committed=True, version=2) == bumped
    # An abort of a transaction never opened is allowed under version 2, and bumps again.
    aborted = harness.end("app", bumped, committed=False, version=2)
    assert aborted == ProducerIdAndEpoch(producer.producer_id, 2)
    assert harness.settle("app") is S.COMPLETE_ABORT
    values = [v for tid, v in harness.records() if tid == "app"]
    assert [(v.state, v.producer_epoch, v.client_transaction_version) for v in values] == [
        (S.EMPTY, 0, 0),
        (S.ONGOING, 0, 2),
        (S.PREPARE_COMMIT, 1, 2),
        (S.COMPLETE_COMMIT, 1, 2),
        (S.PREPARE_ABORT, 2, 2),
        (S.COMPLETE_ABORT, 2, 2),
    ]


def test_an_end_txn_at_the_bumped_epoch_waits_while_the_last_transaction_is_prepared(
    harness: Harness,
) -> None:
    """Transaction version 2, as Kafka 4.4: the Java client may send its next EndTxn (at the
    epoch the commit handed out) before the next transaction's first Produce, while the
    markers of the last one are still being written; it is answered the retriable
    CONCURRENT_TRANSACTIONS (commit or abort), not PRODUCER_FENCED, which kills the client."""
    producer = harness.init("app")
    coordinator = harness.coordinator
    harness.run(
        coordinator.verify_or_add_partitions(
            "app", producer.producer_id, producer.producer_epoch, [TP0], implicit_add=True
        )
    )
    # The partition refuses the marker: the commit stays prepared, the marker retried.
    writer = harness.running.broker.replica_manager
    write_markers = writer.write_transaction_markers
    writer.write_transaction_markers = RefusingMarkers().write_transaction_markers  # type: ignore[method-assign]
    bumped = harness.end("app", producer, committed=True, version=2)
    assert harness.state("app") is S.PREPARE_COMMIT
    for committed in (True, False):
        with pytest.raises(ConcurrentTransactionsError):
            harness.end("app", bumped, committed=committed, version=2)
    writer.write_transaction_markers = write_markers  # type: ignore[method-assign]
    assert harness.settle("app") is S.COMPLETE_COMMIT
    assert harness.markers(TP0) == [(producer.producer_id, 1, True)]


def test_a_produce_waiting_on_an_ending_transaction_is_woken_by_its_completion(
    harness: Harness,
) -> None:
    """What a transactional Produce refused CONCURRENT_TRANSACTIONS waits on: the ending
    transaction's CompleteCommit, not a fixed tick (the first Produce of each transaction)."""
    producer = harness.init("app")
    coordinator = harness.coordinator
    harness.run(
        coordinator.verify_or_add_partitions(
            "app", producer.producer_id, producer.producer_epoch, [TP0], implicit_add=True
        )
    )

    async def end_then_add() -> tuple[float, dict]:
        waiting = asyncio.ensure_future(coordinator.wait_for_a_completion(10.0))
        await asyncio.sleep(0)
        bumped = await coordinator.end_transaction(
            "app", producer.producer_id, producer.producer_epoch, True, 2
        )
        started = time.monotonic()
        await waiting
        waited = time.monotonic() - started
        state = coordinator.describe_transaction("app").state
        assert state is S.COMPLETE_COMMIT, state
        added = await coordinator.verify_or_add_partitions(
            "app", bumped.producer_id, bumped.producer_epoch, [TP1], implicit_add=True
        )
        return waited, added

    waited, added = harness.run(end_then_add())
    assert waited < 5.0  # woken by the completion, far before its 10 s bound
    assert added == {TP1: None}


def test_a_transaction_open_longer_than_its_timeout_is_aborted(harness: Harness) -> None:
    producer = harness.init("app", timeout_ms=5000)
    harness.add("app", producer, TP0)
    harness.clock.sleep(4000)
    assert harness.run(harness.coordinator.abort_timed_out_transactions()) == 0
    samples = harness.running.metrics()
    assert samples["odradek_transactions_open"] == 1
    assert samples["odradek_transaction_oldest_open_age_seconds"] == 4.0
    harness.clock.sleep(1500)
    assert harness.run(harness.coordinator.abort_timed_out_transactions()) == 1
    assert harness.settle("app") is S.COMPLETE_ABORT
    with pytest.raises(ProducerFencedError):  # the epoch was bumped: the producer is fenced
        harness.end("app", producer, committed=True)
    samples = harness.running.metrics()
    assert samples['odradek_transaction_aborts_total{reason="timeout"}'] == 1
    assert samples["odradek_transactions_open"] == 0


def test_an_idle_transactional_id_expires_with_a_tombstone(harness: Harness) -> None:
    harness.init("idle")
    busy = harness.init("busy")
    harness.add("busy", busy, TP0)
    harness.clock.sleep(3600001)
    assert harness.run(harness.coordinator.remove_expired_transactional_ids()) == 1
    with pytest.raises(TransactionalIdNotFoundError):
        harness.coordinator.describe_transaction("idle")
    assert ("idle", None) in harness.records()
    assert harness.state("busy") is S.ONGOING  # an open transaction never expires


def test_list_transactions_filters_as_kafka_does(harness: Harness) -> None:
    a = harness.init("app-a")
    harness.init("app-b")
    harness.init("other")
    harness.add("app-a", a, TP0)
    coordinator = harness.coordinator
    unknown, found = coordinator.list_transactions(["Ongoing", "Nope"])
    assert unknown == ["Nope"] and [t.transactional_id for t in found] == ["app-a"]
    _, found = coordinator.list_transactions(transactional_id_pattern="app-.*")
    assert sorted(t.transactional_id for t in found) == ["app-a", "app-b"]
    _, found = coordinator.list_transactions(producer_id_filters=[a.producer_id])
    assert [t.transactional_id for t in found] == ["app-a"]
    harness.clock.sleep(2000)
    # Running longer than the duration (Kafka's rule: ids with no transaction yet, whose
    # start is -1, pass it too).
    _, found = coordinator.list_transactions(["Ongoing"], duration_filter_ms=1000)
    assert [t.transactional_id for t in found] == ["app-a"]
    _, found = coordinator.list_transactions(duration_filter_ms=2000)
    assert sorted(t.transactional_id for t in found) == ["app-b", "other"]


def test_the_state_is_rebuilt_at_start_up_and_a_prepared_transaction_is_ended(
    tmp_path: Path,
) -> None:
    clock = MockClock()
    with harness_on(tmp_path, clock) as harness:
        done = harness.init("done")
        harness.add("done", done, TP1)
        harness.end("done", done, committed=False)
        assert harness.settle("done") is S.COMPLETE_ABORT
        producer = harness.init("app")
        harness.add("app", producer, TP0)
        # The partition refuses the marker: the commit stays prepared, the marker retried.
        harness.running.broker.replica_manager.write_transaction_markers = (  # type: ignore[method-assign]
            RefusingMarkers().write_transaction_markers
        )
        harness.end("app", producer, committed=True)
        assert harness.state("app") is S.PREPARE_COMMIT
    with harness_on(tmp_path, clock) as harness:
        assert harness.state("done") is S.COMPLETE_ABORT
        assert harness.settle("app") is S.COMPLETE_COMMIT  # the marker written at start-up
        assert harness.markers(TP0) == [(producer.producer_id, 0, True)]
        log = harness.running.broker.log_manager.get_log(TP0)
        assert log.last_stable_offset == log.log_end_offset
        assert harness.init("app") == ProducerIdAndEpoch(producer.producer_id, 1)


def test_a_timed_out_transaction_of_version_2_is_aborted_with_one_epoch_bump(
    harness: Harness,
) -> None:
    """As Kafka 4.4: the producer is not fenced; its commit at the old epoch is
    INVALID_TXN_STATE (abortable), its abort is taken for a retry of the coordinator's."""
    producer = harness.init("app", timeout_ms=5000)
    coordinator = harness.coordinator
    harness.run(
        coordinator.verify_or_add_partitions(
            "app", producer.producer_id, producer.producer_epoch, [TP0], implicit_add=True
        )
    )
    harness.clock.sleep(6000)
    assert harness.run(coordinator.abort_timed_out_transactions()) == 1
    assert harness.settle("app") is S.COMPLETE_ABORT
    with pytest.raises(InvalidTxnStateError):
        harness.end("app", producer, committed=True, version=2)
    bumped = ProducerIdAndEpoch(producer.producer_id, 1)
    assert harness.end("app", producer, committed=False, version=2) == bumped
    assert harness.markers(TP0) == [(producer.producer_id, 1, False)]
    values = [v for tid, v in harness.records() if tid == "app"]
    assert [(v.state, v.producer_epoch) for v in values] == [
        (S.EMPTY, 0),
        (S.ONGOING, 0),
        (S.PREPARE_ABORT, 1),
        (S.COMPLETE_ABORT, 1),
    ]
