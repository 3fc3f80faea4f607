"""Cleaner: which records a cleaned log keeps and how it stores them (design §11)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from cleaner_helpers import (
    CLEANER,
    NOW_MS,
    clean_fully,
    clean_once,
    compact_config,
    final_values,
    latest_records,
    plan,
    write,
    write_idempotent,
)
from log_helpers import BASE_TIME_MS, batch, open_log, read_all

from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.errors import LogCleaningError
from odradek.cleaner.segment_snapshot import SegmentSnapshot
from odradek.cleaner.skimpy_offset_map import BYTES_PER_ENTRY
from odradek.cleaner.throttler import Throttler
from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.record.compression import CompressionType
from odradek.record.record_batch import TimestampType
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log_file_names as names
from odradek.storage import writeback
from odradek.storage.lazy_index import LazyIndex
from odradek.storage.unified_log import UnifiedLog

DAY_MS = 86_400_000  # delete.retention.ms by default


def _key(n: int) -> bytes:
    return b"key-%03d" % n


def _stored_batches(log: UnifiedLog) -> list:
    return [b for segment in log.segments.values() for _, b in segment.log.batches()]


def test_keeps_the_latest_record_of_each_key_at_its_offset(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(_key(n % 5), b"v%d" % n) for n in range(60)])
        log.roll()
        before = read_all(log)
        result = clean_once(log)
        after = read_all(log)
        assert after == latest_records(before)
        assert [r.offset for r in after] == [55, 56, 57, 58, 59]
        assert result.end_offset == log.log_end_offset
        assert result.stats.records_read == 60 and result.stats.records_written == 5


def test_never_cleans_the_active_segment_or_above_the_high_watermark(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(b"k", b"old-%d" % n) for n in range(40)])
        active_base = log.active_segment.base_offset
        log.update_high_watermark(log.segments.non_active()[1].base_offset + 1)
        task = plan(log)
        assert task.first_uncleanable_offset == log.segments.non_active()[1].base_offset
        clean_once(log)
        remaining = [r.offset for r in read_all(log, upper="leo")]
        # below the segment holding the HW only the key's latest record there stays
        uncleanable = task.first_uncleanable_offset
        assert remaining == [uncleanable - 1, *range(uncleanable, 40)]
        assert log.active_segment.base_offset == active_base


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    lag_ms = 60_000
    with open_log(tmp_path / "t-0", compact_config(min_compaction_lag_ms=lag_ms)) as log:
        write(log, [(b"k", b"v%d" % n) for n in range(45)])
        first, second, third = log.segments.non_active()[:3]
        log.roll()
        # a segment is young while its newest record is less than the lag old
        young_second = second.largest_timestamp + lag_ms - 1
        assert plan(log, now_ms=young_second).first_uncleanable_offset == second.base_offset
        old_second = second.largest_timestamp + lag_ms
        assert plan(log, now_ms=old_second).first_uncleanable_offset == third.base_offset
        young_first = first.largest_timestamp + lag_ms - 1
        assert plan(log, now_ms=young_first).first_uncleanable_offset == 0


def test_tombstones_are_kept_on_the_first_cleaning(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3"), (b"b", b"4")])
        log.roll()
        clean_once(log)
        kept = read_all(log)
        assert [(r.offset, r.key, r.value) for r in kept] == [
            (2, b"a", None),
            (3, b"c", b"3"),
            (4, b"b", b"4"),
        ]
        assert final_values(kept) == {b"b": b"4", b"c": b"3"}


def _tombstone_cleaned_once(log: UnifiedLog, now_ms: int) -> None:
    """A log whose first batch (a value and a tombstone of another key) was cleaned once at
    ``now_ms``, and a later batch making the log dirty again."""
    write(log, [(b"gone", b"x"), (b"kept", b"y"), (b"gone", None)], per_batch=3)
    log.roll()
    clean_once(log, now_ms=now_ms)
    write(log, [(b"new", b"z")])
    log.roll()


def test_the_first_cleaning_keeping_a_tombstone_gives_its_batch_a_delete_horizon(
    tmp_path: Path,
) -> None:
    """Kafka's KIP-534: the batch is rewritten with attribute bit 6 and the cleaning's time
    plus delete.retention.ms as its base timestamp; its records keep their timestamps."""
    config = compact_config(delete_retention_ms=5_000)
    with open_log(tmp_path / "t-0", config) as log:
        write(log, [(b"a", b"1"), (b"b", b"2"), (b"a", None)], per_batch=3)
        before = read_all(log)
        log.roll()
        clean_once(log, now_ms=NOW_MS)
        [cleaned] = _stored_batches(log)[:1]
        assert cleaned.delete_horizon_ms == NOW_MS + 5_000 == cleaned.base_timestamp
        assert [(r.offset, r.timestamp, r.key, r.value) for r in cleaned.records()] == [
            (r.offset, r.timestamp, r.key, r.value) for r in before[1:]
        ]
        assert (cleaned.max_timestamp, cleaned.last_offset) == (before[-1].timestamp, 2)


def test_a_batch_keeping_no_tombstone_gets_no_delete_horizon(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(b"a", None), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")], per_batch=2)
        log.roll()
        clean_once(log)
        assert [b.delete_horizon_ms for b in _stored_batches(log)] == [None, None]
        assert [r.value for r in read_all(log)] == [b"2", b"3", b"4"]


@pytest.mark.parametrize(("later_ms", "kept"), [(4_999, True), (5_000, False), (60_000, False)])
def test_tombstones_go_in_the_first_cleaning_at_or_past_their_batchs_horizon(
    tmp_path: Path, later_ms: int, kept: bool
) -> None:
    """Kafka keeps a tombstone while the cleaning's time is before its batch's horizon; the
    batch, rebuilt around what stays, keeps its horizon."""
    config = compact_config(delete_retention_ms=5_000, segment_bytes=160)  # no merging
    with open_log(tmp_path / "t-0", config) as log:
        _tombstone_cleaned_once(log, NOW_MS)
        clean_once(log, now_ms=NOW_MS + later_ms)
        assert [(r.key, r.value) for r in read_all(log)] == [
            (b"kept", b"y"),
            *([(b"gone", None)] if kept else []),
            (b"new", b"z"),
        ]
        assert _stored_batches(log)[0].delete_horizon_ms == NOW_MS + 5_000


def test_an_empty_batch_kept_for_its_header_has_no_delete_horizon(tmp_path: Path) -> None:
    """A live producer's last batch whose tombstone went past the horizon keeps its header
    alone, written as Kafka's ``writeEmptyHeader`` writes it: no horizon, base timestamp -1."""
    config = compact_config(delete_retention_ms=5_000, segment_bytes=160)
    with open_log(tmp_path / "t-0", config) as log:
        write_idempotent(log, [(b"a", None)], producer_id=7)
        log.roll()
        clean_once(log, now_ms=NOW_MS)
        assert _stored_batches(log)[0].delete_horizon_ms == NOW_MS + 5_000
        write(log, [(b"b", b"1")])
        log.roll()
        clean_once(log, now_ms=NOW_MS + 5_000)
        empty = _stored_batches(log)[0]
        assert (empty.producer_id, empty.records_count) == (7, 0)
        assert (empty.delete_horizon_ms, empty.base_timestamp) == (None, -1)
        assert [r.key for r in read_all(log)] == [b"b"]


def test_segment_modification_times_do_not_decide_tombstones(tmp_path: Path) -> None:
    """Before Kafka 2.8 a segment last modified delete.retention.ms before the clean section's
    newest lost its tombstones; now only the batch's horizon decides."""
    config = compact_config(delete_retention_ms=5_000, segment_bytes=160)
    with open_log(tmp_path / "t-0", config) as log:
        _tombstone_cleaned_once(log, NOW_MS)
        first, *_, last = log.segments.non_active()
        first.set_last_modified(BASE_TIME_MS)
        last.set_last_modified(BASE_TIME_MS + 10**9)
        clean_once(log, now_ms=NOW_MS + 1)
        assert (b"gone", None) in [(r.key, r.value) for r in read_all(log)]


def test_a_new_delete_retention_does_not_move_a_horizon_written(tmp_path: Path) -> None:
    """The horizon is in the batch: delete.retention.ms changed later gives only batches
    stamped later theirs."""
    config = compact_config(delete_retention_ms=5_000, segment_bytes=160)
    with open_log(tmp_path / "t-0", config) as log:
        _tombstone_cleaned_once(log, NOW_MS)
        log.update_config(replace(config, delete_retention_ms=86_400_000))
        write(log, [(b"new", None)])
        log.roll()
        clean_once(log, now_ms=NOW_MS + 5_000)
        batches = _stored_batches(log)
        assert [(r.key, r.value) for r in read_all(log)] == [(b"kept", b"y"), (b"new", None)]
        assert batches[0].delete_horizon_ms == NOW_MS + 5_000
        assert batches[-1].delete_horizon_ms == NOW_MS + 5_000 + 86_400_000


@pytest.mark.parametrize("kind", ["lz4", "LogAppendTime"])
def test_a_tombstone_rewritten_with_a_horizon_keeps_its_timestamp_and_codec(
    tmp_path: Path, kind: str
) -> None:
    """The batch is rebuilt as it was but for the horizon: its codec; a log-append-time batch
    its type and max timestamp (its records' timestamp)."""
    appended_at = BASE_TIME_MS + 50
    config = compact_config(
        message_timestamp_type="LogAppendTime" if kind == "LogAppendTime" else "CreateTime"
    )
    codec = CompressionType.LZ4 if kind == "lz4" else CompressionType.NONE
    with open_log(tmp_path / "t-0", config, MockClock(appended_at)) as log:
        write(log, [(b"a", b"1"), (b"a", None), (b"b", b"2")], per_batch=3, compression=codec)
        before = read_all(log)
        log.roll()
        clean_once(log)
        [cleaned] = _stored_batches(log)
        assert cleaned.delete_horizon_ms == NOW_MS + DAY_MS
        assert cleaned.compression_type is codec
        assert (cleaned.timestamp_type.name == "LOG_APPEND_TIME") is (kind == "LogAppendTime")
        assert cleaned.max_timestamp == before[-1].timestamp
        assert [(r.offset, r.timestamp, r.value) for r in read_all(log)] == [
            (r.offset, r.timestamp, r.value) for r in before[1:]
        ]


def test_cleaned_segment_keeps_the_last_source_segments_modification_time(
    tmp_path: Path,
) -> None:
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=100_000)) as log:
        write(log, [(b"a", b"1")])
        log.roll()
        write(log, [(b"a", b"2")])
        log.roll()
        first, second = log.segments.non_active()
        first.set_last_modified(BASE_TIME_MS)
        second.set_last_modified(BASE_TIME_MS + 5_000)
        clean_once(log)
        (cleaned,) = log.segments.non_active()
        assert cleaned.last_modified == BASE_TIME_MS + 5_000


def test_batches_keep_base_offset_codec_timestamps_and_headers(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        for codec in (CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD):
            name = codec.label.encode()
            records = [(BASE_TIME_MS + 10 * n, name + b"%d" % n, b"v%d" % n, ()) for n in range(4)]
            records[3] = (BASE_TIME_MS + 99, name + b"3", b"v", (("trace", b"id"),))
            log.append(build_batch(records, compression=codec))
            write(log, [(name + b"0", b"new"), (name + b"2", b"new")])  # supersede two
        log.update_high_watermark(log.log_end_offset)
        log.roll()
        before = {r.offset: r for r in read_all(log)}
        clean_once(log)

        stored = [b for b in _stored_batches(log) if b.compression_type is not CompressionType.NONE]
        assert [b.base_offset for b in stored] == [0, 6, 12]
        assert [b.compression_type for b in stored] == [
            CompressionType.GZIP,
            CompressionType.LZ4,
            CompressionType.ZSTD,
        ]
        for b in stored:
            kept = list(b.records())
            assert [r.offset - b.base_offset for r in kept] == [1, 3]
            assert all(r == before[r.offset] for r in kept)  # timestamps, headers, values
            assert b.max_timestamp == max(r.timestamp for r in kept)


def test_batches_whose_records_all_go_are_dropped(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(b"a", b"1"), (b"b", b"2")], per_batch=2)
        write(log, [(b"a", b"3"), (b"b", b"4")], per_batch=2)
        log.roll()
        clean_once(log)
        (survivor,) = _stored_batches(log)
        assert (survivor.base_offset, survivor.records_count) == (2, 2)


def test_a_live_producers_last_batch_keeps_its_header_and_its_surviving_records(
    tmp_path: Path,
) -> None:
    """Kafka's RETAIN_EMPTY: producer 7's last batch (compressed) loses its superseded records
    but keeps its header, last offset included; producer 8's loses them all and stays as an
    empty batch: 61 bytes, no records, a valid CRC, its producer fields, base offset, last
    offset and max timestamp, uncompressed, base timestamp -1."""
    with open_log(tmp_path / "t-0", compact_config()) as log:
        seven = build_batch(
            [(BASE_TIME_MS + n, k, b"7", ()) for n, k in enumerate([b"a", b"b", b"c"])],
            compression=CompressionType.LZ4,
            producer_id=7,
            producer_epoch=2,
            base_sequence=10,
        )
        eight = build_batch(
            [(BASE_TIME_MS + 9 - n, k, b"8", ()) for n, k in enumerate([b"a", b"c"])],
            producer_id=8,
            producer_epoch=0,
            base_sequence=0,
        )
        log.append(seven)
        log.append(eight)  # offsets 3, 4
        write(log, [(b"a", b"x"), (b"c", b"y")], per_batch=2)  # offsets 5, 6
        log.roll()
        leader_epoch = _stored_batches(log)[1].partition_leader_epoch
        clean_once(log)
        kept_seven, kept_eight, plain = _stored_batches(log)
    assert [r.offset for r in kept_seven.records()] == [1]
    assert (kept_seven.base_offset, kept_seven.last_offset, kept_seven.records_count) == (0, 2, 1)
    assert kept_seven.compression_type is CompressionType.LZ4
    assert (kept_seven.producer_id, kept_seven.producer_epoch, kept_seven.base_sequence) == (
        7,
        2,
        10,
    )
    assert kept_eight.is_valid()
    assert (kept_eight.size_in_bytes, kept_eight.records_count) == (61, 0)
    assert (kept_eight.base_offset, kept_eight.last_offset) == (3, 4)
    assert (kept_eight.producer_id, kept_eight.producer_epoch, kept_eight.base_sequence) == (
        8,
        0,
        0,
    )
    assert (kept_eight.base_timestamp, kept_eight.max_timestamp) == (-1, BASE_TIME_MS + 9)
    assert kept_eight.compression_type is CompressionType.NONE
    assert kept_eight.partition_leader_epoch == leader_epoch
    assert list(kept_eight.records()) == []
    assert (plain.base_offset, plain.records_count) == (5, 2)


def test_the_last_batch_of_a_cleaning_round_keeps_its_header(tmp_path: Path) -> None:
    """Kafka 4's cleaner keeps the batch whose next offset is the round's first uncleanable
    offset even when none of its records stays (here keyless records from before the topic
    was compacted), so the cleaned section still ends where it did; batches before it whose
    records all go are dropped."""
    with open_log(tmp_path / "t-0", compact_config(cleanup_policy=("delete",))) as log:
        write(log, [(b"k", b"v"), (None, b"gone")])
        write(log, [(None, b"no key"), (None, b"no key either")], per_batch=2)
        log.update_config(compact_config())
        log.roll()
        task = plan(log)
        clean_once(log)
        batches = _stored_batches(log)
    assert task.first_uncleanable_offset == 4
    assert [(b.base_offset, b.last_offset, b.records_count) for b in batches] == [
        (0, 0, 1),
        (2, 3, 0),
    ]
    assert batches[-1].is_valid() and batches[-1].producer_id == -1


def test_untouched_batches_are_copied_byte_for_byte(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(b"a", b"1"), (b"b", b"2")], per_batch=2, compression=CompressionType.GZIP)
        write(log, [(b"c", b"3")])
        log.roll()
        original = [b.to_bytes() for b in _stored_batches(log)]
        clean_once(log)
        assert [b.to_bytes() for b in _stored_batches(log)] == original


def test_log_append_time_batches_keep_the_append_time(tmp_path: Path) -> None:
    clock = MockClock(BASE_TIME_MS + 777)
    config = compact_config(message_timestamp_type="LogAppendTime")
    with open_log(tmp_path / "t-0", config, clock=clock) as log:
        write(log, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")], per_batch=3)
        log.roll()
        clean_once(log)
        (stored,) = _stored_batches(log)
        assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME
        assert [(r.offset, r.timestamp) for r in stored.records()] == [
            (1, BASE_TIME_MS + 777),
            (2, BASE_TIME_MS + 777),
        ]


def test_records_without_a_key_are_refused_at_append_on_compacted_topics(
    tmp_path: Path,
) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        with pytest.raises(InvalidRecordError, match="key"):
            log.append(batch(2, key=None))
        assert log.log_end_offset == 0
        log.update_config(compact_config(cleanup_policy=("delete",)))
        log.append(batch(2, key=None))
        assert log.log_end_offset == 2


def test_records_without_a_key_from_before_compaction_are_dropped(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config(cleanup_policy=("delete",))) as log:
        write(log, [(None, b"no key"), (b"k", b"v"), (None, b"no key")])
        log.update_config(compact_config())
        log.roll()
        result = clean_once(log)
        assert [r.key for r in read_all(log)] == [b"k"]
        assert result.stats.invalid_records_read == 2


def test_a_full_offset_map_cleans_a_prefix_and_the_next_run_the_rest(tmp_path: Path) -> None:
    small = CleanerConfig(dedupe_buffer_size=12 * BYTES_PER_ENTRY, dedupe_buffer_load_factor=0.9)
    with open_log(tmp_path / "t-0", compact_config()) as log:
        pairs = [(_key(n % 30), b"v%d" % n) for n in range(90)]
        write(log, pairs)
        log.roll()
        before = read_all(log)
        first = clean_once(log, small)
        assert 0 < first.end_offset < log.active_segment.base_offset
        mapped = before[: first.end_offset]
        kept = read_all(log)
        # below the map's end each key keeps only its latest mapped record; above, all stay
        assert [r for r in kept if r.offset < first.end_offset] == latest_records(mapped)
        assert [r for r in kept if r.offset >= first.end_offset] == before[first.end_offset :]
        runs = clean_fully(log, small)
        assert runs > 1
        assert read_all(log) == latest_records(before)


def test_a_map_that_cannot_hold_one_batch_is_an_error(tmp_path: Path) -> None:
    tiny = CleanerConfig(dedupe_buffer_size=3 * BYTES_PER_ENTRY)
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(_key(n), b"v") for n in range(5)], per_batch=5)
        log.roll()
        with pytest.raises(LogCleaningError, match="dedupe.buffer.size"):
            Cleaner(plan(log, tiny)).clean()


def test_groups_of_small_segments_merge_into_one(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=300)) as log:
        write(log, [(_key(n % 3), b"v%d" % n) for n in range(30)])
        log.roll()
        segments_before = log.number_of_segments
        clean_once(log)  # segments are nearly full: one group each, most end up empty
        clean_once(log)
        assert log.number_of_segments < segments_before
        assert read_all(log) == latest_records(read_all(log))
        assert not list(log.dir.glob("*.swap")) and not list(log.dir.glob("*.cleaned"))


def test_a_corrupt_batch_fails_the_run_and_leaves_nothing(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(b"a", b"1" * 50), (b"a", b"2" * 50), (b"b", b"3")])
        log.roll()
        path = names.log_file(log.dir, 0)
        data = bytearray(path.read_bytes())
        data[-5] ^= 0xFF  # inside the last batch's value: its CRC no longer matches
        path.write_bytes(bytes(data))
        with pytest.raises(CorruptRecordError):
            Cleaner(plan(log)).clean()
        assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))


def test_cleaning_is_throttled_to_the_io_rate(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=100_000)) as log:
        write(log, [(_key(n % 10), b"x" * 1000) for n in range(60)])
        log.roll()
        task = plan(log, CleanerConfig(max_io_bytes_per_second=1_000_000))
        cleaner = Cleaner(task, Throttler(task.io_bytes_per_second, check_interval_s=0))
        result = cleaner.clean()
        io_bytes = result.stats.map_bytes_read + result.stats.bytes_read
        assert result.stats.throttled_s > 0
        assert result.stats.elapsed_secs >= 0.9 * io_bytes / 1_000_000


def test_a_run_reports_only_its_own_throttling_with_a_longer_lived_throttler(
    tmp_path: Path,
) -> None:
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=100_000)) as log:
        write(log, [(_key(n % 10), b"x" * 1000) for n in range(60)])
        log.roll()
        task = plan(log)
        throttler = Throttler(task.io_bytes_per_second)
        throttler.slept_s = 5.0  # what the worker's earlier runs slept
        result = Cleaner(task, throttler).clean()
    assert result.stats.throttled_s == 0


@pytest.mark.usefixtures("python_append_path")  # the C type calls sync_file_range(2) itself
def test_cleaned_segments_are_written_through_to_disk_as_they_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written_back: list[tuple[int, int]] = []
    monkeypatch.setattr(
        writeback,
        "write_back",
        lambda fd, position, length: written_back.append((position, length)),
    )
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=100_000)) as log:
        write(log, [(_key(n), b"x" * 1000) for n in range(60)])
        log.roll()
        clean_once(log)
        cleaned_size = log.segments.first_segment.size
    assert cleaned_size > 0
    covered = 0
    for position, length in written_back:  # the whole file, in order, as it was written
        assert position == covered
        covered += length
    assert covered == cleaned_size


def test_a_cleaned_log_recovers_as_it_was(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    with open_log(directory, compact_config()) as log:
        write(log, [(_key(n % 7), b"v%d" % n) for n in range(80)])
        log.roll()
        clean_fully(log, CLEANER)
        cleaned = read_all(log)
        end = log.log_end_offset
    with open_log(directory, compact_config()) as reopened:
        assert read_all(reopened) == cleaned
        assert reopened.log_end_offset == end


def test_plan_describes_every_segment_below_the_uncleanable_offset(tmp_path: Path) -> None:
    with open_log(
        tmp_path / "t-0", LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    ) as log:
        write(log, [(b"k", b"v%d" % n) for n in range(20)])
        task = plan(log)
        live = log.segments.non_active()
        assert [s.base_offset for s in task.segments] == [s.base_offset for s in live]
        assert [s.size for s in task.segments] == [s.size for s in live]
        assert task.upper_bounds() == [s.base_offset for s in live[1:]] + [
            log.active_segment.base_offset
        ]
        assert task.current_time_ms == NOW_MS


def _index_bytes(segments: Sequence[SegmentSnapshot]) -> list[tuple[int, int]]:
    return [(s.offset_index_bytes, s.time_index_bytes) for s in segments]


def test_plan_takes_index_sizes_from_the_files_without_opening_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_log(tmp_path / "t-0", compact_config()) as log:
        write(log, [(_key(n % 7), b"v%d" % n) for n in range(80)])
        clean_once(log)  # the segments swapped in have their indexes still closed
        with monkeypatch.context() as patched:
            patched.setattr(LazyIndex, "get", lambda index: pytest.fail(f"{index} opened"))
            planned = plan(log).segments
        opened = log.segments.non_active()
        assert _index_bytes(planned) == [
            (s.offset_index.size_in_bytes, s.time_index.size_in_bytes) for s in opened
        ]
        assert any(offset_bytes > 0 for offset_bytes, _ in _index_bytes(planned))


def test_plan_opens_the_indexes_of_recovered_segments_and_missing_index_files(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    with open_log(directory, compact_config()) as log:
        write(log, [(_key(n % 7), b"v%d" % n) for n in range(80)])
        trimmed = _index_bytes(plan(log).segments)
    # Recovered (no clean shutdown): the rebuilt index files stay at full size until closed.
    with open_log(directory, compact_config()) as log:
        assert _index_bytes(plan(log).segments) == trimmed
    with open_log(directory, compact_config(), had_clean_shutdown=True) as log:
        first = log.segments.non_active()[0]
        first.offset_index_path.unlink()
        planned = plan(log).segments[0].offset_index_bytes
        assert planned == first.offset_index.size_in_bytes  # what opening it found
