"""The cleaner's transaction rules, as Kafka's LogCleaner applies them (its
CleanedTransactionMetadata and checkBatchRetention), on a log written as a partition leader
writes it: transactional batches of producers, and the COMMIT/ABORT markers the transaction
coordinator appends (UnifiedLog.append_end_txn_marker, which records an abort in the
segment's ``.txnindex``).

An aborted transaction's records go and never enter the offset map (an older value they
would have superseded stays); a marker stays while its transaction has batches before it (an
ABORT marker with its entry in the cleaned segment's ``.txnindex``), is then given a delete
horizon (KIP-534), and goes at or past it; an open transaction bounds the cleaning at the last
stable offset.
"""

from __future__ import annotations

from pathlib import Path

from cleaner_helpers import NOW_MS, clean_once, compact_config, plan, write
from log_helpers import BASE_TIME_MS, append, open_log

from odradek.record.record_batch import RecordBatch
from odradek.record.record_batch_builder import build_batch
from odradek.storage.unified_log import UnifiedLog

RETENTION_MS = 60_000
CONFIG = compact_config(delete_retention_ms=RETENTION_MS)
COMMITTER, ABORTER, OPEN = 10, 11, 12


class Producer:
    """A transactional producer of one partition (epoch 0): its batches and its markers."""

    def __init__(self, log: UnifiedLog, producer_id: int) -> None:
        self.log = log
        self.producer_id = producer_id
        self.sequence = 0

    def send(self, pairs: list[tuple[bytes, bytes | None]]) -> None:
        records = [(BASE_TIME_MS + i, k, v, ()) for i, (k, v) in enumerate(pairs)]
        append(
            self.log,
            build_batch(
                records,
                producer_id=self.producer_id,
                producer_epoch=0,
                base_sequence=self.sequence,
                is_transactional=True,
            ),
        )
        self.sequence += len(pairs)

    def end(self, commit: bool) -> None:
        self.log.append_end_txn_marker(self.producer_id, 0, 0, commit)
        self.log.update_high_watermark(self.log.log_end_offset)


def _batches(log: UnifiedLog) -> list[RecordBatch]:
    return [b for segment in log.segments.values() for _, b in segment.log.batches()]


def _data(log: UnifiedLog) -> list[tuple[int, bytes, bytes | None]]:
    return [
        (r.offset, r.key, r.value) for b in _batches(log) if not b.is_control for r in b.records()
    ]


def _markers(log: UnifiedLog) -> list[tuple[int, int, int | None, int]]:
    """(offset, producer id, delete horizon, records) of each control batch."""
    return [
        (b.base_offset, b.producer_id, b.delete_horizon_ms, b.records_count)
        for b in _batches(log)
        if b.is_control
    ]


def _aborted_in_indexes(log: UnifiedLog) -> list[tuple[int, int, int]]:
    return [
        (t.producer_id, t.first_offset, t.last_offset)
        for segment in log.segments.values()
        for t in segment.txn_index.all_aborted_txns()
    ]


def _workload(log: UnifiedLog) -> tuple[Producer, Producer]:
    write(log, [(b"a", b"1"), (b"b", b"1")])  # offsets 0, 1
    committer, aborter = Producer(log, COMMITTER), Producer(log, ABORTER)
    committer.send([(b"a", b"2"), (b"c", b"2")])  # 2-3
    committer.end(commit=True)  # 4
    aborter.send([(b"a", b"3"), (b"b", b"3")])  # 5-6
    aborter.end(commit=False)  # 7
    aborter.send([(b"e", b"5")])  # 8 (the aborter's last batch, a later transaction)
    aborter.end(commit=True)  # 9
    write(log, [(b"d", b"4")])  # 10
    log.roll()
    return committer, aborter


def test_aborted_records_go_and_markers_stay_until_their_horizon(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", CONFIG) as log:
        _workload(log)
        assert _aborted_in_indexes(log) == [(ABORTER, 5, 7)]
        clean_once(log, first_dirty=0)
        # The aborted a=3, b=3 are gone and were never mapped: b=1 stays (no committed b
        # superseded it), a=1 went for the committed a=2.
        assert _data(log) == [
            (1, b"b", b"1"),
            (2, b"a", b"2"),
            (3, b"c", b"2"),
            (8, b"e", b"5"),
            (10, b"d", b"4"),
        ]
        # Both markers stay (this run met their transactions' batches): the ABORT one with
        # its transaction in the cleaned segment's .txnindex; neither has a horizon yet.
        assert _markers(log) == [
            (4, COMMITTER, None, 1),
            (7, ABORTER, None, 1),
            (9, ABORTER, None, 1),
        ]
        assert _aborted_in_indexes(log) == [(ABORTER, 5, 7)]

        # The next cleaning finds no batch of the aborted transaction before its marker: the
        # marker gets a delete horizon, and the .txnindex no longer names the transaction.
        clean_once(log, first_dirty=0)
        horizon = NOW_MS + RETENTION_MS
        assert _markers(log) == [
            (4, COMMITTER, None, 1),
            (7, ABORTER, horizon, 1),
            (9, ABORTER, None, 1),
        ]
        assert _aborted_in_indexes(log) == []
        # Before its horizon it stays; at it, it goes. The COMMIT markers whose transaction's
        # records are there stay.
        clean_once(log, first_dirty=0, now_ms=horizon - 1)
        assert [m[0] for m in _markers(log)] == [4, 7, 9]
        clean_once(log, first_dirty=0, now_ms=horizon)
        assert _markers(log) == [(4, COMMITTER, None, 1), (9, ABORTER, None, 1)]
        assert _data(log) == [
            (1, b"b", b"1"),
            (2, b"a", b"2"),
            (3, b"c", b"2"),
            (8, b"e", b"5"),
            (10, b"d", b"4"),
        ]


def test_a_commit_marker_goes_once_its_transaction_s_records_are_gone(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", CONFIG) as log:
        committer = Producer(log, COMMITTER)
        committer.send([(b"a", b"1")])  # 0
        committer.end(commit=True)  # 1
        committer.send([(b"b", b"1")])  # 2: the producer's last batch, kept
        committer.end(commit=True)  # 3
        write(log, [(b"a", b"2")])  # 4: supersedes the first transaction's only record
        log.roll()
        clean_once(log, first_dirty=0)  # the batch at 0 goes; its marker saw it: stays
        assert [m[0] for m in _markers(log)] == [1, 3]
        clean_once(log, first_dirty=0)  # no batch of it left: a horizon
        assert _markers(log) == [(1, COMMITTER, NOW_MS + RETENTION_MS, 1), (3, COMMITTER, None, 1)]
        clean_once(log, first_dirty=0, now_ms=NOW_MS + RETENTION_MS)
        assert _markers(log) == [(3, COMMITTER, None, 1)]
        assert _data(log) == [(2, b"b", b"1"), (4, b"a", b"2")]


def test_an_open_transaction_bounds_the_cleaning_at_the_last_stable_offset(
    tmp_path: Path,
) -> None:
    with open_log(tmp_path / "t-0", CONFIG) as log:
        write(log, [(b"a", b"1")] * 2)  # 0-1
        log.roll()
        Producer(log, OPEN).send([(b"a", b"2")])  # 2: open
        write(log, [(b"a", b"3")] * 3)  # 3-5
        log.roll()
        assert log.last_stable_offset == 2
        # Kafka's cleanable range ends at the segment holding the last stable offset.
        assert plan(log).first_uncleanable_offset == 2
        clean_once(log)
        assert _data(log) == [
            (1, b"a", b"1"),
            (2, b"a", b"2"),
            (3, b"a", b"3"),
            (4, b"a", b"3"),
            (5, b"a", b"3"),
        ]


def test_a_producer_s_last_marker_keeps_its_header_with_the_epoch_that_fences_it(
    tmp_path: Path,
) -> None:
    """Transaction version 2 ends each transaction at the next epoch: the producer's last
    record is then a marker, and Kafka keeps that marker's header (its epoch fences the
    producer's zombies after the state is rebuilt from the log) when its records go; an older
    marker of the producer goes."""
    with open_log(tmp_path / "t-0", CONFIG) as log:
        producer = Producer(log, COMMITTER)
        producer.send([(b"a", b"1")])  # 0, epoch 0
        log.append_end_txn_marker(COMMITTER, 1, 0, True)  # 1, epoch 1
        append(
            log,
            build_batch(
                [(BASE_TIME_MS, b"b", b"1", ())],
                producer_id=COMMITTER,
                producer_epoch=1,
                base_sequence=0,
                is_transactional=True,
            ),
        )  # 2, epoch 1
        log.append_end_txn_marker(COMMITTER, 2, 0, True)  # 3, epoch 2
        write(log, [(b"a", b"2"), (b"b", b"2")])  # 4-5: supersede both transactions
        log.roll()
        assert plan(log).producer_marker_epochs == {(COMMITTER, 2)}
        clean_once(log, first_dirty=0)
        clean_once(log, first_dirty=0)
        horizon = NOW_MS + RETENTION_MS
        assert _markers(log) == [(1, COMMITTER, horizon, 1), (3, COMMITTER, horizon, 1)]
        clean_once(log, first_dirty=0, now_ms=horizon)
        (last,) = [b for b in _batches(log) if b.is_control]
        assert (last.base_offset, last.producer_epoch, last.records_count) == (3, 2, 0)
        assert _data(log) == [(4, b"a", b"2"), (5, b"b", b"2")]
