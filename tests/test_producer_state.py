"""Idempotent appends: Kafka's producer-state rules on UnifiedLog.append, snapshots and recovery."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from odradek.record.record_batch_builder import build_batch
from odradek.storage.leader_epoch_file_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    decode_checkpoint,
)
from odradek.storage.producer_snapshot_file import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    read_snapshot,
    snapshot_file,
)
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog
from tests.log_helpers import BASE_TIME_MS, append, open_log, read_all


def idempotent(pid: int, epoch: int, seq: int, count: int = 1, tag: str = "v") -> bytes:
    return build_batch(
        [(BASE_TIME_MS + i, b"k", f"{tag}{seq + i}".encode(), ()) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "orders-0"
    directory.mkdir()
    return directory


def wait_for_roll_snapshots(directory: Path, count: int) -> None:
    """The snapshots of rolls are written by the roll's background flush."""
    deadline = time.monotonic() + 60
    while len(list(directory.glob("*.snapshot"))) < count:
        assert time.monotonic() < deadline, "roll snapshots not written"
        time.sleep(0.01)


def wait_for_file(path: Path) -> str:
    """A file the log writes in the background, once it is there."""
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} not written"
        time.sleep(0.01)
    return path.read_text()


def values(log) -> list[bytes]:
    return [r.value for r in read_all(log)]


def test_a_retried_batch_is_acknowledged_with_its_offsets_and_not_written(partition_dir):
    with open_log(partition_dir) as log:
        append(log, idempotent(7, 0, 0, 3))
        second = append(log, idempotent(7, 0, 3, 2))
        append(log, idempotent(8, 0, 0))
        again = append(log, idempotent(7, 0, 3, 2))
        assert (again.first_offset, again.last_offset) == (second.first_offset, 4)
        assert log.log_end_offset == 6
        assert values(log) == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v0"]


def test_the_last_five_batches_are_recognised_and_older_retries_are_out_of_order(partition_dir):
    with open_log(partition_dir) as log:
        offsets = [append(log, idempotent(7, 0, seq)).first_offset for seq in range(7)]
        for seq in range(2, 7):
            assert append(log, idempotent(7, 0, seq)).first_offset == offsets[seq]
        with pytest.raises(OutOfOrderSequenceNumberError):
            append(log, idempotent(7, 0, 1))
        assert log.log_end_offset == 7


def test_a_sequence_gap_is_out_of_order_and_writes_nothing(partition_dir):
    with open_log(partition_dir) as log:
        append(log, idempotent(7, 0, 0, 2))
        with pytest.raises(OutOfOrderSequenceNumberError, match="producer 7"):
            append(log, idempotent(7, 0, 3))
        assert log.log_end_offset == 2
        append(log, idempotent(7, 0, 2))
        assert log.log_end_offset == 3


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero(partition_dir):
    with open_log(partition_dir) as log:
        append(log, idempotent(7, 1, 0))
        with pytest.raises(InvalidProducerEpochError):
            append(log, idempotent(7, 0, 1))
        with pytest.raises(OutOfOrderSequenceNumberError, match="new epoch"):
            append(log, idempotent(7, 2, 5))
        append(log, idempotent(7, 2, 0))
        with pytest.raises(InvalidProducerEpochError):
            append(log, idempotent(7, 1, 1))
        assert log.log_end_offset == 2


def test_an_unknown_producer_is_accepted_at_any_sequence_as_kafka_does(partition_dir):
    with open_log(partition_dir) as log:
        append(log, idempotent(9, 0, 42))
        append(log, idempotent(9, 0, 43))
        assert log.log_end_offset == 2


def test_sequences_wrap_after_int32_max(partition_dir):
    with open_log(partition_dir) as log:
        append(log, idempotent(7, 0, 2**31 - 2, 2))
        append(log, idempotent(7, 0, 0))
        assert log.log_end_offset == 3


def test_idle_producers_expire(partition_dir):
    clock = MockClock(BASE_TIME_MS)
    with open_log(partition_dir, clock=clock, producer_id_expiration_ms=1000) as log:
        append(log, idempotent(7, 0, 0))
        clock.sleep(500)
        assert log.remove_expired_producers() == 0
        clock.sleep(600)
        assert log.remove_expired_producers() == 1
        append(log, idempotent(7, 0, 0))  # forgotten: the retry is a new write
        assert log.log_end_offset == 2


def test_plain_batches_pass_untouched_beside_idempotent_ones(partition_dir):
    with open_log(partition_dir) as log:
        plain = build_batch([(BASE_TIME_MS, b"k", b"p", ())])
        append(log, plain)
        append(log, plain)
        append(log, plain + idempotent(7, 0, 0))
        assert append(log, idempotent(7, 0, 0)).first_offset == 3
        assert log.log_end_offset == 4
        assert log.producer_state.producers.keys() == {7}


def test_snapshot_format_round_trips_and_detects_corruption():
    entries = [SnapshotEntry(7, 1, 9, 100, 2, BASE_TIME_MS), SnapshotEntry(8, 0, 0, 5, 0, 1)]
    data = encode_snapshot(entries)
    assert data[:2] == b"\x00\x01" and len(data) == 2 + 4 + 4 + 2 * 46
    assert decode_snapshot(data) == entries
    from odradek.storage.producer_snapshot_file import CorruptSnapshotError

    with pytest.raises(CorruptSnapshotError, match="CRC"):
        decode_snapshot(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(CorruptSnapshotError, match="version"):
        decode_snapshot(b"\x00\x02" + data[2:])


def test_a_roll_and_a_clean_close_write_snapshots_that_restore_dedup(partition_dir):
    config = LogConfig(segment_bytes=400)
    with open_log(partition_dir, config) as log:
        for seq in range(6):
            append(log, idempotent(7, 0, seq, tag="x" * 50))
        end = log.log_end_offset
        assert log.number_of_segments > 1
        wait_for_roll_snapshots(partition_dir, log.number_of_segments - 1)
    snapshots = sorted(p.name for p in partition_dir.glob("*.snapshot"))
    assert f"{end:020d}.snapshot" in snapshots and len(snapshots) >= 2
    assert read_snapshot(snapshot_file(partition_dir, end))[-1].last_sequence == 5
    with open_log(partition_dir, config, recovery_point=end, had_clean_shutdown=True) as log:
        assert append(log, idempotent(7, 0, 5, tag="x" * 50)).first_offset == 5
        assert log.log_end_offset == end


@pytest.mark.parametrize("snapshot", ["kept", "missing", "corrupt"])
def test_an_unclean_restart_rebuilds_the_state_from_snapshot_and_log(
    partition_dir, snapshot, caplog
):
    config = LogConfig(segment_bytes=400)
    with open_log(partition_dir, config) as log:
        for seq in range(8):
            append(log, idempotent(7, 0, seq, tag="x" * 50))
        end = log.log_end_offset
        wait_for_roll_snapshots(partition_dir, log.number_of_segments - 1)
    # the close wrote a snapshot at the log end: an unclean stop would not have
    snapshot_file(partition_dir, end).unlink()
    rolls = sorted(partition_dir.glob("*.snapshot"))
    assert rolls
    if snapshot == "missing":
        for path in rolls:
            path.unlink()
    elif snapshot == "corrupt":
        for path in rolls:
            path.write_bytes(path.read_bytes()[:-3] + b"bad")
    with caplog.at_level(logging.INFO):
        with open_log(partition_dir, config, recovery_point=end) as log:
            assert append(log, idempotent(7, 0, 7, tag="x" * 50)).first_offset == 7
            with pytest.raises(OutOfOrderSequenceNumberError):
                append(log, idempotent(7, 0, 9))
            append(log, idempotent(7, 0, 8))
            assert log.log_end_offset == end + 1
    if snapshot == "corrupt":
        assert "unreadable" in caplog.text
    if snapshot == "missing":
        assert "rebuilding the producer state from the log" in caplog.text


def test_snapshots_above_the_recovery_point_are_deleted_after_an_unclean_stop(partition_dir):
    config = LogConfig(segment_bytes=400)
    with open_log(partition_dir, config) as log:
        for seq in range(8):
            append(log, idempotent(7, 0, seq, tag="x" * 50))
        end = log.log_end_offset
        wait_for_roll_snapshots(partition_dir, log.number_of_segments - 1)
    offsets = sorted(int(p.name[:20]) for p in partition_dir.glob("*.snapshot"))
    recovery_point = offsets[0]
    with open_log(partition_dir, config, recovery_point=recovery_point) as log:
        remaining = sorted(int(p.name[:20]) for p in partition_dir.glob("*.snapshot"))
        assert all(o <= recovery_point for o in remaining)
        assert append(log, idempotent(7, 0, 7, tag="x" * 50)).first_offset == end - 1


def test_truncation_reloads_the_producer_state(partition_dir):
    with open_log(partition_dir) as log:
        for seq in range(4):
            append(log, idempotent(7, 0, seq))
        log.truncate_to(2)
        assert log.producer_state.producers[7].last_seq == 1
        append(log, idempotent(7, 0, 2))
        assert log.log_end_offset == 3


def test_the_leader_epoch_checkpoint_records_where_epoch_zero_starts(partition_dir):
    with open_log(partition_dir) as log:
        append(log, idempotent(7, 0, 0))
        append(log, idempotent(7, 0, 1))
        assert wait_for_file(partition_dir / LEADER_EPOCH_CHECKPOINT_FILE) == "0\n1\n0 0\n"
        assert log.end_offset_for_epoch(0, 0) == EpochEntry(0, 2)
        assert log.end_offset_for_epoch(-1, 0) == EpochEntry(-1, -1)
        log.truncate_fully_and_start_at(10)
        assert decode_checkpoint((partition_dir / LEADER_EPOCH_CHECKPOINT_FILE).read_text()) == []


def test_compaction_keeps_the_header_of_every_live_producers_last_batch(tmp_path):
    """Producers 7 and 8 write key k (two records each), then plain batches overwrite it: the
    cleaner drops their records but keeps their last batches' headers as empty batches (Kafka's
    RETAIN_EMPTY), so a retry of either is still answered with its offsets, before and after a
    restart that rebuilds the producer state from those empty batches alone."""
    from cleaner_helpers import COMPACT, clean_fully

    directory = tmp_path / "compacted-0"
    directory.mkdir()
    with open_log(directory, COMPACT) as log:
        first = append(log, idempotent(7, 0, 0, count=2))
        second = append(log, idempotent(8, 0, 0, count=2))
        for i in range(40):
            append(log, build_batch([(BASE_TIME_MS + i, b"k", b"x" * 40, ())]))
        log.roll()
        assert clean_fully(log) > 0
        assert [r.offset for r in read_all(log)] == [43]  # the latest k alone
        headers = [
            (b.base_offset, b.last_offset, b.records_count, b.producer_id, b.base_sequence)
            for b in stored_batches(log)
            if b.producer_id >= 0
        ]
        assert headers == [(0, 1, 0, 7, 0), (2, 3, 0, 8, 0)]
        assert append(log, idempotent(7, 0, 0, count=2)).first_offset == first.first_offset
        end = log.log_end_offset
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    with open_log(directory, COMPACT, recovery_point=0) as log:  # rebuilt from the log
        assert log.producer_state.producers[8].last_seq == 1
        assert append(log, idempotent(8, 0, 0, count=2)).first_offset == second.first_offset
        assert append(log, idempotent(7, 0, 0, count=2)).first_offset == first.first_offset
        assert log.log_end_offset == end
        append(log, idempotent(7, 0, 2))  # the next sequence is taken
        with pytest.raises(OutOfOrderSequenceNumberError):
            append(log, idempotent(8, 0, 5))


def stored_batches(log):
    """Every batch the log's segments hold, empty ones included."""
    return [b for segment in log.segments.values() for _, b in segment.log.batches()]


def test_snapshots_and_leader_epochs_follow_retention(partition_dir):
    from dataclasses import replace

    config = replace(LogConfig(segment_bytes=400), retention_bytes=500)
    with open_log(partition_dir, config) as log:
        for seq in range(10):
            append(log, idempotent(7, 0, seq, tag="x" * 50))
        wait_for_roll_snapshots(partition_dir, log.number_of_segments - 1)
        assert log.delete_old_segments() > 0
        first = log.segments.first_segment.base_offset
        offsets = sorted(int(p.name[:20]) for p in partition_dir.glob("*.snapshot"))
        assert offsets and min(offsets) >= first
        epochs = decode_checkpoint((partition_dir / LEADER_EPOCH_CHECKPOINT_FILE).read_text())
        assert epochs == [EpochEntry(0, log.log_start_offset)]
        append(log, idempotent(7, 0, 10, tag="x" * 50))  # the producer is still known
        with pytest.raises(OutOfOrderSequenceNumberError):
            append(log, idempotent(7, 0, 20))


def test_a_roll_snapshot_overtaken_by_a_truncation_is_not_written(partition_dir: Path) -> None:
    """A roll's snapshot waits for its background flush. When a truncation removes the
    segment the roll made and the log grows back past the same offset, that stale snapshot
    (taken with no producer) must not land there: the next start-up would load it and
    write an idempotent producer's retry twice."""
    scheduler = Scheduler()  # never started: the rolls' background flushes wait
    log = UnifiedLog.open(partition_dir, LogConfig(), scheduler, clock=MockClock())
    for n in range(10):
        append(log, build_batch([(BASE_TIME_MS, b"k", b"p%d" % n, ())]))
    log.roll()  # its snapshot at 10, with no producer, waits
    append(log, build_batch([(BASE_TIME_MS, b"k", b"p10", ())]))
    log.truncate_to(6)
    written = append(log, idempotent(1000, 0, 0, count=4))
    assert (written.first_offset, written.last_offset) == (6, 9)
    log.roll()  # its snapshot at 10 holds producer 1000
    scheduler.shutdown(run_pending_one_offs=True)  # both flushes run, the stale one first
    log.close()
    with open_log(partition_dir, recovery_point=10, had_clean_shutdown=True) as reopened:
        retry = reopened.append(idempotent(1000, 0, 0, count=4))
        assert (retry.first_offset, retry.last_offset) == (6, 9)
        assert reopened.log_end_offset == 10
