"""UnifiedLog: append, read, high watermark, flush, retention, truncation (§4, 6, 7, 9, 10)."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest
from log_helpers import BASE_TIME_MS, append, batch, open_log, read_all, records_of

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.record.record_batch import NO_TIMESTAMP
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log_file_names as names
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.file_records import FileRecords
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog

SMALL = LogConfig(
    segment_bytes=1024, index_interval_bytes=64, segment_index_bytes=4096, file_delete_delay_ms=0
)


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


def test_append_assigns_offsets_from_the_log_end(partition_dir: Path) -> None:
    with open_log(partition_dir) as log:
        first = append(log, batch(3))
        second = append(log, batch(2))
        assert (first.first_offset, first.last_offset) == (0, 2)
        assert (second.first_offset, second.last_offset) == (3, 4)
        assert log.log_end_offset == 5
        assert [r.offset for r in read_all(log)] == [0, 1, 2, 3, 4]


def test_high_watermark_starts_at_log_end_and_bounds_consumer_reads(partition_dir: Path) -> None:
    with open_log(partition_dir) as log:
        log.append(batch(2))
        log.update_high_watermark(0)
        log.append(batch(2))
        assert log.high_watermark == 0
        info = log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        assert info.records is None
        assert [r.offset for r in records_of(log.read(0, 1 << 20, FetchIsolation.LOG_END))] == [
            0,
            1,
            2,
            3,
        ]
        log.maybe_increment_high_watermark(log.convert_to_offset_metadata(2))
        assert [r.offset for r in records_of(log.read(0, 1 << 20))] == [0, 1]
        # A read between the HW and the LEO is empty, not an error.
        assert log.read(3, 100).records is None


def test_a_read_at_its_bound_answers_with_the_bound_as_it_is_now(partition_dir: Path) -> None:
    """A read at the HW (or, for replicas, the log end) returns nothing and where that bound
    sits on disk: the same answer the general read path gives (convert_to_offset_metadata), as
    appends, rolls, HW moves, an offset-only HW and a truncation move the bound."""

    def check_reads_at_the_bounds(log: UnifiedLog) -> None:
        high_watermark = log.high_watermark
        at_hw = log.read(high_watermark, 1 << 20)
        assert at_hw.records is None
        assert at_hw.fetch_offset_metadata == log.convert_to_offset_metadata(high_watermark)
        at_end = log.read(log.log_end_offset, 1 << 20, FetchIsolation.LOG_END)
        assert at_end.records is None
        assert at_end.fetch_offset_metadata == log.log_end_offset_metadata

    with open_log(partition_dir, SMALL) as log:
        for step in range(40):
            log.append(batch(2, value_size=30))  # SMALL rolls every few appends
            check_reads_at_the_bounds(log)
            if step % 3:
                log.maybe_increment_high_watermark(log.log_end_offset_metadata)
                check_reads_at_the_bounds(log)
        assert log.number_of_segments > 3
        log.update_high_watermark(7)  # known by its offset only, until a read resolves it
        assert log.high_watermark == 7
        check_reads_at_the_bounds(log)
        log.truncate_to(6)  # a batch boundary, below the HW
        assert (log.high_watermark, log.log_end_offset) == (6, 6)
        check_reads_at_the_bounds(log)
        log.append(batch(1))
        check_reads_at_the_bounds(log)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(log.log_end_offset + 1, 1 << 20, FetchIsolation.LOG_END)


def test_high_watermark_is_clamped_and_never_moves_back(partition_dir: Path) -> None:
    with open_log(partition_dir) as log:
        append(log, batch(5))
        assert log.update_high_watermark(100) == 5
        assert log.maybe_increment_high_watermark(log.convert_to_offset_metadata(3)) is None
        assert log.high_watermark == 5
        with pytest.raises(ValueError):
            log.maybe_increment_high_watermark(log.log_end_offset_metadata.__class__(6))


def test_raising_the_high_watermark_does_not_wait_for_an_append(partition_dir: Path) -> None:
    """The event loop raises the HW after each append while the append thread may be in the
    next one: it must not wait for it."""
    with open_log(partition_dir) as log:
        log.append(batch(3))
        end = log.log_end_offset_metadata
        holding, release = threading.Event(), threading.Event()

        def append_in_progress() -> None:
            with log._lock:  # what an append (or a roll) holds for its whole write
                holding.set()
                release.wait(10)

        holder = threading.Thread(target=append_in_progress)
        holder.start()
        try:
            assert holding.wait(10)
            started = time.monotonic()
            assert log.maybe_increment_high_watermark(end) is not None
            assert log.high_watermark == 3
            assert time.monotonic() - started < 1
        finally:
            release.set()
            holder.join()


def test_the_high_watermark_stays_within_the_log_while_raised_and_truncated(
    partition_dir: Path,
) -> None:
    """Raises from another thread race appends and truncations: the HW is never above the
    log end, nor ever moves back but by a truncation."""
    with open_log(partition_dir) as log:
        stop = threading.Event()
        seen: list[tuple[int, int]] = []

        def raise_high_watermark() -> None:
            while not stop.is_set():
                try:
                    log.maybe_increment_high_watermark(log.log_end_offset_metadata)
                except ValueError:
                    pass  # the end read was truncated before the raise: refused
                seen.append((log.high_watermark, log.log_end_offset))

        raiser = threading.Thread(target=raise_high_watermark)
        raiser.start()
        try:
            for round_number in range(200):
                log.append(batch(3))
                if round_number % 3 == 2:
                    log.truncate_to(log.log_end_offset - 4)
                assert log.high_watermark <= log.log_end_offset
        finally:
            stop.set()
            raiser.join()
        log.maybe_increment_high_watermark(log.log_end_offset_metadata)
        assert log.high_watermark == log.log_end_offset
        assert [r.offset for r in records_of(log.read(0, 1 << 30))] == list(
            range(log.log_end_offset)
        )
        assert seen


def test_a_committing_append_moves_the_high_watermark_as_a_raise_after_it_would(
    partition_dir: Path,
) -> None:
    """``append(commit=True)`` (acks 0/1) leaves the HW where ``maybe_increment_high_watermark``
    of the new end would: at the end with its position, over uncommitted appends before it
    (acks=all), across a roll and for a retried batch; a refused append moves nothing."""
    idempotent = build_batch(
        [(BASE_TIME_MS, b"k", b"v", ())], producer_id=7, producer_epoch=0, base_sequence=0
    )
    with open_log(partition_dir, LogConfig(segment_bytes=300)) as log:
        log.append(batch(2))
        assert log.high_watermark == 0
        log.append(batch(3), commit=True)
        assert log.high_watermark == 5
        assert log._high_watermark.metadata == log.log_end_offset_metadata
        for _ in range(4):  # rolls a segment of 300 bytes on the way
            log.append(batch(2))
            log.append(batch(1), commit=True)
            assert log._high_watermark.metadata == log.log_end_offset_metadata
        assert log.number_of_segments > 1
        log.append(idempotent)
        end = log.log_end_offset
        assert log.high_watermark == end - 1
        retried = log.append(idempotent, commit=True)  # a duplicate: nothing written
        assert (retried.first_offset, log.log_end_offset) == (end - 1, end)
        assert log.high_watermark == end
        with pytest.raises(RecordListTooLargeError):
            log.append(batch(1, value_size=400), commit=True)
        assert log.high_watermark == log.log_end_offset == end
        assert [r.offset for r in records_of(log.read(end - 1, 1 << 30))] == [end - 1]


def test_read_out_of_range_names_the_valid_range(partition_dir: Path) -> None:
    with open_log(partition_dir) as log:
        append(log, batch(3))
        assert log.read(3, 100).records is None
        with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 3\]"):
            log.read(4, 100)
        log.delete_records(2)
        with pytest.raises(OffsetOutOfRangeError, match=r"\[2, 3\]"):
            log.read(1, 100)


def test_read_returns_the_batch_holding_the_offset(partition_dir: Path) -> None:
    with open_log(partition_dir) as log:
        append(log, batch(5))
        append(log, batch(5))
        records = records_of(log.read(7, 1 << 20))
        assert records[0].offset == 5  # the whole batch; the consumer skips below 7
        assert [r.offset for r in records] == list(range(5, 10))


def test_max_bytes_and_min_one_message(partition_dir: Path) -> None:
    with open_log(partition_dir) as log:
        append(log, batch(4, value_size=200))
        append(log, batch(4, value_size=200))
        whole = log.read(0, 1 << 20)
        first_batch_size = whole.records.length // 2
        assert log.read(0, 10, min_one_message=True).records.length == first_batch_size
        truncated = log.read(0, 10, min_one_message=False)
        assert truncated.records.length == 10
        assert records_of(truncated) == []  # a partial batch is dropped by readers


def test_a_read_from_where_the_last_read_stopped_reads_one_header(
    partition_dir: Path, monkeypatch
) -> None:
    """A consumer keeping up reads from the bound its last read reached: that read starts at
    the bound's position, with no index lookup and no scan of the headers before it."""
    config = LogConfig(index_interval_bytes=1 << 20)  # one index entry: a scan from byte 0
    with open_log(partition_dir, config) as log:
        for _ in range(20):
            append(log, batch(1))
        assert [r.offset for r in records_of(log.read(0, 1 << 20))] == list(range(20))
        append(log, batch(2))
        scans = []
        search = FileRecords.search_for_offset_with_size
        monkeypatch.setattr(
            FileRecords,
            "search_for_offset_with_size",
            lambda self, *args: scans.append(args) or search(self, *args),
        )
        assert [r.offset for r in records_of(log.read(20, 1 << 20))] == [20, 21]
        assert scans == []
        assert [r.offset for r in records_of(log.read(5, 1 << 20))] == list(range(5, 22))
        assert scans == [(5, 0)]  # any other offset: the index and a scan, as before


def test_a_read_from_a_stale_bound_finds_the_batch_that_is_there_now(partition_dir: Path) -> None:
    """The bound a read stopped at may no longer hold what it did: truncated and written
    again with batches of other sizes, or deleted and rolled again at the same base offset.
    A read from it returns what the log holds now."""
    with open_log(partition_dir) as log:
        for _ in range(6):
            append(log, batch(1, value_size=10))
        assert len(records_of(log.read(0, 1 << 20))) == 6  # the bound: offset 6, 6 batches in
        log.truncate_to(3)
        two = batch(2, values=[b"a", b"b"])  # as long as a one-record batch
        assert len(two) == len(batch(1, value_size=10))
        append(log, two)  # offsets 3-4
        for value in (b"5" * 10, b"6" * 10, b"7" * 10):
            append(log, batch(1, values=[value]))
        # Now the batch 6 batches in starts at offset 7, not 6.
        assert [(r.offset, r.value) for r in records_of(log.read(6, 1 << 20))] == [
            (6, b"6" * 10),
            (7, b"7" * 10),
        ]
        log.delete_records(log.log_end_offset)  # every segment goes; one rolls at offset 8
        append(log, batch(1, values=[b"f" * 50]))
        append(log, batch(1, values=[b"g"]))
        assert [(r.offset, r.value) for r in records_of(log.read(9, 1 << 20))] == [(9, b"g")]


def test_roll_by_size_creates_named_segments(partition_dir: Path) -> None:
    with open_log(partition_dir, SMALL) as log:
        for _ in range(20):
            append(log, batch(2, value_size=100))
        assert log.number_of_segments > 3
        bases = [s.base_offset for s in log.segments.values()]
        for base in bases:
            assert names.log_file(partition_dir, base).exists()
        assert all(s.size <= SMALL.segment_bytes for s in log.segments.values())
        assert [r.offset for r in read_all(log)] == list(range(40))
        # inactive segments' indexes are trimmed to their used size
        first = log.segments.first_segment
        assert first.offset_index_path.stat().st_size == first.offset_index.entries * 8


def test_roll_by_time_uses_the_first_batch_timestamp(partition_dir: Path) -> None:
    clock = MockClock(BASE_TIME_MS)
    config = LogConfig(segment_ms=1000)
    with open_log(partition_dir, config, clock) as log:
        append(log, batch(1, timestamp=BASE_TIME_MS))
        clock.sleep(500)
        append(log, batch(1, timestamp=BASE_TIME_MS + 500))
        assert log.number_of_segments == 1
        clock.sleep(600)
        append(log, batch(1, timestamp=BASE_TIME_MS + 1100))
        assert log.number_of_segments == 2
        assert log.active_segment.base_offset == 2


def test_replayed_old_records_fill_segments_as_any_others(partition_dir: Path) -> None:
    """Records a month old (a backfill, a mirror): a segment's age is record time, as in
    Kafka's timeWaitedForRoll; by the clock every append would roll a segment of its own."""
    clock = MockClock(BASE_TIME_MS + 30 * 24 * 3600 * 1000)
    with open_log(partition_dir, LogConfig(), clock) as log:
        for n in range(50):
            append(log, batch(2, timestamp=BASE_TIME_MS + n))
            clock.sleep(10)
        assert log.number_of_segments == 1


def test_log_append_time_ages_segments_by_the_broker_clock(partition_dir: Path) -> None:
    clock = MockClock(BASE_TIME_MS)
    config = LogConfig(segment_ms=1000, message_timestamp_type="LogAppendTime")
    with open_log(partition_dir, config, clock) as log:
        old = BASE_TIME_MS - 10**9  # the producer's timestamps do not count
        append(log, batch(1, timestamp=old))
        clock.sleep(1000)
        append(log, batch(1, timestamp=old))
        assert log.number_of_segments == 1
        clock.sleep(1)
        append(log, batch(1, timestamp=old))
        assert log.number_of_segments == 2


def test_roll_jitter_is_drawn_below_the_configured_bound(partition_dir: Path) -> None:
    with open_log(partition_dir, LogConfig(segment_jitter_ms=50)) as log:
        jitters = set()
        for _ in range(30):
            append(log, batch(1))
            log.roll()
            jitters.add(log.active_segment.roll_jitter_ms)
        assert all(0 <= j < 50 for j in jitters)
        assert len(jitters) > 1


def test_roll_when_the_index_is_full(partition_dir: Path) -> None:
    config = LogConfig(segment_index_bytes=8 * 3, index_interval_bytes=1)
    with open_log(partition_dir, config) as log:
        for _ in range(10):
            append(log, batch(1))
        assert log.number_of_segments > 2
        assert [r.offset for r in read_all(log)] == list(range(10))


def test_append_larger_than_a_segment_is_refused(partition_dir: Path) -> None:
    config = LogConfig(segment_bytes=500, max_message_bytes=10_000)
    with open_log(partition_dir, config) as log:
        with pytest.raises(RecordListTooLargeError, match="segment.bytes=500"):
            append(log, batch(1, value_size=600))
        assert log.log_end_offset == 0
        assert log.active_segment.size == 0


def test_invalid_batch_writes_nothing(partition_dir: Path) -> None:
    with open_log(partition_dir, LogConfig(cleanup_policy=("compact",))) as log:
        append(log, batch(1))
        good = bytearray(batch(2))
        good[-1] ^= 0xFF
        with pytest.raises(CorruptRecordError):
            append(log, bytes(good))
        with pytest.raises(InvalidRecordError):
            append(log, batch(1, key=None))
        assert log.log_end_offset == 1
        assert log.active_segment.size == len(batch(1))


@pytest.mark.usefixtures("python_append_path")
def test_full_disk_cuts_the_partial_write_back_and_recovers(
    partition_dir: Path, monkeypatch
) -> None:
    with open_log(partition_dir) as log:
        append(log, batch(2))
        size = log.active_segment.size
        real_pwrite = os.pwrite

        def half_then_enospc(fd, data, position):
            if len(data) > 20:
                real_pwrite(fd, bytes(data)[:20], position)
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "pwrite", half_then_enospc)
        with pytest.raises(KafkaStorageError, match="No space left"):
            append(log, batch(3))
        assert os.path.getsize(log.active_segment.log.path) == size
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        assert [r.offset for r in read_all(log)] == [0, 1]
        append(log, batch(1))
        assert [r.offset for r in read_all(log)] == [0, 1, 2]


@pytest.mark.usefixtures("python_append_path")
def test_short_writes_are_finished(partition_dir: Path, monkeypatch) -> None:
    with open_log(partition_dir) as log:
        real_pwrite = os.pwrite
        calls = []

        def at_most_20_bytes(fd, data, position):
            calls.append(len(data))
            return real_pwrite(fd, bytes(data)[:20], position)

        monkeypatch.setattr(os, "pwrite", at_most_20_bytes)
        append(log, batch(3))
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        assert len(calls) > 2
        assert log.active_segment.size == len(batch(3))
        assert [r.offset for r in read_all(log)] == [0, 1, 2]


@pytest.mark.usefixtures("python_append_path")
def test_io_error_is_reported_to_the_owner_except_enospc(partition_dir: Path, monkeypatch) -> None:
    with open_log(partition_dir) as log:
        reported = []
        log.io_error_handler = lambda failed_log, error: reported.append(error.errno)
        for code in (errno.ENOSPC, errno.EIO):
            monkeypatch.setattr(
                os, "pwrite", lambda *a, c=code: (_ for _ in ()).throw(OSError(c, "x"))
            )
            with pytest.raises(KafkaStorageError):
                append(log, batch(1))
        assert reported == [errno.EIO]


def test_flush_moves_the_recovery_point(partition_dir: Path) -> None:
    with open_log(partition_dir, LogConfig(index_interval_bytes=64)) as log:
        for _ in range(10):
            append(log, batch(2, value_size=100))
        assert log.unflushed_messages > 0
        log.flush(7)
        assert log.recovery_point == 7
        log.flush()
        assert log.recovery_point == log.log_end_offset
        assert log.unflushed_messages == 0


def test_a_truncation_during_a_flush_keeps_the_recovery_point_at_or_below_it(
    partition_dir: Path, monkeypatch
) -> None:
    """The records a flush synced may be truncated and written again while it syncs: the
    recovery point must not then move over the new, unsynced ones."""
    from odradek.storage.log_segment import LogSegment

    with open_log(partition_dir) as log:
        for _ in range(5):
            append(log, batch(2))
        real_flush = LogSegment.flush

        def truncate_and_rewrite_meanwhile(segment, include_indexes=True):  # noqa: ANN001
            real_flush(segment, include_indexes)
            monkeypatch.setattr(LogSegment, "flush", real_flush)
            log.truncate_to(4)
            append(log, batch(3))  # offsets 4-6 again, not synced

        monkeypatch.setattr(LogSegment, "flush", truncate_and_rewrite_meanwhile)
        log.flush()  # of offsets up to 10
        assert log.log_end_offset == 7
        assert log.recovery_point <= 4


def test_a_flush_does_not_wait_for_the_appends_lock(partition_dir: Path) -> None:
    """Appends hold the log's lock back to back; a flush (after a roll, for acks=all) must not
    queue behind them."""
    with open_log(partition_dir) as log:
        append(log, batch(3))
        holding, release = threading.Event(), threading.Event()

        def hold_the_lock() -> None:
            with log._lock:
                holding.set()
                release.wait(10)

        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        holding.wait(10)
        flusher = threading.Thread(target=log.flush)
        flusher.start()
        flusher.join(5)
        flushed = not flusher.is_alive()
        release.set()
        holder.join()
        flusher.join()
        assert flushed and log.recovery_point == 3


def test_flush_messages_forces_a_flush(partition_dir: Path) -> None:
    with open_log(partition_dir, LogConfig(flush_messages=3)) as log:
        append(log, batch(2))
        assert log.recovery_point == 0
        append(log, batch(1))
        assert log.recovery_point == 3


def test_retention_by_time(partition_dir: Path) -> None:
    clock = MockClock(BASE_TIME_MS)
    config = LogConfig(segment_bytes=1024, retention_ms=10_000, file_delete_delay_ms=0)
    with open_log(partition_dir, config, clock) as log:
        for n in range(12):
            append(log, batch(2, timestamp=BASE_TIME_MS + n * 1000, value_size=100))
            clock.sleep(1000)
        segments_before = log.number_of_segments
        clock.sleep(5000)
        deleted = log.delete_old_segments()
        assert 0 < deleted < segments_before
        now = clock.milliseconds()
        assert all(now - s.largest_timestamp <= 10_000 for s in log.segments.values()[:-1])
        assert log.log_start_offset == log.segments.first_segment.base_offset
        assert read_all(log)[0].offset == log.log_start_offset


def test_retention_by_time_dates_a_segment_without_timestamps_by_its_file(
    partition_dir: Path,
) -> None:
    """design §10: records with no timestamp (-1) leave the time index empty; the segment's
    largest timestamp is then its .log file's mtime."""
    clock = MockClock(BASE_TIME_MS)
    config = LogConfig(retention_ms=10_000, file_delete_delay_ms=0)
    with open_log(partition_dir, config, clock) as log:
        for _ in range(2):
            append(log, batch(1, timestamp=NO_TIMESTAMP))
            log.roll()
        old, recent, _active = log.segments.values()
        assert old.time_index.entries == 0 and old.max_timestamp_so_far == NO_TIMESTAMP
        old.set_last_modified(clock.milliseconds() - 3_600_000)
        recent.set_last_modified(clock.milliseconds() - 1000)
        assert log.delete_old_segments() == 1
        assert [s.base_offset for s in log.segments.values()] == [1, 2]
        assert log.log_start_offset == 1
        assert [r.offset for r in read_all(log)] == [1]


def test_retention_by_size(partition_dir: Path) -> None:
    config = LogConfig(segment_bytes=1024, retention_bytes=2048, file_delete_delay_ms=0)
    with open_log(partition_dir, config) as log:
        for _ in range(30):
            append(log, batch(2, value_size=100))
        log.delete_old_segments()
        sizes = [s.size for s in log.segments.values()]
        assert sum(sizes) - 2048 < sizes[0]
        assert log.size_in_bytes >= 2048 - 1024


def test_retention_stops_at_the_high_watermark(partition_dir: Path) -> None:
    config = LogConfig(segment_bytes=1024, retention_bytes=0, file_delete_delay_ms=0)
    with open_log(partition_dir, config) as log:
        for _ in range(30):
            append(log, batch(2, value_size=100))
        log.update_high_watermark(log.segments.values()[2].base_offset)
        log.delete_old_segments()
        assert log.segments.first_segment.base_offset == log.segments.values()[0].base_offset
        assert log.log_start_offset <= log.high_watermark
        assert log.number_of_segments >= 2


def test_deleting_every_segment_rolls_a_new_active_one(partition_dir: Path) -> None:
    clock = MockClock(BASE_TIME_MS)
    config = LogConfig(retention_ms=1000, file_delete_delay_ms=0)
    with open_log(partition_dir, config, clock) as log:
        append(log, batch(3, timestamp=BASE_TIME_MS))
        clock.sleep(5000)
        assert log.delete_old_segments() == 1
        assert log.number_of_segments == 1
        assert log.active_segment.base_offset == 3
        assert log.log_start_offset == 3
        assert log.log_end_offset == 3
        append(log, batch(1))
        assert [r.offset for r in read_all(log)] == [3]


def test_deleted_segments_are_renamed_then_removed_later(partition_dir: Path) -> None:
    config = LogConfig(segment_bytes=1024, retention_bytes=0, file_delete_delay_ms=300)
    with open_log(partition_dir, config) as log:
        for _ in range(10):
            append(log, batch(2, value_size=100))
        base = log.segments.first_segment.base_offset
        log.delete_old_segments()
        deleted = names.log_file(partition_dir, base, names.DELETED_FILE_SUFFIX)
        assert deleted.exists()
        assert not names.log_file(partition_dir, base).exists()
        deadline = time.monotonic() + 30
        while deleted.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not deleted.exists()


def test_a_deleted_segment_takes_no_flush(partition_dir: Path) -> None:
    """Two segments of one base offset deleted before either's delayed delete: the second's
    .deleted names replace the first's, and the first's delete unlinks them. The second's
    flush, scheduled by its roll and run after that (a scheduler that fell behind), found
    its index gone and took the log directory offline."""
    scheduler = Scheduler()  # not started: its queue runs, in order, at shutdown
    log = UnifiedLog.open(partition_dir, LogConfig(file_delete_delay_ms=0), scheduler)
    io_errors: list[OSError] = []
    log.io_error_handler = lambda _log, error: io_errors.append(error)
    for _ in range(2):
        append(log, batch(1))
        log.roll()
        append(log, batch(1))
        log.roll()  # a flush of the segment at offset 1 waits in the queue
        log.truncate_to(1)  # that segment and the next are deleted
    scheduler.shutdown(run_pending_one_offs=True)
    assert io_errors == []
    assert sorted(p.name for p in partition_dir.glob("0*.log*")) == [
        names.log_file(partition_dir, base).name for base in (0, 1)
    ]  # (and the next segment's pre-created file)
    log.close()


def test_delete_records_raises_the_log_start_offset_and_drops_segments(partition_dir: Path) -> None:
    with open_log(partition_dir, SMALL) as log:
        for _ in range(20):
            append(log, batch(2, value_size=100))
        target = log.segments.values()[3].base_offset + 1
        assert log.delete_records(target) == target
        assert log.log_start_offset == target
        assert log.segments.first_segment.base_offset == log.segments.values()[0].base_offset
        assert log.segments.first_segment.base_offset <= target
        assert read_all(log)[0].offset == target
        with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
            log.delete_records(log.log_end_offset + 1)
        assert log.delete_records(5) == target  # never lowered


def test_offset_for_timestamp(partition_dir: Path) -> None:
    with open_log(partition_dir, SMALL) as log:
        for n in range(20):
            append(log, batch(2, timestamp=BASE_TIME_MS + n * 100, value_size=100))
        assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0
        assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP).offset == 40
        found = log.fetch_offset_by_timestamp(BASE_TIME_MS + 501)
        assert (found.offset, found.timestamp) == (11, BASE_TIME_MS + 501)
        found = log.fetch_offset_by_timestamp(BASE_TIME_MS + 550)
        assert found.offset == 12
        assert log.fetch_offset_by_timestamp(BASE_TIME_MS + 10**6) is None


def test_a_time_lookup_searches_the_first_segment_new_enough_alone(partition_dir: Path) -> None:
    """Kafka's UnifiedLog.searchOffsetInLocalLog: the first segment whose largest timestamp
    reaches the target is searched from the log start, and no later one: with its records
    that new all below the log start (DeleteRecords), there is no answer (found by
    tests/test_kafka_reference_model.py)."""
    with open_log(partition_dir, SMALL) as log:
        append(
            log, build_batch([(BASE_TIME_MS + 5, b"k", b"a", ()), (BASE_TIME_MS, b"k", b"b", ())])
        )
        log.roll()
        append(log, batch(1, timestamp=BASE_TIME_MS + 100))
        log.delete_records(1)
        assert log.fetch_offset_by_timestamp(BASE_TIME_MS + 3) is None
        found = log.fetch_offset_by_timestamp(BASE_TIME_MS)
        assert (found.offset, found.timestamp) == (1, BASE_TIME_MS)
        assert log.fetch_offset_by_timestamp(BASE_TIME_MS + 6).offset == 2


def test_max_timestamp_record_is_the_record_not_its_batchs_last_offset(
    partition_dir: Path,
) -> None:
    """ListOffsets MAX_TIMESTAMP answers the first record holding the largest timestamp, as
    Kafka does (found by tests/test_kafka_reference_model.py), not its batch's last offset."""
    with open_log(partition_dir, SMALL) as log:
        assert log.max_timestamp_record() is None
        stamps = [BASE_TIME_MS, BASE_TIME_MS + 9, BASE_TIME_MS + 3, BASE_TIME_MS + 9]
        append(log, build_batch([(ts, b"k", b"v", ()) for ts in stamps]))
        append(log, batch(2, timestamp=BASE_TIME_MS + 5))
        found = log.max_timestamp_record()
        assert (found.offset, found.timestamp) == (1, BASE_TIME_MS + 9)


def test_list_offsets_latest_is_the_high_watermark_for_consumers(partition_dir: Path) -> None:
    """design §6: ListOffsets "latest" is the HW for consumers (Kafka's READ_UNCOMMITTED: no offset
    they cannot fetch yet), the LEO for replicas; "earliest" is the log start offset, also once
    delete-records raised it."""
    consumer, replica = FetchIsolation.HIGH_WATERMARK, FetchIsolation.LOG_END
    with open_log(partition_dir, SMALL) as log:

        def offset_for(target: int, isolation: FetchIsolation) -> int:
            found = log.fetch_offset_by_timestamp(target, isolation)
            assert found is not None and found.timestamp == NO_TIMESTAMP
            return found.offset

        for _ in range(10):
            append(log, batch(2, value_size=100))
        log.append(batch(3))  # not committed yet
        assert (log.high_watermark, log.log_end_offset) == (20, 23)
        assert offset_for(LATEST_TIMESTAMP, consumer) == 20
        assert offset_for(LATEST_TIMESTAMP, replica) == 23
        assert offset_for(EARLIEST_TIMESTAMP, consumer) == 0
        target = log.segments.values()[1].base_offset + 1
        log.delete_records(target)
        log.delete_old_segments()
        assert log.segments.first_segment.base_offset < target  # not a segment boundary
        for isolation in (consumer, replica):
            assert offset_for(EARLIEST_TIMESTAMP, isolation) == target
        assert offset_for(LATEST_TIMESTAMP, consumer) == 20
        log.delete_records(20)  # up to the HW: nothing left to consume
        assert offset_for(EARLIEST_TIMESTAMP, consumer) == offset_for(LATEST_TIMESTAMP, consumer)
        assert offset_for(LATEST_TIMESTAMP, replica) == 23


def test_truncate_to_removes_later_batches_and_segments(partition_dir: Path) -> None:
    with open_log(partition_dir, SMALL) as log:
        for _ in range(20):
            append(log, batch(2, value_size=100))
        assert log.truncate_to(16)
        assert log.log_end_offset == 16
        assert [r.offset for r in read_all(log)] == list(range(16))
        assert all(s.base_offset <= 16 for s in log.segments.values())
        append(log, batch(1))
        assert read_all(log)[-1].offset == 16
        assert not log.truncate_to(100)


def test_truncate_below_the_first_segment_restarts_the_log(partition_dir: Path) -> None:
    with open_log(partition_dir, SMALL) as log:
        for _ in range(20):
            append(log, batch(2, value_size=100))
        log.delete_records(30)
        log.delete_old_segments()
        log.truncate_to(5)
        assert log.log_start_offset == 5 and log.log_end_offset == 5
        assert log.number_of_segments == 1


def test_one_writer_and_concurrent_readers(partition_dir: Path) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()
    with open_log(partition_dir, SMALL) as log:

        def reader() -> None:
            try:
                while not stop.is_set():
                    seen = read_all(log)
                    offsets = [r.offset for r in seen]
                    assert offsets == list(
                        range(log.log_start_offset, log.log_start_offset + len(offsets))
                    )
            except BaseException as error:  # noqa: BLE001 - reported by the main thread
                errors.append(error)

        readers = [threading.Thread(target=reader) for _ in range(3)]
        for thread in readers:
            thread.start()
        for _ in range(300):
            append(log, batch(2, value_size=50))
        stop.set()
        for thread in readers:
            thread.join()
        assert not errors, errors[0]
        assert len(read_all(log)) == 600


def test_reopen_restores_the_checkpointed_high_watermark(partition_dir: Path) -> None:
    with open_log(partition_dir) as log:
        append(log, batch(5))
        log.flush()
    with open_log(partition_dir, high_watermark=3, had_clean_shutdown=True) as log:
        assert log.high_watermark == 3
    with open_log(partition_dir, high_watermark=99, had_clean_shutdown=True) as log:
        assert log.high_watermark == 5


def test_flush_syncs_indexes_only_of_segments_wholly_below_the_recovery_point(
    partition_dir: Path, monkeypatch
) -> None:
    from odradek.storage.abstract_index import AbstractIndex

    synced: list[Path] = []
    real_flush = AbstractIndex.flush
    monkeypatch.setattr(
        AbstractIndex, "flush", lambda index: (synced.append(index.path), real_flush(index))
    )
    with open_log(partition_dir, LogConfig(index_interval_bytes=64)) as log:
        append(log, batch(3, value_size=100))
        log.flush()
        assert synced == []  # the active segment is rebuilt by recovery anyway
        first = log.active_segment
        log.roll()  # the rolled segment is flushed whole in the background
        deadline = time.monotonic() + 30
        while len(synced) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert set(synced) == {first.offset_index_path, first.time_index_path}
        append(log, batch(2))
        log.flush()
        assert len(synced) == 2
        assert log.recovery_point == log.log_end_offset
