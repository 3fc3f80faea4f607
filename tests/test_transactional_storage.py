"""Transactions in storage: transactional batches, the markers the coordinator appends, the
last stable offset, the .txnindex, and what survives snapshots, restarts and crashes (Kafka's
ProducerStateManager, ProducerAppendInfo.appendEndTxnMarker,
UnifiedLog.collectAbortedTransactions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from odradek.record.control_record import EndTransactionMarker
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch_builder import build_batch
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.producer_snapshot_file import read_snapshot, snapshot_file
from odradek.storage.transaction_index import ABORTED_TXN, AbortedTxn
from tests.log_helpers import BASE_TIME_MS, append, open_log


def txn(pid: int, epoch: int, seq: int, count: int = 1, tag: str = "t") -> bytes:
    """A transactional batch, as a transactional producer sends it."""
    return build_batch(
        [(BASE_TIME_MS + i, b"k", f"{tag}{pid}-{seq + i}".encode(), ()) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def idempotent(pid: int, epoch: int, seq: int, count: int = 1) -> bytes:
    return build_batch(
        [(BASE_TIME_MS + i, b"k", f"i{pid}-{seq + i}".encode(), ()) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def plain(value: bytes = b"p") -> bytes:
    return build_batch([(BASE_TIME_MS, b"k", value, ())])


def commit_all(log) -> None:  # noqa: ANN001
    log.update_high_watermark(log.log_end_offset)


def marker(log, pid: int, epoch: int, committed: bool, coordinator_epoch: int = 0) -> int:  # noqa: ANN001
    info = log.append_end_txn_marker(pid, epoch, coordinator_epoch, committed)
    commit_all(log)
    return info.first_offset


def committed_values(log, start: int = 0) -> list[bytes]:  # noqa: ANN001
    """What a read_committed consumer sees: records up to the LSO, minus aborted ones and
    markers, the way Kafka's consumer applies the aborted transactions list."""
    info = log.read(start, 1 << 20, FetchIsolation.TXN_COMMITTED)
    if info.records is None:
        return []
    aborted = {(a.producer_id, a.first_offset, a.last_offset) for a in info.aborted_transactions}
    seen = []
    for batch in MemoryRecords(info.records.read_bytes()).batches():
        if batch.is_control:
            continue
        if batch.is_transactional and any(
            pid == batch.producer_id and first <= batch.base_offset <= last
            for pid, first, last in aborted
        ):
            continue
        seen.extend(r.value for r in batch.records() if r.offset >= start)
    return seen


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tx-0"
    directory.mkdir()
    return directory


def test_an_open_transaction_pins_the_last_stable_offset_until_its_marker_is_committed(
    partition_dir,
):
    with open_log(partition_dir) as log:
        append(log, plain())
        assert log.first_unstable_offset is None
        assert log.last_stable_offset == log.high_watermark == 1
        append(log, txn(7, 0, 0, 2))
        append(log, plain())
        assert log.first_unstable_offset == 1
        assert (log.last_stable_offset, log.high_watermark) == (1, 4)
        assert committed_values(log) == [b"p"]
        # The marker is written, but until the HW passes it the transaction is unstable.
        info = log.append_end_txn_marker(7, 0, 0, committed=True)
        assert info.first_offset == 4
        assert log.last_stable_offset == 1
        commit_all(log)
        assert log.first_unstable_offset is None
        assert log.last_stable_offset == 5
        assert committed_values(log) == [b"p", b"t7-0", b"t7-1", b"p"]
        assert not (partition_dir / "00000000000000000000.txnindex").exists()


def test_an_abort_goes_to_the_txnindex_in_kafkas_format_with_the_other_open_transaction(
    partition_dir,
):
    with open_log(partition_dir) as log:
        append(log, txn(7, 0, 0, 2))  # 0-1
        append(log, txn(8, 3, 0))  # 2, another producer's transaction, still open
        append(log, txn(7, 0, 2))  # 3
        assert marker(log, 7, 0, committed=False, coordinator_epoch=5) == 4
        # The abort's last stable offset: producer 8's transaction still pins it at 2.
        expected = AbortedTxn(7, 0, 4, 2)
        assert log.segments.last.txn_index.all_aborted_txns() == [expected]
        raw = (partition_dir / "00000000000000000000.txnindex").read_bytes()
        assert raw == ABORTED_TXN.pack(0, 7, 0, 4, 2)
        assert log.last_stable_offset == 2
        assert marker(log, 8, 3, committed=True) == 5
        assert log.last_stable_offset == 6
        assert log.local_log.collect_aborted_transactions(0, 6) == [expected]
        assert log.local_log.collect_aborted_transactions(5, 6) == []
        assert committed_values(log) == [b"t8-0"]
        info = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
        assert info.aborted_transactions == (expected,)
        # read_uncommitted is unchanged: every record, no aborted list.
        info = log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        assert info.aborted_transactions is None


def test_marker_epochs_are_checked_as_kafka_checks_them(partition_dir):
    with open_log(partition_dir) as log:
        append(log, txn(7, 2, 0))
        with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 2"):
            log.append_end_txn_marker(7, 1, 0, committed=True)
        marker(log, 7, 2, committed=True, coordinator_epoch=4)
        append(log, txn(7, 2, 1))
        with pytest.raises(TransactionCoordinatorFencedError, match="3 \\(zombie\\), 4"):
            log.append_end_txn_marker(7, 2, 3, committed=False)
        end = log.log_end_offset
        assert log.first_unstable_offset == 2  # refused markers write nothing
        # A newer coordinator epoch and a bumped producer epoch (TV2) are accepted.
        assert marker(log, 7, 3, committed=False, coordinator_epoch=6) == end
        entry = log.producer_state.entry(7)
        assert (entry.producer_epoch, entry.coordinator_epoch) == (3, 6)
        assert entry.current_txn_first_offset == -1
        assert entry.is_empty  # a new epoch forgets the old epoch's batches


def test_a_marker_without_transactional_data_touches_neither_the_lso_nor_the_index(
    partition_dir,
):
    with open_log(partition_dir) as log:
        append(log, plain())
        assert marker(log, 9, 0, committed=False) == 1
        assert log.last_stable_offset == 2
        assert not (partition_dir / "00000000000000000000.txnindex").exists()
        batches = list(MemoryRecords(log.read(1, 4096).records.read_bytes()).batches())
        assert batches[0].is_control and batches[0].is_transactional
        assert EndTransactionMarker.from_record(next(iter(batches[0].records()))) == (
            EndTransactionMarker(False, 0)
        )


def test_a_non_transactional_batch_while_the_producers_transaction_is_open_is_refused(
    partition_dir,
):
    with open_log(partition_dir) as log:
        append(log, txn(7, 0, 0))
        end = log.log_end_offset
        # One small idempotent batch going on at its sequence: the fast path's shape.
        with pytest.raises(InvalidTxnStateError, match="expected a transactional write"):
            log.append(idempotent(7, 0, 1))
        with pytest.raises(InvalidTxnStateError):
            log.append(idempotent(7, 0, 1) + idempotent(7, 0, 2))
        assert log.log_end_offset == end
        append(log, txn(7, 0, 1))  # its transaction goes on
        marker(log, 7, 0, committed=True)
        append(log, idempotent(7, 0, 2))  # after the marker it may write outside one
        # Another producer's idempotent batches pass beside an open transaction.
        append(log, txn(8, 0, 0))
        append(log, idempotent(9, 0, 0))
        append(log, idempotent(9, 0, 1))
        assert log.producer_state.entry(9).last_seq == 1


def test_a_client_may_not_write_a_control_batch(partition_dir):
    with open_log(partition_dir) as log:
        forged = EndTransactionMarker(True, 0).to_batch(7, 0, BASE_TIME_MS)
        with pytest.raises(InvalidRecordError, match="clients may not write control batches"):
            log.append(forged)
        assert log.log_end_offset == 0


def test_producers_with_an_open_transaction_do_not_expire(partition_dir):
    clock = MockClock(BASE_TIME_MS)
    with open_log(partition_dir, clock=clock, producer_id_expiration_ms=1000) as log:
        append(log, txn(7, 0, 0))
        append(log, idempotent(8, 0, 0))
        clock.sleep(5000)
        assert log.remove_expired_producers() == 1
        assert [p.producer_id for p in log.active_producers()] == [7]
        assert log.first_unstable_offset == 0
        log.append_end_txn_marker(7, 0, 0, committed=True)
        clock.sleep(5000)
        assert log.remove_expired_producers() == 1
        assert log.active_producers() == []


def test_an_open_transaction_survives_a_clean_restart_in_kafkas_snapshot_format(partition_dir):
    with open_log(partition_dir) as log:
        append(log, plain())
        append(log, txn(7, 1, 0, 2))
        marker(log, 8, 0, committed=True, coordinator_epoch=3)
    rows = read_snapshot(snapshot_file(partition_dir, 4))
    by_producer = {row.producer_id: row for row in rows}
    assert by_producer[7].current_txn_first_offset == 1
    assert by_producer[7].coordinator_epoch == -1
    assert by_producer[8].coordinator_epoch == 3
    assert by_producer[8].current_txn_first_offset == -1
    with open_log(partition_dir, had_clean_shutdown=True, recovery_point=4) as log:
        assert log.load_summary.recovered_segments == 0
        assert log.first_unstable_offset == 1
        assert log.last_stable_offset == 1
        assert log.producer_state.coordinator_epoch(8) == 3
        marker(log, 7, 1, committed=False)
        assert log.last_stable_offset == log.log_end_offset
        assert log.local_log.collect_aborted_transactions(0, 10) == [AbortedTxn(7, 1, 4, 5)]


def test_an_unclean_restart_rebuilds_open_transactions_and_the_txnindex_from_the_log(
    partition_dir,
):
    config = LogConfig(segment_bytes=400)
    with open_log(partition_dir, config) as log:
        append(log, txn(7, 0, 0))
        append(log, txn(8, 0, 0))
        marker(log, 7, 0, committed=False)
        for seq in range(1, 6):
            append(log, txn(8, 0, seq))
        append(log, txn(9, 0, 0))
        marker(log, 8, 0, committed=False)
        expected = [
            aborted
            for segment in log.segments.values()
            for aborted in segment.txn_index.all_aborted_txns()
        ]
        lso = log.last_stable_offset
        assert log.number_of_segments > 1
    assert expected == [AbortedTxn(7, 0, 2, 1), AbortedTxn(8, 1, 9, 8)]
    # A crash: no clean-shutdown snapshot, the indexes lost, a torn index entry.
    for path in partition_dir.glob("*.snapshot"):
        path.unlink()
    txn_indexes = sorted(partition_dir.glob("*.txnindex"))
    txn_indexes[0].write_bytes(txn_indexes[0].read_bytes()[:-1])  # torn
    for path in txn_indexes[1:]:
        path.unlink()
    with open_log(partition_dir, config, recovery_point=0) as log:
        rebuilt = [
            aborted
            for segment in log.segments.values()
            for aborted in segment.txn_index.all_aborted_txns()
        ]
        assert rebuilt == expected
        assert all(
            path.stat().st_size % ABORTED_TXN.size == 0 for path in partition_dir.glob("*.txnindex")
        )
        assert log.first_unstable_offset == 8  # producer 9's transaction is still open
        assert log.last_stable_offset == lso == 8


def test_truncation_drops_the_aborted_transactions_it_cuts_and_reopens_their_transactions(
    partition_dir,
):
    with open_log(partition_dir) as log:
        append(log, txn(7, 0, 0))
        marker(log, 7, 0, committed=False)
        assert log.last_stable_offset == 2
        log.truncate_to(1)
        assert log.segments.last.txn_index.all_aborted_txns() == []
        assert log.first_unstable_offset == 0
        assert log.producer_state.entry(7).current_txn_first_offset == 0


def test_deleting_a_segment_deletes_its_txnindex(partition_dir):
    config = LogConfig(segment_bytes=300)
    with open_log(partition_dir, config) as log:
        append(log, txn(7, 0, 0))
        marker(log, 7, 0, committed=False)
        first = log.segments.first_segment
        index_path = first.txn_index.path
        assert index_path.exists()
        while log.number_of_segments < 3:
            append(log, plain())
        log.delete_records(log.segments.values()[1].base_offset)
        assert log.segments.first_segment is not first
        assert not index_path.exists()


def test_ended_transactions_are_forgotten_once_the_high_watermark_passes_their_markers(
    partition_dir,
):
    """However seldom the LSO is read, the ended transactions kept are the unstable ones."""
    with open_log(partition_dir) as log:
        for seq in range(50):
            append(log, txn(7, 0, seq))
            marker(log, 7, 0, committed=seq % 2 == 0)
        assert len(log.producer_state.unreplicated_txns) <= 1
        append(log, txn(7, 0, 50))
        log.append_end_txn_marker(7, 0, 0, committed=True)  # not committed yet
        assert log.first_unstable_offset == 100
        commit_all(log)
        assert log.first_unstable_offset is None
        assert log.producer_state.unreplicated_txns == []


def test_the_cleaner_never_cleans_past_an_open_transaction(partition_dir):
    from odradek.cleaner.cleanable_offsets import cleanable_offsets

    config = LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    with open_log(partition_dir, config) as log:
        for n in range(3):
            append(log, plain(b"%d" % n))
        append(log, txn(7, 0, 0))
        opened = log.first_unstable_offset
        for n in range(12):
            append(log, plain(b"%d" % n))
        assert log.number_of_segments > 3
        assert 0 < opened < log.segments.values()[1].base_offset < log.active_segment.base_offset
        offsets = cleanable_offsets(log, None, BASE_TIME_MS)
        assert offsets.first_uncleanable_dirty_offset == opened == log.last_stable_offset


def test_cleaning_keeps_aborted_records_from_read_committed_readers(partition_dir):
    """A compacted partition with an aborted transaction, cleaned: the cleaned segment's
    .txnindex takes its sources' place (no .swap or .cleaned left, none without its log), and
    read_committed readers still never get the aborted records."""
    from cleaner_helpers import clean_fully

    from tests.log_helpers import read_committed

    config = LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    with open_log(partition_dir, config, clock=MockClock(BASE_TIME_MS + 3_600_000)) as log:
        append(log, txn(7, 0, 0, 2, tag="aborted"))
        marker(log, 7, 0, committed=False)
        for n in range(12):
            append(log, build_batch([(BASE_TIME_MS, b"k%d" % (n % 3), b"p%d" % n, ())]))
        before = [r.value for r in read_committed(log)]
        assert not any(value.startswith(b"aborted") for value in before)
        clean_fully(log)
        after = [r.value for r in read_committed(log)]
        assert not any(value.startswith(b"aborted") for value in after)
        assert set(after) < set(before) and after[-3:] == before[-3:]  # compacted
        logs = {p.name.split(".")[0] for p in partition_dir.glob("*.log")}
        indexes = {p.name.split(".")[0] for p in partition_dir.glob("*.txnindex*")}
        assert indexes <= logs
        assert not list(partition_dir.glob("*.swap")) and not list(partition_dir.glob("*.cleaned"))


def test_a_fetch_lists_only_the_aborted_transactions_its_bytes_can_reach(partition_dir):
    """Kafka's bound: the first offset index entry past the bytes read (else the next
    segment, else the log end); a transaction aborted after it is not listed."""
    config = LogConfig(index_interval_bytes=1)  # an index entry for every batch
    with open_log(partition_dir, config) as log:
        for n in range(10):
            append(log, plain(b"p%d" % n))  # 0-9, 74 bytes each
        append(log, txn(7, 0, 0))  # 10
        marker(log, 7, 0, committed=False)  # 11
        small = log.read(0, 100, FetchIsolation.TXN_COMMITTED)  # one batch, whole
        assert small.records.length == 100
        assert small.aborted_transactions == ()
        whole = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
        assert whole.aborted_transactions == (AbortedTxn(7, 10, 11, 12),)
