"""The active segment's append state: the C type (``_segment_append_state.c``) against its
Python twin (``segment_append_state.py``), driven through whole segments.

Two segments, one lending its append state to each implementation, take the same random
appends (several batches at once, timestamps going up, down and standing still; one-call
appends of plain and idempotent producers' batches, each implementation asking its own producer
table, the C type's or the Python twin's), roll checks,
rolls, truncations, flushes, evictions of the index maps from the idle file cache and close and
reopen; after every step they must hold the same facts (size, index entries, counters) and,
byte for byte, the same files. Also under ``make sanitize``.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis_budget import examples

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.record.compression import CompressionType
from odradek.record.record_batch_builder import build_batch
from odradek.storage import segment_append_state
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_validator import validate_and_assign_offsets
from odradek.storage.producer_table import PythonProducerTable
from odradek.storage.segment_append_state import PythonSegmentAppendState
from tests.log_helpers import BASE_TIME_MS, batch
from tests.test_log_segment_append import file_size_limit

native = pytest.importorskip("odradek.storage._segment_append_state")
NativeState = native.SegmentAppendState
NativeProducerTable = pytest.importorskip("odradek.storage._producer_table").ProducerTable
WIDE_OPEN = LogConfig(message_timestamp_before_max_ms=2**62, message_timestamp_after_max_ms=2**62)
IMPLEMENTATIONS = {"c": NativeState, "python": PythonSegmentAppendState}


@contextmanager
def lending(implementation: type) -> Iterator[None]:
    """Segments lend their append state to ``implementation`` meanwhile."""
    chosen = segment_append_state.SegmentAppendState
    segment_append_state.SegmentAppendState = implementation
    try:
        yield
    finally:
        segment_append_state.SegmentAppendState = chosen


def assigned(request: bytes, next_offset: int) -> tuple[bytearray, int, int]:
    result = validate_and_assign_offsets(
        request, next_offset=next_offset, config=WIDE_OPEN, now_ms=BASE_TIME_MS
    )
    return result.records, result.last_offset, result.max_timestamp


def facts(segment: LogSegment) -> dict[str, object]:
    """All an append changes, read as the rest of the broker reads it."""
    offset_index, time_index = segment.offset_index, segment.time_index
    return {
        "size": segment.size,
        "log": segment.log.read(0, segment.size),
        "offset entries": [offset_index.entry(n) for n in range(offset_index.entries)],
        "time entries": [time_index.entry(n) for n in range(time_index.entries)],
        "last entries": (offset_index.last_fields(), time_index.last_fields()),
        "full": (offset_index.is_full, time_index.is_full),
        "bytes since last index entry": segment.bytes_since_last_index_entry,
        "max timestamp": segment.max_timestamp_and_offset_so_far,
        "rolling timestamp": segment.rolling_based_timestamp,
        "lookup": [offset_index.lookup(offset) for offset in (0, 5, 50, 500)],
    }


REQUEST_FAULTS = ("two batches", "producer", "compressed", "bad crc", "keyless", "torn")
IDEMPOTENT_SHAPES = ("next", "next", "next", "retry", "gap", "old epoch", "new epoch")
KNOWN_PRODUCER = 6
"""The producer the tables know (epoch 2); producer 5 of the "producer" shape they do not."""


def produce_request(
    shape: str, count: int, value_size: int, timestamp: int, sequence: int = 0
) -> bytes:
    """A producer's request: one plain batch of no producer, or one ``append_batch`` declines
    (a fault, or a shape the general path takes: several batches, a producer id, compression);
    or (a shape of IDEMPOTENT_SHAPES) a batch of KNOWN_PRODUCER whose next sequence is
    ``sequence``: at it ("next", the only one a producer table lets through), below it, past
    it, or in another epoch."""
    records = [(timestamp + i, b"k", b"v" * value_size, ()) for i in range(count)]
    if shape in IDEMPOTENT_SHAPES:
        epoch = {"old epoch": 1, "new epoch": 3}.get(shape, 2)
        sequence += {"retry": -count, "gap": 2}.get(shape, 0)
        return build_batch(
            records,
            producer_id=KNOWN_PRODUCER,
            producer_epoch=epoch,
            base_sequence=sequence % 2**31,
        )
    if shape == "producer":
        return build_batch(records, producer_id=5, producer_epoch=0, base_sequence=0)
    if shape == "compressed":
        records = [(timestamp + i, b"k", b"v" * value_size, ()) for i in range(count)]
        return build_batch(records, compression=CompressionType.GZIP)
    request = batch(count, timestamp=timestamp, value_size=value_size)
    if shape == "two batches":
        return request + batch(1, timestamp=timestamp, value_size=value_size)
    if shape == "bad crc":
        return request[:-1] + bytes([request[-1] ^ 1])
    if shape == "keyless":  # declined where keys are required (a compacted topic)
        return batch(count, timestamp=timestamp, value_size=value_size, key=None)
    if shape == "torn":
        return request[:-3]
    return request


def files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


class BothImplementations(RuleBasedStateMachine):
    """The same segment operations on a segment of each implementation."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="odradek-append-state-"))
        self.config = LogConfig(
            segment_bytes=8192,
            index_interval_bytes=300,
            segment_index_bytes=4096,
            segment_ms=10_000,
            message_timestamp_before_max_ms=2**62,
            message_timestamp_after_max_ms=2**62,
        )
        self.clock = MockClock(BASE_TIME_MS)
        # Each implementation asks its own table; both know KNOWN_PRODUCER, whose next
        # sequence is self.sequence (from near INT32_MAX, so that it wraps).
        self.producers = {"c": NativeProducerTable(), "python": PythonProducerTable()}
        self.sequence = 2**31 - 40
        for table in self.producers.values():
            table.put(KNOWN_PRODUCER, 2, BASE_TIME_MS, ((self.sequence - 1, 0, 0, BASE_TIME_MS),))
        self.segments: dict[str, LogSegment] = {}
        self.base_offset = 0
        self.next_offset = 0
        self.timestamp = BASE_TIME_MS
        for name in IMPLEMENTATIONS:
            (self.root / name).mkdir()
        self._open_segments(fresh=True)

    def _open_segments(self, *, fresh: bool) -> None:
        for name in IMPLEMENTATIONS:
            segment = LogSegment.open(
                self.root / name,
                self.base_offset,
                self.config,
                self.clock,
                file_already_exists=not fresh,
            )
            segment.roll_jitter_ms = 0
            if not fresh:
                segment.resize_indexes(self.config.segment_index_bytes)  # as the loader does
            self.segments[name] = segment

    def _each(self, action):  # noqa: ANN001, ANN202 - a step on each segment, in its lending
        results = {}
        for name, implementation in IMPLEMENTATIONS.items():
            with lending(implementation):
                results[name] = action(self.segments[name])
        return results

    def _each_with_table(self, action):  # noqa: ANN001, ANN202 - with each its producer table
        results = {}
        for name, implementation in IMPLEMENTATIONS.items():
            with lending(implementation):
                results[name] = action(self.segments[name], self.producers[name])
        return results

    def teardown(self) -> None:
        for segment in self.segments.values():
            segment.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(
        batches=st.lists(
            st.tuples(st.integers(1, 12), st.integers(0, 120), st.integers(-3, 40)),
            min_size=1,
            max_size=12,  # (past the C framing's room on the stack for 8)
        ),
        clock_step=st.integers(0, 6000),
    )
    def append(self, batches: list[tuple[int, int, int]], clock_step: int) -> None:
        """One UnifiedLog append: several batches at once, through the roll check; a roll when it
        says so."""
        requests = bytearray()
        next_offset = self.next_offset
        largest_timestamp = -1
        for count, value_size, timestamp_step in batches:
            self.timestamp = max(BASE_TIME_MS - 5, self.timestamp + timestamp_step)
            records, last_offset, max_timestamp = assigned(
                batch(count, timestamp=self.timestamp, value_size=value_size), next_offset
            )
            requests += records
            next_offset = last_offset + 1
            largest_timestamp = max(largest_timestamp, max_timestamp)
        # UnifiedLog.append declines a request larger than a segment (RecordListTooLargeError)
        # before any roll check: a roll would not make room for it.
        assume(len(requests) <= self.config.segment_bytes)
        self.clock.sleep(clock_step)
        now_ms = self.clock.milliseconds()
        appended = self._each(
            lambda segment: segment.try_append(
                self.config, next_offset - 1, largest_timestamp, requests, now_ms
            )
        )
        assert appended["c"] == appended["python"]
        if not appended["c"]:
            self._roll()
            self._each(lambda segment: segment.append(next_offset - 1, requests))
        self.next_offset = next_offset

    @rule(
        count=st.integers(1, 12),
        value_size=st.integers(0, 120),
        timestamp_step=st.integers(-3, 40),
        clock_step=st.integers(0, 6000),
        shape=st.sampled_from([*["plain"] * 6, *REQUEST_FAULTS, *IDEMPOTENT_SHAPES]),
        with_producers=st.booleans(),
        keys_required=st.booleans(),
        max_message_bytes=st.sampled_from([1_048_588, 1_048_588, 400]),
        timestamp_bounds=st.sampled_from([2**62, 2**62, 1000]),
        log_append_time=st.booleans(),
        leader_epoch=st.sampled_from([0, 0, 7, 2**31]),
    )
    def append_batch(
        self,
        count: int,
        value_size: int,
        timestamp_step: int,
        clock_step: int,
        shape: str,
        with_producers: bool,
        keys_required: bool,
        max_message_bytes: int,
        timestamp_bounds: int,
        log_append_time: bool,
        leader_epoch: int,
    ) -> None:
        """The log's one-call append: a producer's request validated, given its offsets and
        written, or declined with nothing written (the general path then takes it); with the
        producer tables, the next batch of their producer too, noted in them."""
        self.timestamp = max(BASE_TIME_MS - 5, self.timestamp + timestamp_step)
        self.clock.sleep(clock_step)
        request = produce_request(shape, count, value_size, self.timestamp, self.sequence)
        rules = (
            keys_required,
            max_message_bytes,
            timestamp_bounds,
            timestamp_bounds,
            log_append_time,
            self.config.segment_bytes,
            self.config.segment_ms,
        )
        now_ms = self.clock.milliseconds()
        outcomes = self._each_with_table(
            lambda segment, producers: (
                segment.append_state or segment.lend_append_state()
            ).append_batch(
                request,
                rules,
                now_ms,
                self.next_offset,
                leader_epoch,
                self.base_offset,
                LogAppendInfo,
                LogOffsetMetadata,
                producers if with_producers else None,
            )
        )
        assert outcomes["c"] == outcomes["python"]
        rows = {name: table.rows() for name, table in self.producers.items()}
        assert rows["c"] == rows["python"]
        if shape in IDEMPOTENT_SHAPES and (shape != "next" or not with_producers):
            assert outcomes["c"] is None, shape  # only the table's next batch goes this way
        if outcomes["c"] is not None:
            info, end = outcomes["c"]
            if shape == "next":  # noted at the offsets it was given
                assert rows["c"][-1] == (
                    KNOWN_PRODUCER,
                    2,
                    (self.sequence + count - 1) % 2**31,
                    info.last_offset,
                    count - 1,
                    info.max_timestamp,
                )
                self.sequence = (self.sequence + count) % 2**31
            assert type(info) is LogAppendInfo and type(end) is LogOffsetMetadata
            assert info.first_offset == self.next_offset
            assert end == (info.last_offset + 1, self.base_offset, self.segments["c"].size)
            self.next_offset = end.message_offset
        elif shape == "next" and with_producers and self._wraps(count):
            # The general path would take it (a wrap is allowed): so do the tables, as it
            # leaves them, so that the producer goes on past INT32_MAX.
            last_seq = (self.sequence + count - 1) % 2**31
            for table in self.producers.values():
                table.put(KNOWN_PRODUCER, 2, BASE_TIME_MS, ((last_seq, 0, 0, BASE_TIME_MS),))
            self.sequence = (last_seq + 1) % 2**31
        elif (shape == "plain" or (shape == "next" and with_producers)) and (
            leader_epoch < 2**31 and timestamp_bounds == 2**62
        ):
            # A valid request is declined only when the segment must roll first.
            assert not self.segments["c"].append_state.try_append(
                b"",
                self.next_offset + count - 1,
                now_ms if log_append_time else self.timestamp + count - 1,
                now_ms,
                8192 - len(request),
                self.config.segment_ms,
            ) or max_message_bytes < len(request)

    @rule(
        count=st.integers(1, 12),
        value_size=st.integers(0, 120),
        timestamp_step=st.integers(-3, 40),
        clock_step=st.integers(0, 6000),
        shape=st.sampled_from(IDEMPOTENT_SHAPES),
        log_append_time=st.booleans(),
    )
    def idempotent_append_batch(
        self,
        count: int,
        value_size: int,
        timestamp_step: int,
        clock_step: int,
        shape: str,
        log_append_time: bool,
    ) -> None:
        """append_batch with the producer tables and rules every valid batch passes: the
        producer's batches mostly go on where it left off, and are taken unless a roll is due
        or the sequence wraps."""
        self.append_batch(
            count,
            value_size,
            timestamp_step,
            clock_step,
            shape,
            with_producers=True,
            keys_required=False,
            max_message_bytes=1_048_588,
            timestamp_bounds=2**62,
            log_append_time=log_append_time,
            leader_epoch=0,
        )

    def _wraps(self, count: int) -> bool:
        """A batch of ``count`` at the next sequence would pass INT32_MAX, or start at 0 after
        it (the table's rule sends both the general way)."""
        return self.sequence + count - 1 > 2**31 - 1 or self.sequence == 0

    def _roll(self) -> None:
        self._each(lambda segment: segment.on_become_inactive_segment())
        for segment in self.segments.values():
            segment.close()
        self.base_offset = self.next_offset
        self._open_segments(fresh=True)

    @precondition(lambda self: self.next_offset > self.base_offset)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.base_offset, self.next_offset))
        removed = self._each(lambda segment: segment.truncate_to(offset))
        assert removed["c"] == removed["python"]
        if removed["c"] or offset < self.next_offset:
            self.next_offset = min(self.next_offset, offset) if removed["c"] else self.next_offset

    @rule()
    def evict_index_maps(self) -> None:
        """The idle file cache drops the active segment's index maps between appends."""
        self._each(
            lambda segment: [
                index.release_idle() for index in (segment.offset_index, segment.time_index)
            ]
        )

    @rule()
    def flush(self) -> None:
        self._each(lambda segment: segment.flush())

    @rule()
    def close_and_reopen(self) -> None:
        for segment in self.segments.values():
            segment.close()
        self._open_segments(fresh=False)

    @rule()
    def recover(self) -> None:
        truncated = self._each(lambda segment: segment.recover())
        assert truncated["c"] == truncated["python"] == 0
        self._each(lambda segment: segment.resize_indexes(self.config.segment_index_bytes))

    @invariant()
    def same_facts(self) -> None:
        seen = self._each(facts)
        assert seen["c"] == seen["python"]

    @invariant()
    def same_files_when_both_close(self) -> None:
        """The files, byte for byte (the indexes' preallocated tails included)."""
        assert files(self.root / "c") == files(self.root / "python")


TestBothImplementations = BothImplementations.TestCase
TestBothImplementations.settings = settings(
    max_examples=examples(20),
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- the boundary --------------------------------------------------------------------------


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def implementation(request: pytest.FixtureRequest) -> type:
    return IMPLEMENTATIONS[request.param]


def open_segment(directory: Path, implementation: type) -> LogSegment:
    segment = LogSegment.open(directory, 0, LogConfig(index_interval_bytes=0), MockClock(0))
    with lending(implementation):
        records, last_offset, _ = assigned(batch(3), 0)
        segment.append(last_offset, records)
        records, last_offset, _ = assigned(batch(3), last_offset + 1)
        segment.append(last_offset, records)
    return segment


def test_the_index_maps_are_given_back_before_a_resize_or_close(
    tmp_path: Path, implementation: type
) -> None:
    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    assert type(state) is implementation
    with pytest.raises(RuntimeError, match="append state"):
        segment.offset_index.truncate()  # the entries are the state's while it is lent
    with pytest.raises(BufferError):
        segment.offset_index._unmap()  # its buffer pins the map
    segment.resize_indexes(4096)  # takes the state back first
    assert state.released and segment.append_state is None
    assert segment.offset_index.entries == 1
    segment.close()


def test_a_released_state_takes_no_appends_and_still_answers(tmp_path: Path, implementation):
    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    size = state.size
    segment.close()
    assert state.released and state.size == size
    with pytest.raises(ValueError, match="released"):
        state.append(b"")
    with pytest.raises(ValueError, match="released"):
        state.try_append(b"", 0, 0, 0, 1 << 30, 1 << 30)


RULES = (False, 1_048_588, 2**62, 2**62, False, 1 << 30, 1 << 40)  # (see append_rules)


def append_batch(state: object, request: bytes, rules: tuple = RULES, **kwargs: object) -> object:
    arguments = {"now_ms": BASE_TIME_MS, "next_offset": 6, "leader_epoch": 0}
    arguments.update(kwargs)
    return state.append_batch(  # type: ignore[attr-defined]
        request,
        rules,
        arguments["now_ms"],
        arguments["next_offset"],
        arguments["leader_epoch"],
        0,
        LogAppendInfo,
        LogOffsetMetadata,
        arguments.get("producers"),
    )


def test_a_declined_request_writes_nothing(tmp_path: Path, implementation: type) -> None:
    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    size = state.size
    for shape in REQUEST_FAULTS:
        request = produce_request(shape, 2, 10, BASE_TIME_MS)
        assert append_batch(state, request, (True, *RULES[1:])) is None, shape
    request = batch(2)
    assert append_batch(state, request, leader_epoch=2**31) is None
    assert append_batch(state, request, next_offset=2**63 - 1) is None  # its last offset: past
    assert append_batch(state, request, (False, 10, *RULES[2:])) is None  # max.message.bytes
    assert append_batch(state, request, (*RULES[:5], size + len(request) - 1, 1 << 40)) is None
    assert state.size == size == os.path.getsize(segment.log.path)
    info, end = append_batch(state, request, (*RULES[:5], size + len(request), 1 << 40))
    assert (info.first_offset, info.last_offset, info.record_count, info.valid_bytes) == (
        6,
        7,
        2,
        len(request),
    )
    assert end == (8, 0, size + len(request)) == (end.message_offset, 0, state.size)
    segment.close()
    with pytest.raises(ValueError, match="released"):
        append_batch(state, request)


def test_append_batch_reads_the_system_clock_when_given_no_time(
    tmp_path: Path, implementation: type
) -> None:
    segment = open_segment(tmp_path, implementation)
    log_append_time = (*RULES[:4], True, *RULES[5:])
    before = time.time_ns() // 1_000_000
    info, _ = append_batch(segment.append_state, batch(2), log_append_time, now_ms=None)
    assert before <= info.log_append_time_ms == info.max_timestamp <= time.time_ns() // 1_000_000
    segment.close()


def test_append_batch_checks_its_arguments(tmp_path: Path) -> None:
    segment = open_segment(tmp_path, NativeState)
    state = segment.append_state
    with pytest.raises(TypeError, match="7-tuple"):
        append_batch(state, batch(1), RULES[:6])
    with pytest.raises(TypeError):
        append_batch(state, batch(1), (*RULES[:6], "1"))
    with pytest.raises(TypeError):
        state.append_batch(batch(1), RULES, None, 6, 0, 0, LogAppendInfo, dict, None)
    with pytest.raises(TypeError, match="9 arguments"):
        state.append_batch(batch(1), RULES, None, 6, 0, 0, LogAppendInfo, LogOffsetMetadata)
    segment.close()


def test_records_that_do_not_frame_are_refused_before_any_write(
    tmp_path: Path, implementation: type
) -> None:
    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    size = state.size
    records, _, _ = assigned(batch(2), 6)
    for broken in (records[:-1], records + b"\x00" * 10, bytes(records[:8]) + b"\xff" * 60):
        with pytest.raises(ValueError, match="do not frame"):
            state.append(broken)
    assert state.size == size == os.path.getsize(segment.log.path)
    segment.close()


def test_a_write_cut_short_by_the_kernel_is_cut_back_and_raises_its_errno(
    tmp_path: Path, implementation: type
) -> None:
    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    before = facts(segment)
    records, _, _ = assigned(batch(20, value_size=200), 6)
    with file_size_limit(state.size + len(records) // 2):
        with pytest.raises(OSError) as raised:
            state.append(records)
    assert raised.value.errno == errno.EFBIG
    assert facts(segment) == before
    assert os.path.getsize(segment.log.path) == state.size
    segment.close()


def test_both_write_large_appends_in_pieces_and_through(tmp_path: Path, implementation):
    segment = LogSegment.open(tmp_path, 0, LogConfig(), MockClock(0))
    records, last_offset, _ = assigned(batch(40, value_size=20_000), 0)
    assert len(records) > 3 * 256 * 1024
    with lending(implementation):
        segment.append(last_offset, records, write_through=True)
        segment.append(last_offset + 40, assigned(batch(40, value_size=20_000), 40)[0])
    assert segment.log.read(0, len(records)) == bytes(records)
    assert segment.size == 2 * len(records)
    segment.close()


class ObservingTable:
    """A producer table that answers ``goes_on`` and records what it was asked and when."""

    def __init__(self, goes_on: bool, segment: LogSegment) -> None:
        self.goes_on = goes_on
        self.segment = segment
        self.calls: list[tuple[str, object]] = []

    def try_next(self, records: bytes) -> bool:
        self.calls.append(("try_next", (bytes(records), self.segment.append_state.size)))
        return self.goes_on

    def commit_next(self) -> None:
        self.calls.append(("commit_next", self.segment.append_state.size))


def producer_batch(sequence: int = 0, epoch: int = 2, producer_id: int = 6) -> bytes:
    """Two records of ``producer_id`` in ``epoch`` from ``sequence``."""
    records = [(BASE_TIME_MS, b"k", b"v", ()), (BASE_TIME_MS + 1, b"k", b"w", ())]
    return build_batch(
        records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


def test_a_producer_batch_is_asked_of_the_table_with_its_offsets_before_the_write(
    tmp_path: Path, implementation: type
) -> None:
    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    size = state.size
    request = producer_batch()
    assert append_batch(state, request) is None  # no table: the general path's
    declining = ObservingTable(False, segment)
    assert append_batch(state, request, producers=declining) is None
    written, _, _ = assigned(request, 6)  # what the general path would hand the table
    assert declining.calls == [("try_next", (bytes(written), size))]
    assert state.size == size == os.path.getsize(segment.log.path)
    # A roll due or a fault: declined before the table is asked.
    asked_nothing = ObservingTable(True, segment)
    assert append_batch(state, request, (False, 10, *RULES[2:]), producers=asked_nothing) is None
    assert append_batch(state, request[:-1], producers=asked_nothing) is None
    too_large = (*RULES[:5], size + len(request) - 1, 1 << 40)
    assert append_batch(state, request, too_large, producers=asked_nothing) is None
    assert asked_nothing.calls == [] and state.size == size
    accepting = ObservingTable(True, segment)
    info, end = append_batch(state, request, producers=accepting)
    assert accepting.calls == [
        ("try_next", (bytes(written), size)),
        ("commit_next", size + len(request)),  # told once written
    ]
    assert (info.first_offset, info.last_offset, end.message_offset) == (6, 7, 8)
    assert segment.log.read(size, len(request)) == bytes(written)
    # A batch of no producer is not the table's business.
    append_batch(state, batch(1), next_offset=8, producers=ObservingTable(False, segment))
    assert state.size == size + len(request) + len(batch(1))
    segment.close()


@pytest.mark.parametrize("table_type", [NativeProducerTable, PythonProducerTable])
def test_a_producer_table_lets_through_its_next_batch_only(
    tmp_path: Path, implementation: type, table_type: type
) -> None:
    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    table = table_type()
    table.put(6, 2, BASE_TIME_MS, ((9, 3, 0, BASE_TIME_MS),))
    table.put(7, 0, BASE_TIME_MS, ((2**31 - 2, 4, 0, BASE_TIME_MS),))
    rows = table.rows()
    size = state.size
    for declined in (
        producer_batch(9),  # a retry
        producer_batch(11),  # a gap
        producer_batch(10, epoch=1),  # an old epoch
        producer_batch(10, epoch=3),  # a new epoch
        producer_batch(0, producer_id=8),  # a new producer
        producer_batch(2**31 - 1, epoch=0, producer_id=7),  # its last sequence past INT32_MAX
    ):
        assert append_batch(state, declined, producers=table) is None
    assert state.size == size and table.rows() == rows
    info, _ = append_batch(state, producer_batch(10), producers=table)
    assert table.rows() == [
        (6, 2, 9, 3, 0, BASE_TIME_MS),
        (6, 2, 11, info.last_offset, 1, BASE_TIME_MS + 1),
        (7, 0, 2**31 - 2, 4, 0, BASE_TIME_MS),
    ]
    with pytest.raises(ValueError, match="no batch noted"):
        table.commit_next()  # the append committed what it noted
    segment.close()


def test_an_error_from_the_table_writes_nothing(tmp_path: Path, implementation: type) -> None:
    class Broken:
        def try_next(self, records: bytes) -> bool:
            raise OverflowError("broken table")

    segment = open_segment(tmp_path, implementation)
    state = segment.append_state
    size = state.size
    with pytest.raises(OverflowError, match="broken table"):
        append_batch(state, producer_batch(), producers=Broken())
    assert state.size == size == os.path.getsize(segment.log.path)
    segment.close()
