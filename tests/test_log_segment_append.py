"""LogSegment.try_append, the UnifiedLog's append: the edges of each roll condition and of
index.interval.bytes, and a write the kernel cuts short leaves nothing behind."""

from __future__ import annotations

import errno
import os
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.record.record_batch import NO_TIMESTAMP
from odradek.storage import log_segment
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_validator import validate_and_assign_offsets
from tests.log_helpers import BASE_TIME_MS, batch

WIDE_OPEN = LogConfig(message_timestamp_before_max_ms=2**62, message_timestamp_after_max_ms=2**62)


def assigned(request: bytes, next_offset: int) -> tuple[bytearray, int, int]:
    """The request as UnifiedLog writes it: offsets from ``next_offset``; and its last offset and
    max timestamp."""
    result = validate_and_assign_offsets(
        request, next_offset=next_offset, config=WIDE_OPEN, now_ms=BASE_TIME_MS
    )
    return result.records, result.last_offset, result.max_timestamp


def state(segment: LogSegment) -> dict[str, object]:
    """All an append changes: the files' bytes in use, the index entries and the counters."""
    offset_index, time_index = segment.offset_index, segment.time_index
    return {
        "log": segment.log.read(0, segment.size),
        "offset entries": [offset_index.entry(n) for n in range(offset_index.entries)],
        "time entries": [time_index.entry(n) for n in range(time_index.entries)],
        "cached last entries": (offset_index._last, time_index._last),
        "bytes since last index entry": segment.bytes_since_last_index_entry,
        "max timestamp": segment.max_timestamp_and_offset_so_far,
        "rolling timestamp": segment.rolling_based_timestamp,
    }


def filled_segment(directory: Path, config: LogConfig, appends: int) -> tuple[LogSegment, int]:
    segment = LogSegment.open(directory, 0, config, MockClock(BASE_TIME_MS))
    next_offset = 0
    for _ in range(appends):
        records, last_offset, _ = assigned(batch(3, value_size=100), next_offset)
        segment.append(last_offset, records)
        next_offset = last_offset + 1
    return segment, next_offset


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past ``limit`` bytes of any file fail with EFBIG (cut short first), as a full
    disk fails them: a real failure of the kernel's write, not a faked one."""
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, previous_limit[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous_limit)
        signal.signal(signal.SIGXFSZ, previous_handler)


def test_a_write_cut_short_by_the_kernel_leaves_nothing_behind(tmp_path: Path) -> None:
    segment, next_offset = filled_segment(tmp_path, LogConfig(index_interval_bytes=0), 3)
    before = state(segment)
    records, last_offset, max_timestamp = assigned(batch(20, value_size=200), next_offset)
    with file_size_limit(segment.size + len(records) // 2):
        with pytest.raises(OSError) as failure:
            segment.try_append(LogConfig(), last_offset, max_timestamp, records, BASE_TIME_MS)
    assert failure.value.errno == errno.EFBIG
    assert state(segment) == before
    assert os.path.getsize(segment.log.path) == segment.size
    # the same offsets, now that there is room
    assert segment.try_append(LogConfig(), last_offset, max_timestamp, records, BASE_TIME_MS)
    assert segment.read_next_offset() == last_offset + 1
    assert segment.offset_index.lookup(last_offset).position == before["log"].__len__()


def test_an_index_entry_needs_more_than_the_interval(tmp_path: Path) -> None:
    """design §5: an entry once *more than* index.interval.bytes were written since the last."""
    one, _, _ = assigned(batch(2, value_size=30), 0)
    segment, _ = filled_segment(tmp_path, LogConfig(index_interval_bytes=len(one)), 0)
    next_offset = 0
    for _ in range(6):
        records, last_offset, max_timestamp = assigned(batch(2, value_size=30), next_offset)
        assert segment.try_append(LogConfig(), last_offset, max_timestamp, records, BASE_TIME_MS)
        next_offset = last_offset + 1
    # bytes since the last entry after batches 1..6: one, 2*one (> interval: entry at batch 3),
    # then one, 2*one (entry at batch 5), one
    index = segment.offset_index
    positions = [index.entry(n).position for n in range(index.entries)]
    assert positions == [2 * len(one), 4 * len(one)]


def appended(
    segment: LogSegment,
    config: LogConfig,
    next_offset: int,
    timestamp: int = BASE_TIME_MS,
    now_ms: int = BASE_TIME_MS,
) -> bool:
    """try_append at ``now_ms`` of a one-record batch with offset ``next_offset`` and
    ``timestamp``; checks that the segment grew by it exactly when it says so."""
    records, last_offset, max_timestamp = assigned(batch(1, timestamp=timestamp), next_offset)
    before = segment.size
    result = segment.try_append(config, last_offset, max_timestamp, records, now_ms)
    assert segment.size == before + (len(records) if result else 0)
    return result


def test_a_roll_at_the_segment_size_edge(tmp_path: Path) -> None:
    segment, next_offset = filled_segment(tmp_path, LogConfig(), 2)
    fitting = segment.size + len(assigned(batch(1), next_offset)[0])
    assert not appended(segment, LogConfig(segment_bytes=fitting - 1), next_offset)
    assert appended(segment, LogConfig(segment_bytes=fitting), next_offset)


def test_a_roll_at_the_segment_age_edge(tmp_path: Path) -> None:
    """design §4, as Kafka's timeWaitedForRoll: the age is the incoming batch's max timestamp less
    the first batch's; the clock does not enter into it."""
    config = LogConfig(segment_ms=500)
    segment, next_offset = filled_segment(tmp_path, config, 2)
    first_batch_max_timestamp = segment.rolling_based_timestamp
    assert first_batch_max_timestamp == BASE_TIME_MS + 2  # batch(3): timestamps base..base+2
    edge = first_batch_max_timestamp + config.segment_ms
    late = edge + 10 * config.segment_ms
    assert not appended(segment, config, next_offset, timestamp=edge + 1, now_ms=edge)
    assert appended(segment, config, next_offset, timestamp=edge, now_ms=late)


def test_records_of_long_ago_roll_no_segment_by_age(tmp_path: Path) -> None:
    """A producer replaying old records (a backfill, a mirror): measured by the clock, every
    append would find the segment past segment.ms and roll."""
    config = LogConfig(segment_ms=500)
    segment, next_offset = filled_segment(tmp_path, config, 1)
    now = BASE_TIME_MS + 1000 * config.segment_ms
    for _ in range(5):
        assert appended(segment, config, next_offset, timestamp=BASE_TIME_MS + 3, now_ms=now)
        next_offset += 1


def test_a_segment_without_timestamps_ages_by_the_clock(tmp_path: Path) -> None:
    """A first batch without a timestamp (-1): the age runs from the segment's creation."""
    config = LogConfig(segment_ms=500)
    segment = LogSegment.open(tmp_path, 0, config, MockClock(BASE_TIME_MS))
    records, last_offset, _ = assigned(batch(1, timestamp=NO_TIMESTAMP), 0)
    segment.append(last_offset, records)
    edge = BASE_TIME_MS + config.segment_ms
    assert not appended(segment, config, 1, timestamp=NO_TIMESTAMP, now_ms=edge + 1)
    assert appended(segment, config, 1, timestamp=NO_TIMESTAMP, now_ms=edge)


def test_a_roll_at_the_segment_age_edge_less_the_jitter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """design §4: the age edge is segment.ms - the segment's jitter, drawn in [0,
    segment.jitter.ms) when it is opened; pinned here, as a draw of 0 would show nothing."""
    bounds: list[int] = []

    def draw(bound: int) -> int:
        bounds.append(bound)
        return 600

    monkeypatch.setattr(log_segment.random, "randrange", draw)
    config = LogConfig(segment_ms=1000, segment_jitter_ms=900)
    segment, next_offset = filled_segment(tmp_path, config, 2)
    assert bounds == [900] and segment.roll_jitter_ms == 600
    edge = segment.rolling_based_timestamp + config.segment_ms - segment.roll_jitter_ms
    assert not appended(segment, config, next_offset, timestamp=edge + 1)
    assert appended(segment, config, next_offset, timestamp=edge)


def test_a_roll_when_an_index_is_full(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=0, segment_index_bytes=12 * 4)  # 4 and 6 entries
    segment, next_offset = filled_segment(tmp_path, config, 0)
    for step in range(4):  # rising timestamps: every append after the first adds to both
        request = batch(3, value_size=100, timestamp=BASE_TIME_MS + 10 * step)
        records, last_offset, max_timestamp = assigned(request, next_offset)
        assert segment.try_append(config, last_offset, max_timestamp, records, BASE_TIME_MS)
        next_offset = last_offset + 1
    # the time index keeps its last slot for the roll's entry: full at 3 of 4
    assert segment.time_index.entries == 3 and segment.time_index.is_full
    assert not segment.offset_index.is_full
    assert not appended(segment, config, next_offset)


def test_a_roll_when_offsets_outgrow_the_segment(tmp_path: Path) -> None:
    config = LogConfig()
    segment, _ = filled_segment(tmp_path, config, 1)
    assert not appended(segment, config, 2**31)  # one record: last offset 2**31
    assert appended(segment, config, 2**31 - 1)


def time_entries(segment: LogSegment) -> list[tuple[int, int]]:
    index = segment.time_index
    return [(entry.timestamp, entry.offset) for entry in map(index.entry, range(index.entries))]


def test_the_time_index_takes_the_max_timestamp_at_each_entry_only_when_it_grew(
    tmp_path: Path,
) -> None:
    """An index entry due while the segment's max timestamp stands still (appends within one
    millisecond) adds nothing to the time index; one after it grew adds it, after a
    truncation too; and the entries are those recovery rebuilds from the same bytes."""
    config = LogConfig(index_interval_bytes=0)  # an entry at every batch but the first
    segment = LogSegment.open(tmp_path, 0, config, MockClock(BASE_TIME_MS))
    t = BASE_TIME_MS
    for offset, timestamp in enumerate([t, t, t, t + 5, t + 5, t + 7]):
        assert appended(segment, config, offset, timestamp=timestamp)
    assert time_entries(segment) == [(t, 0), (t + 5, 3), (t + 7, 5)]
    appended_entries = time_entries(segment)
    segment.recover()
    assert time_entries(segment) == appended_entries
    segment.resize_indexes(config.segment_index_bytes)

    segment.truncate_to(4)
    assert time_entries(segment) == [(t, 0), (t + 5, 3)]
    for offset, timestamp in ((4, t + 5), (5, t + 5), (6, t + 6), (7, t + 6)):
        assert appended(segment, config, offset, timestamp=timestamp)
    assert time_entries(segment) == [(t, 0), (t + 5, 3), (t + 6, 6)]


def test_a_time_index_without_room_does_not_fail_the_close(tmp_path: Path) -> None:
    """A time index whose file got no space (the process ran out of descriptors at the roll)
    cannot take the final entry at close; the segment still closes, its records whole."""
    segment = LogSegment.open(tmp_path, 0, LogConfig(), MockClock(BASE_TIME_MS))
    records, last_offset, _ = assigned(batch(3, value_size=100), 0)
    segment.append(last_offset, records)
    segment.time_index.resize(0)
    assert segment.time_index.is_full
    segment.close()
    assert (tmp_path / "00000000000000000000.log").read_bytes() == bytes(records)
