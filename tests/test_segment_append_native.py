"""LogSegment.try_append, the Log's append path, in C (_segment_append.c) against its Python
steps (should_roll, then append): the same appends are refused for a roll or leave the same
files, index entries and counters, and a write the kernel cuts short leaves nothing behind."""

from __future__ import annotations

import errno
import os
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.record.record_batch import NO_TIMESTAMP
from odradek.storage import log_segment
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_validator import validate_and_assign_offsets
from tests.log_helpers import BASE_TIME_MS, batch

WIDE_OPEN = LogConfig(message_timestamp_before_max_ms=2**62, message_timestamp_after_max_ms=2**62)


def test_the_c_append_is_built() -> None:
    """Without it every append runs LogSegment's Python steps (docs/native.md)."""
    assert log_segment._segment_append is not None


@contextmanager
def python_path() -> Iterator[None]:
    native = log_segment._segment_append
    log_segment._segment_append = None
    try:
        yield
    finally:
        log_segment._segment_append = native


def assigned(request: bytes, next_offset: int) -> tuple[bytearray, int, int]:
    """The request as the Log writes it: offsets from ``next_offset``; and its last offset and
    max timestamp."""
    result = validate_and_assign_offsets(
        request, next_offset=next_offset, config=WIDE_OPEN, now_ms=BASE_TIME_MS
    )
    return result.records, result.last_offset, result.max_timestamp


def request_of(shapes: list[tuple[int, int, int]]) -> bytes:
    """Batches of (records, value size, timestamp step from the base time) back to back."""
    return b"".join(
        batch(count, value_size=size, timestamp=BASE_TIME_MS + step) for count, size, step in shapes
    )


def state(segment: LogSegment) -> dict[str, object]:
    """All an append changes: the files' bytes in use, the index entries and the counters."""
    offset_index, time_index = segment.offset_index, segment.time_index
    return {
        "log": segment.log.read(0, segment.size),
        "offset entries": [offset_index.entry(n) for n in range(offset_index.entries)],
        "time entries": [time_index.entry(n) for n in range(time_index.entries)],
        "cached last entries": (offset_index._last, time_index._last),
        "bytes since last index entry": segment._bytes_since_last_index_entry,
        "max timestamp": segment.max_timestamp_and_offset_so_far,
        "rolling timestamp": segment._rolling_based_timestamp,
    }


def take_step(segment: LogSegment, step: tuple, next_offset: int, config: LogConfig) -> str:
    """Do ``step`` to ``segment``; what it returned or raised, as text to compare."""
    kind = step[0]
    if kind == "forget last entries":  # as after a reopen: the C path declines once
        segment.offset_index._last = segment.time_index._last = None
        return "forgotten"
    try:
        if kind == "append":
            _, shapes, offset_gap, waited_ms = step
            records, last_offset, max_timestamp = assigned(
                request_of(shapes), next_offset + offset_gap
            )
            now_ms = BASE_TIME_MS + waited_ms
            return repr(segment.try_append(config, last_offset, max_timestamp, records, now_ms))
        return repr(segment.truncate_to(step[1]))
    except Exception as error:  # noqa: BLE001 - the two paths must fail alike
        message = str(error).replace("/native/", "/").replace("/python/", "/")
        return f"{type(error).__name__}: {message}"


request_shapes = st.lists(
    st.tuples(
        st.integers(1, 6),  # records
        st.integers(0, 300),  # value size
        st.integers(-50, 400),  # timestamp step: may go back; past segment.ms (300) rolls
    ),
    min_size=1,
    max_size=3,
)
appends = st.tuples(
    st.just("append"),
    request_shapes,
    st.sampled_from([0, 0, 0, 2**31 - 20]),  # offset gap: past the segment's int32 range
    st.integers(0, 400),  # ms since the base time: rolls a segment without timestamps
)
steps = st.lists(
    st.one_of(
        appends,
        appends,  # appends are most of what a segment sees
        appends,
        st.tuples(st.just("forget last entries"), st.none()),
        st.tuples(st.just("truncate"), st.integers(0, 40)),
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=steps,
    index_interval_bytes=st.sampled_from([0, 200, 700, 4096]),
    index_entries=st.sampled_from([2, 5, 64]),
)
def test_both_paths_leave_the_same_segment(
    tmp_path: Path, steps: list[tuple], index_interval_bytes: int, index_entries: int
) -> None:
    config = LogConfig(
        index_interval_bytes=index_interval_bytes,
        segment_index_bytes=12 * index_entries,
        segment_bytes=4000,
        segment_ms=300,
    )
    clock = MockClock(BASE_TIME_MS)
    run = len(list(tmp_path.iterdir()))
    segments = {}
    for name in ("native", "python"):
        directory = tmp_path / str(run) / name
        directory.mkdir(parents=True)
        segments[name] = LogSegment.open(directory, 0, config, clock)
    next_offset = 0
    for step in steps:
        with python_path():
            python = take_step(segments["python"], step, next_offset, config)
        native = take_step(segments["native"], step, next_offset, config)
        assert native == python, step
        assert state(segments["native"]) == state(segments["python"]), step
        next_offsets = {segment.read_next_offset() for segment in segments.values()}
        assert len(next_offsets) == 1
        next_offset = next_offsets.pop()
    for segment in segments.values():
        segment.close()


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


@pytest.fixture(params=["native", "python"])
def either_path(request: pytest.FixtureRequest) -> Iterator[str]:
    with python_path() if request.param == "python" else nullcontext():
        yield request.param


def test_an_index_entry_needs_more_than_the_interval(tmp_path: Path, either_path: str) -> None:
    """SPEC 5: an entry once *more than* index.interval.bytes were written since the last."""
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


def test_a_roll_at_the_segment_size_edge(tmp_path: Path, either_path: str) -> None:
    segment, next_offset = filled_segment(tmp_path, LogConfig(), 2)
    fitting = segment.size + len(assigned(batch(1), next_offset)[0])
    assert not appended(segment, LogConfig(segment_bytes=fitting - 1), next_offset)
    assert appended(segment, LogConfig(segment_bytes=fitting), next_offset)


def test_a_roll_at_the_segment_age_edge(tmp_path: Path, either_path: str) -> None:
    """SPEC 4, as Kafka's timeWaitedForRoll: the age is the incoming batch's max timestamp less
    the first batch's; the clock does not enter into it."""
    config = LogConfig(segment_ms=500)
    segment, next_offset = filled_segment(tmp_path, config, 2)
    first_batch_max_timestamp = segment._rolling_based_timestamp
    assert first_batch_max_timestamp == BASE_TIME_MS + 2  # batch(3): timestamps base..base+2
    edge = first_batch_max_timestamp + config.segment_ms
    late = edge + 10 * config.segment_ms
    assert not appended(segment, config, next_offset, timestamp=edge + 1, now_ms=edge)
    assert appended(segment, config, next_offset, timestamp=edge, now_ms=late)


def test_records_of_long_ago_roll_no_segment_by_age(tmp_path: Path, either_path: str) -> None:
    """A producer replaying old records (a backfill, a mirror): measured by the clock, every
    append would find the segment past segment.ms and roll."""
    config = LogConfig(segment_ms=500)
    segment, next_offset = filled_segment(tmp_path, config, 1)
    now = BASE_TIME_MS + 1000 * config.segment_ms
    for _ in range(5):
        assert appended(segment, config, next_offset, timestamp=BASE_TIME_MS + 3, now_ms=now)
        next_offset += 1


def test_a_segment_without_timestamps_ages_by_the_clock(tmp_path: Path, either_path: str) -> None:
    """A first batch without a timestamp (-1): the age runs from the segment's creation."""
    config = LogConfig(segment_ms=500)
    segment = LogSegment.open(tmp_path, 0, config, MockClock(BASE_TIME_MS))
    records, last_offset, _ = assigned(batch(1, timestamp=NO_TIMESTAMP), 0)
    segment.append(last_offset, records)
    edge = BASE_TIME_MS + config.segment_ms
    assert not appended(segment, config, 1, timestamp=NO_TIMESTAMP, now_ms=edge + 1)
    assert appended(segment, config, 1, timestamp=NO_TIMESTAMP, now_ms=edge)


def test_a_roll_at_the_segment_age_edge_less_the_jitter(
    tmp_path: Path, either_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC 4: the age edge is segment.ms - the segment's jitter, drawn in [0,
    segment.jitter.ms) when it is opened; pinned here, as a draw of 0 would show nothing."""
    bounds: list[int] = []

    def draw(bound: int) -> int:
        bounds.append(bound)
        return 600

    monkeypatch.setattr(log_segment.random, "randrange", draw)
    config = LogConfig(segment_ms=1000, segment_jitter_ms=900)
    segment, next_offset = filled_segment(tmp_path, config, 2)
    assert bounds == [900] and segment.roll_jitter_ms == 600
    edge = segment._rolling_based_timestamp + config.segment_ms - segment.roll_jitter_ms
    assert not appended(segment, config, next_offset, timestamp=edge + 1)
    assert appended(segment, config, next_offset, timestamp=edge)


def test_a_roll_when_an_index_is_full(tmp_path: Path, either_path: str) -> None:
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


def test_a_roll_when_offsets_outgrow_the_segment(tmp_path: Path, either_path: str) -> None:
    config = LogConfig()
    segment, _ = filled_segment(tmp_path, config, 1)
    assert not appended(segment, config, 2**31)  # one record: last offset 2**31
    assert appended(segment, config, 2**31 - 1)


def test_the_common_case_never_reaches_the_python_steps(tmp_path: Path, monkeypatch) -> None:
    """A change to the segment's attributes that made the C path decline every time would
    leave every test green and every append slower; this one would fail."""
    segment, next_offset = filled_segment(tmp_path, LogConfig(index_interval_bytes=100), 1)

    def python_step(*args: object, **kwargs: object) -> None:
        raise AssertionError("the C path declined the common case")

    monkeypatch.setattr(LogSegment, "should_roll", python_step)
    monkeypatch.setattr(LogSegment, "append", python_step)
    for step in range(20):  # rising timestamps: entries in both indexes
        request = batch(3, value_size=100, timestamp=BASE_TIME_MS + step)
        records, last_offset, max_timestamp = assigned(request, next_offset)
        assert segment.try_append(LogConfig(), last_offset, max_timestamp, records, BASE_TIME_MS)
        next_offset = last_offset + 1
    assert segment.offset_index.entries > 10 and segment.time_index.entries > 10
