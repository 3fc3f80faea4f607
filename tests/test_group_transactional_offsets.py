"""A transaction's offsets in the group coordinator (KIP-98, KIP-447): TxnOffsetCommit's
checks on Kafka's protocol, and the offsets of transactions read back from
``__consumer_offsets``.

The log holds what Kafka's coordinator writes: a transaction's OffsetCommit records in a
transactional batch of the producer, and the COMMIT or ABORT control batch the transaction
coordinator appends later. Loading them, a committed transaction's offsets are visible, an
aborted one's never, an open one's stay pending (OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT) until ``handle_transaction_completion`` settles it; a tombstone (an
OffsetDelete or the group's deletion) drops the pending offsets before it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from group_helpers import commit, create_topic, group_broker, join, sync
from kafka_helpers import HasBootstrap, kafka_call
from server_helpers import RunningBroker

from odradek.record.control_record import ControlRecordType, EndTransactionMarker
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch_builder import RecordBatchBuilder
from odradek.server.group.coordinator_records import OffsetCommitKey, OffsetCommitValue
from odradek.server.transaction.transaction_marker import TransactionMarker
from odradek.topic_partition import TopicPartition

OFFSETS = {"offsets.topic.num.partitions": "1"}
"""One ``__consumer_offsets`` partition: every group is in partition 0."""
OFFSET_FETCH, TXN_OFFSET_COMMIT, DELETE_GROUPS, OFFSET_DELETE = 9, 28, 42, 47
UNSTABLE_OFFSET_COMMIT, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, INVALID_GROUP_ID = 88, 22, 25, 24
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, INVALID_PRODUCER_EPOCH = 3, 12, 47
COMMITTED, ABORTED, OPEN, LATE = 1000, 1001, 1002, 1003
"""The producer ids of the transactions written into the log."""


def offset_fetch(
    target: str | HasBootstrap, group: str, partitions: dict[str, list[int]], stable: bool
) -> dict[tuple[str, int], tuple[int, int]]:
    """OffsetFetch v8 for ``partitions`` (from any broker): (committed offset, error code) of
    each."""
    response = kafka_call(
        target,
        OFFSET_FETCH,
        8,
        {
            "groups": [
                {
                    "group_id": group,
                    "topics": [
                        {"name": name, "partition_indexes": indexes}
                        for name, indexes in partitions.items()
                    ],
                }
            ],
            "require_stable": stable,
        },
    )
    (found,) = response["groups"]
    assert found["error_code"] == 0, found
    return {
        (topic["name"], p["partition_index"]): (p["committed_offset"], p["error_code"])
        for topic in found["topics"]
        for p in topic["partitions"]
    }


def txn_offset_commit(
    broker: RunningBroker,
    group: str,
    offsets: dict[tuple[str, int], int],
    version: int = 4,
    generation_id: int = -1,
    member_id: str = "",
    metadata: str | None = None,
    epoch: int = 0,
) -> dict[tuple[str, int], int]:
    """TxnOffsetCommit of ``offsets`` for producer 7 at ``epoch``: each partition's error
    code."""
    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_metadata": metadata,
            }
        )
    response = kafka_call(
        broker,
        TXN_OFFSET_COMMIT,
        version,
        {
            "transactional_id": "txn",
            "group_id": group,
            "producer_id": 7,
            "producer_epoch": epoch,
            "generation_id": generation_id,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": [{"name": n, "partitions": p} for n, p in topics.items()],
        },
    )
    return {
        (topic["name"], p["partition_index"]): p["error_code"]
        for topic in response["topics"]
        for p in topic["partitions"]
    }


def _transactional_commit(
    producer_id: int, base_offset: int, group: str, offsets: dict[tuple[str, int], int]
) -> bytes:
    """What Kafka's coordinator writes for a TxnOffsetCommit: the OffsetCommit records in a
    transactional batch of the producer (base sequence 0)."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    now = int(time.time() * 1000)
    for (topic, partition), offset in offsets.items():
        builder.append(
            now,
            OffsetCommitKey(group, topic, partition).to_bytes(),
            OffsetCommitValue(offset, -1, "", now).to_bytes(),
        )
    return builder.build()


def _marker(producer_id: int, base_offset: int, commit: bool) -> bytes:
    control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return EndTransactionMarker(control, 0).to_batch(
        producer_id, 0, int(time.time() * 1000), base_offset=base_offset
    )


def _append_to_offsets_log(data_dir: Path, batches: list[bytes]) -> None:
    """Append ``batches`` (their base offsets already the log's next ones) to partition 0 of
    ``__consumer_offsets`` of a stopped broker, and make the next start recover it."""
    segment = sorted((data_dir / "__consumer_offsets-0").glob("*.log"))[-1]
    with segment.open("ab") as log:
        for data in batches:
            log.write(data)
    for snapshot in (data_dir / "__consumer_offsets-0").glob("*.snapshot"):
        snapshot.unlink()
    (data_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)


def _log_end(data_dir: Path) -> int:
    end = 0
    for segment in sorted((data_dir / "__consumer_offsets-0").glob("*.log")):
        for batch in MemoryRecords(segment.read_bytes()).batches():
            end = batch.next_offset
    return end


def _on_loop(broker: RunningBroker, call) -> None:  # noqa: ANN001
    broker.loop_thread.call(call)


def test_loaded_transactions_commit_abort_and_stay_pending(tmp_path: Path) -> None:
    with group_broker(tmp_path, OFFSETS) as broker, broker.connect() as client:
        create_topic(client, "t", 3)
        assert commit(client, "g", {("t", 0): 1, ("t", 2): 2}) == {("t", 0): 0, ("t", 2): 0}
        data_dir = broker.data_dir
    start = _log_end(data_dir)
    _append_to_offsets_log(
        data_dir,
        [
            _transactional_commit(COMMITTED, start, "g", {("t", 0): 10}),
            _transactional_commit(ABORTED, start + 1, "g", {("t", 1): 20, ("t", 2): 21}),
            _transactional_commit(OPEN, start + 3, "g", {("t", 1): 30}),
            _marker(COMMITTED, start + 4, commit=True),
            _marker(ABORTED, start + 5, commit=False),
        ],
    )
    with group_broker(tmp_path, OFFSETS) as broker:
        wanted = {"t": [0, 1, 2]}
        # COMMIT made t-0's offset visible; ABORT dropped t-1's and kept t-2's committed one;
        # the open transaction's t-1 is pending: invisible, and unstable when asked so.
        assert offset_fetch(broker, "g", wanted, stable=False) == {
            ("t", 0): (10, 0),
            ("t", 1): (-1, 0),
            ("t", 2): (2, 0),
        }
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (10, 0),
            ("t", 1): (-1, UNSTABLE_OFFSET_COMMIT),
            ("t", 2): (2, 0),
        }
        coordinator = broker.broker.group_coordinator
        # A marker in another __consumer_offsets partition settles nothing here.
        _on_loop(broker, lambda: coordinator.handle_transaction_completion(OPEN, {5}, True))
        assert offset_fetch(broker, "g", wanted, stable=True)[("t", 1)] == (
            -1,
            UNSTABLE_OFFSET_COMMIT,
        )
        _on_loop(broker, lambda: coordinator.handle_transaction_completion(OPEN, {0}, True))
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (10, 0),
            ("t", 1): (30, 0),
            ("t", 2): (2, 0),
        }


def test_an_aborted_open_transaction_leaves_nothing_and_a_late_commit_keeps_the_newer_offset(
    tmp_path: Path,
) -> None:
    with group_broker(tmp_path, OFFSETS) as broker, broker.connect() as client:
        create_topic(client, "t", 2)
        assert commit(client, "g", {("t", 0): 1}) == {("t", 0): 0}
        data_dir = broker.data_dir
    start = _log_end(data_dir)
    _append_to_offsets_log(
        data_dir,
        [
            _transactional_commit(OPEN, start, "g", {("t", 1): 5}),
            _transactional_commit(LATE, start + 1, "g", {("t", 0): 6}),
        ],
    )
    with group_broker(tmp_path, OFFSETS) as broker, broker.connect() as client:
        coordinator = broker.broker.group_coordinator
        # A plain commit after the transaction's record wins over it when it commits later
        # (Kafka keeps the most recent record of a partition's offset).
        assert commit(client, "g", {("t", 0): 2}) == {("t", 0): 0}
        _on_loop(broker, lambda: coordinator.handle_transaction_completion(LATE, {0}, True))
        _on_loop(broker, lambda: coordinator.handle_transaction_completion(OPEN, {0}, False))
        assert offset_fetch(broker, "g", {"t": [0, 1]}, stable=True) == {
            ("t", 0): (2, 0),
            ("t", 1): (-1, 0),
        }


def test_deleting_the_group_drops_its_pending_transactional_offsets(tmp_path: Path) -> None:
    with group_broker(tmp_path, OFFSETS) as broker, broker.connect() as client:
        create_topic(client, "t", 2)
        assert commit(client, "g", {("t", 0): 1}) == {("t", 0): 0}
        data_dir = broker.data_dir
    start = _log_end(data_dir)
    _append_to_offsets_log(data_dir, [_transactional_commit(OPEN, start, "g", {("t", 1): 5})])
    with group_broker(tmp_path, OFFSETS) as broker:
        deleted = kafka_call(broker, DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert [r["error_code"] for r in deleted["results"]] == [0], deleted
        coordinator = broker.broker.group_coordinator
        _on_loop(broker, lambda: coordinator.handle_transaction_completion(OPEN, {0}, True))
        assert offset_fetch(broker, "g", {"t": [0, 1]}, stable=True) == {
            ("t", 0): (-1, 0),
            ("t", 1): (-1, 0),
        }
    # The tombstones came after the transaction's record: after a restart (the COMMIT marker
    # never written) its offset stays gone.
    with group_broker(tmp_path, OFFSETS) as broker:
        assert offset_fetch(broker, "g", {"t": [0, 1]}, stable=True) == {
            ("t", 0): (-1, 0),
            ("t", 1): (-1, 0),
        }


def _end_transaction(broker: RunningBroker, producer_id: int, epoch: int, commit: bool) -> None:
    """What the transaction coordinator does at EndTxn for ``__consumer_offsets``: the marker
    through ReplicaManager.write_transaction_markers, then handle_transaction_completion."""
    marker = TransactionMarker(
        producer_id, epoch, 0, commit, (TopicPartition("__consumer_offsets", 0),)
    )
    written = broker.loop_thread.run(
        broker.broker.replica_manager.write_transaction_markers([marker]), timeout=30
    )
    assert set(written.values()) == {None}, written
    _on_loop(
        broker,
        lambda: broker.broker.group_coordinator.handle_transaction_completion(
            producer_id, {0}, commit
        ),
    )


@contextmanager
def unchecked_broker(tmp_path: Path) -> Iterator[RunningBroker]:
    """A broker whose group coordinator takes producer 7's TxnOffsetCommits without asking the
    transaction coordinator (these tests write producer 7's transactions by hand; the check
    itself is tested with the coordinator, in test_kafka_transaction_versions.py)."""
    with group_broker(tmp_path, OFFSETS) as broker:
        broker.broker.group_coordinator.verify_transaction = None
        yield broker


def test_txn_offset_commit_is_pending_until_its_marker_and_replays_after_restart(
    tmp_path: Path,
) -> None:
    wanted = {"t": [0, 1]}
    with unchecked_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 2)
        # Two commits in one transaction (v4, then v5 of transaction version 2).
        assert txn_offset_commit(broker, "g", {("t", 0): 5}) == {("t", 0): 0}
        assert txn_offset_commit(broker, "g", {("t", 1): 6}, version=5) == {("t", 1): 0}
        assert offset_fetch(broker, "g", wanted, stable=False) == {
            ("t", 0): (-1, 0),
            ("t", 1): (-1, 0),
        }
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (-1, UNSTABLE_OFFSET_COMMIT),
            ("t", 1): (-1, UNSTABLE_OFFSET_COMMIT),
        }
        _end_transaction(broker, 7, 0, commit=True)
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (5, 0),
            ("t", 1): (6, 0),
        }
        # The next transaction of the producer is aborted: nothing of it shows.
        assert txn_offset_commit(broker, "g", {("t", 0): 50, ("t", 1): 60}) == {
            ("t", 0): 0,
            ("t", 1): 0,
        }
        _end_transaction(broker, 7, 0, commit=False)
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (5, 0),
            ("t", 1): (6, 0),
        }
        # A third one stays open across the restart.
        assert txn_offset_commit(broker, "g", {("t", 1): 9}) == {("t", 1): 0}
    with unchecked_broker(tmp_path) as broker:
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (5, 0),
            ("t", 1): (-1, UNSTABLE_OFFSET_COMMIT),
        }
        _end_transaction(broker, 7, 0, commit=True)
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (5, 0),
            ("t", 1): (9, 0),
        }


def test_each_transaction_at_its_bumped_epoch_and_a_fenced_producer_refused(
    tmp_path: Path,
) -> None:
    """Transaction version 2 (KIP-890): the markers end each transaction at the next epoch,
    which the producer's next transaction uses; a commit at an older epoch is the fenced
    producer's (INVALID_PRODUCER_EPOCH) and leaves nothing pending."""
    wanted = {"t": [0, 1]}
    with unchecked_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 2)
        for epoch, offset in [(0, 5), (1, 8)]:
            for partition in (0, 1):
                assert txn_offset_commit(
                    broker, "g", {("t", partition): offset + partition}, 5, epoch=epoch
                ) == {("t", partition): 0}
            _end_transaction(broker, 7, epoch + 1, commit=True)
        assert txn_offset_commit(broker, "g", {("t", 0): 99}, 5, epoch=1) == {
            ("t", 0): INVALID_PRODUCER_EPOCH
        }
        assert offset_fetch(broker, "g", wanted, stable=True) == {
            ("t", 0): (8, 0),
            ("t", 1): (9, 0),
        }


def test_offset_delete_drops_a_pending_transactional_offset(tmp_path: Path) -> None:
    """Kafka's OffsetDelete writes a tombstone for a partition a transaction holds an offset
    for even when none is committed: the transaction's COMMIT then brings nothing back."""
    with unchecked_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 2)
        assert txn_offset_commit(broker, "g", {("t", 1): 6}) == {("t", 1): 0}
        deleted = kafka_call(
            broker,
            OFFSET_DELETE,
            0,
            {"group_id": "g", "topics": [{"name": "t", "partitions": [{"partition_index": 1}]}]},
        )
        assert deleted["error_code"] == 0, deleted
        assert offset_fetch(broker, "g", {"t": [1]}, stable=True) == {("t", 1): (-1, 0)}
        _end_transaction(broker, 7, 0, commit=True)
        assert offset_fetch(broker, "g", {"t": [1]}, stable=True) == {("t", 1): (-1, 0)}
    with unchecked_broker(tmp_path) as broker:
        assert offset_fetch(broker, "g", {"t": [1]}, stable=True) == {("t", 1): (-1, 0)}


def test_txn_offset_commit_checks_group_member_and_partitions_as_kafka(tmp_path: Path) -> None:
    with unchecked_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        # No such group: a generation >= 0 is over (ILLEGAL_GENERATION).
        assert txn_offset_commit(broker, "none", {("t", 0): 1}, generation_id=3) == {
            ("t", 0): ILLEGAL_GENERATION
        }
        assert txn_offset_commit(broker, "", {("t", 0): 1}) == {("t", 0): INVALID_GROUP_ID}
        # A group with a member: an unknown member is refused (KIP-447 member id, v3+).

        joined = join(client, "members")
        sync(client, "members", joined, {joined.member_id: b""})
        assert txn_offset_commit(
            broker, "members", {("t", 0): 1}, generation_id=1, member_id="stranger"
        ) == {("t", 0): UNKNOWN_MEMBER_ID}
        assert txn_offset_commit(
            broker, "members", {("t", 0): 1}, generation_id=9, member_id=joined.member_id
        ) == {("t", 0): ILLEGAL_GENERATION}
        # The partition's own checks.
        errors = txn_offset_commit(broker, "simple", {("t", 5): 1, ("nope", 0): 1})
        assert errors == {
            ("t", 5): UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        errors = txn_offset_commit(broker, "simple", {("t", 5): 1}, metadata="x" * 5000)
        assert errors == {("t", 5): OFFSET_METADATA_TOO_LARGE}
