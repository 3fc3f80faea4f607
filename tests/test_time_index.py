"""TimeIndex: format, append rules, lookups, truncation, reopening, corruption, threads."""

from __future__ import annotations

import bisect
import os
import re
import struct
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis_budget import examples

from odradek.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from odradek.record.record_batch import NO_TIMESTAMP
from odradek.storage.time_index import TimeIndex, TimestampOffset

BASE = 100
ENTRY = 12
EMPTY = TimestampOffset(NO_TIMESTAMP, BASE)


def open_index(path: Path, max_entries: int = 16, base: int = BASE) -> TimeIndex:
    return TimeIndex(path, base, max_entries * ENTRY)


def filled(path: Path, entries: list[tuple[int, int]], max_entries: int = 16) -> TimeIndex:
    index = open_index(path, max_entries)
    for timestamp, offset in entries:
        index.maybe_append(timestamp, offset)
    return index


def entries_of(index: TimeIndex) -> list[tuple[int, int]]:
    return [(entry.timestamp, entry.offset) for entry in map(index.entry, range(index.entries))]


def write_entries(path: Path, entries: list[tuple[int, int]], padding: bytes = b"") -> None:
    path.write_bytes(b"".join(struct.pack(">qi", *entry) for entry in entries) + padding)


def naming(path: Path, fault: str) -> str:
    """A pattern for an error message that names ``path`` and then ``fault``."""
    return rf"{re.escape(str(path))}.*{fault}"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000100.timeindex"


SAMPLE = [(1000, 105), (2000, 110), (3000, 120)]


def test_new_index_is_preallocated_to_whole_entries(path: Path) -> None:
    assert TimeIndex.entry_size == ENTRY
    index = TimeIndex(path, BASE, 10 * ENTRY + 11)
    assert path.stat().st_size == index.length == 10 * ENTRY
    assert (index.entries, index.max_entries, index.last_entry) == (0, 10, EMPTY)


def test_entries_are_written_in_kafka_format(path: Path) -> None:
    index = open_index(path)
    index.maybe_append(1_700_000_000_000, 105)
    index.flush()
    assert path.read_bytes()[:ENTRY] == struct.pack(">qi", 1_700_000_000_000, 5)


def test_round_trip(path: Path) -> None:
    index = filled(path, SAMPLE)
    assert entries_of(index) == SAMPLE
    assert index.last_entry == TimestampOffset(3000, 120)
    with pytest.raises(IndexError):
        index.entry(3)


def test_only_a_larger_timestamp_is_appended(path: Path) -> None:
    index = filled(path, [(1000, 105)])
    index.maybe_append(1000, 105)  # a roll or close repeating the last entry
    index.maybe_append(1000, 107)
    index.maybe_append(1500, 105)  # same offset, later timestamp: kept, as Kafka does
    assert entries_of(index) == [(1000, 105), (1500, 105)]


def test_no_timestamp_is_never_appended(path: Path) -> None:
    index = open_index(path)
    index.maybe_append(NO_TIMESTAMP, 105)
    assert index.entries == 0
    index.maybe_append(0, 105)
    assert index.last_entry == TimestampOffset(0, 105)


@pytest.mark.parametrize("timestamp", [2000, 1000], ids=["later", "the last one"])
def test_an_offset_going_backwards_is_refused(path: Path, timestamp: int) -> None:
    index = filled(path, [(1000, 105)])
    with pytest.raises(InvalidOffsetError, match=naming(path, "below the last offset 105")):
        index.maybe_append(timestamp, 104)
    assert index.entries == 1


def test_a_timestamp_going_backwards_is_refused(path: Path) -> None:
    index = filled(path, [(1000, 105)])
    with pytest.raises(ValueError, match=naming(path, "below the last timestamp 1000")):
        index.maybe_append(999, 106)
    assert index.entries == 1


def test_is_full_keeps_the_last_slot_for_the_roll(path: Path) -> None:
    index = filled(path, [(1000, 100), (2000, 101)], max_entries=3)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(3000, 102)
    index.maybe_append(2000, 101)  # adds nothing, so a full index does not refuse it
    index.maybe_append(3000, 102, skip_full_check=True)
    assert index.entries == index.max_entries == 3
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(4000, 103, skip_full_check=True)
    assert index.last_entry == TimestampOffset(3000, 102)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (-5, EMPTY),
        (999, EMPTY),  # before the first entry
        (1000, TimestampOffset(1000, 105)),  # exactly the first
        (1999, TimestampOffset(1000, 105)),  # between
        (2000, TimestampOffset(2000, 110)),
        (3000, TimestampOffset(3000, 120)),  # exactly the last
        (2**62, TimestampOffset(3000, 120)),  # after the last
    ],
)
def test_lookup_finds_the_last_entry_at_or_below_the_timestamp(
    path: Path, target: int, expected: TimestampOffset
) -> None:
    assert filled(path, SAMPLE).lookup(target) == expected


def test_lookup_in_an_empty_index(path: Path) -> None:
    assert open_index(path).lookup(10**12) == EMPTY


def test_lookup_across_the_warm_section_boundary(path: Path) -> None:
    timestamps = list(range(5000, 5000 + 4 * 2000, 4))  # more entries than the 8 KiB warm section
    index = filled(path, [(ts, BASE + n) for n, ts in enumerate(timestamps)], max_entries=2001)
    for target in range(4999, timestamps[-1] + 2):
        slot = bisect.bisect_right(timestamps, target) - 1
        expected = TimestampOffset(timestamps[slot], BASE + slot) if slot >= 0 else EMPTY
        assert index.lookup(target) == expected


@pytest.mark.parametrize(
    ("offset", "kept"),
    [
        (0, 0),
        (105, 0),
        (106, 1),
        (110, 1),
        (111, 3),  # both entries at offset 110 go or stay together
        (120, 3),
        (121, 4),
        (2**40, 4),
    ],
)
def test_truncate_to_drops_entries_at_or_above_the_offset(
    path: Path, offset: int, kept: int
) -> None:
    entries = [(1000, 105), (2000, 110), (2500, 110), (3000, 120)]
    index = filled(path, entries)
    index.truncate_to(offset)
    assert entries_of(index) == entries[:kept]
    assert index.last_entry == (TimestampOffset(*entries[kept - 1]) if kept else EMPTY)
    index.maybe_append(9000, 500)
    assert index.last_entry == TimestampOffset(9000, 500)


def test_truncate_and_reset(path: Path) -> None:
    index = filled(path, SAMPLE)
    index.trim_to_valid_size()
    index.truncate()
    assert (index.entries, index.last_entry, index.length) == (0, EMPTY, 3 * ENTRY)
    index.reset()
    assert (index.entries, index.length) == (0, 16 * ENTRY)
    index.maybe_append(1, BASE)  # a timestamp below the dropped ones is accepted again
    assert index.last_entry == TimestampOffset(1, BASE)


def test_trim_and_resize_back_keep_the_entries(path: Path) -> None:
    index = filled(path, SAMPLE)
    index.trim_to_valid_size()
    assert path.stat().st_size == 3 * ENTRY
    assert index.lookup(2500) == TimestampOffset(2000, 110)
    index.resize(index.max_index_size)
    index.maybe_append(4000, 130)
    assert entries_of(index) == [*SAMPLE, (4000, 130)]


def test_reopen_a_trimmed_index(path: Path) -> None:
    filled(path, SAMPLE).close()
    index = open_index(path)
    index.sanity_check()
    assert (entries_of(index), index.is_full) == (SAMPLE, True)
    assert index.lookup(2999) == TimestampOffset(2000, 110)


def test_reopen_a_preallocated_index_left_by_a_crash(path: Path) -> None:
    filled(path, SAMPLE).close_handler()
    index = open_index(path)
    assert index.entries == 16
    with pytest.raises(CorruptIndexError, match=naming(path, "timestamps must strictly increase")):
        index.sanity_check()


def test_reopen_an_empty_file(path: Path) -> None:
    path.touch()
    index = open_index(path)
    assert (index.entries, index.length, index.last_entry) == (0, 0, EMPTY)
    assert index.lookup(5000) == EMPTY
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(5000, 100, skip_full_check=True)
    index.resize(index.max_index_size)
    index.maybe_append(5000, 100)
    assert index.entries == 1


@pytest.mark.parametrize(
    ("entries", "padding", "fault"),
    [
        ([(1000, 0)], b"\x00" * 5, "17 bytes is not a whole number of 12-byte entries"),
        ([(1000, 0), (1000, 1)], b"", "timestamps must strictly increase.*entry 1 has 1000"),
        ([(1000, 0), (3000, 1), (2000, 2)], b"", "timestamps must strictly increase.*entry 2"),
        ([(1000, 0), (2000, 5), (3000, 4)], b"", "offsets must not decrease.*entry 2 has 4"),
        ([(1000, -1)], b"", "offset 99 is below the base offset 100"),
    ],
)
def test_sanity_check_names_the_file_and_the_fault(
    path: Path, entries: list[tuple[int, int]], padding: bytes, fault: str
) -> None:
    write_entries(path, entries, padding)
    with pytest.raises(CorruptIndexError, match=naming(path, fault)):
        open_index(path).sanity_check()


def test_sanity_check_passes_a_sound_index(path: Path) -> None:
    filled(path, [(1000, 105), (2000, 105), (3000, 120)]).sanity_check()
    open_index(path.with_name("empty.timeindex")).sanity_check()


def test_relative_offsets_must_fit_int32(path: Path) -> None:
    index = open_index(path)
    for offset in (BASE - 1, BASE + 2**31):
        with pytest.raises(IndexOffsetOverflowError):
            index.maybe_append(1000, offset)
    index.maybe_append(1000, BASE + 2**31 - 1)
    assert index.last_entry == TimestampOffset(1000, BASE + 2**31 - 1)


def test_rename_and_delete(path: Path) -> None:
    index = filled(path, SAMPLE)
    swapped = path.with_name(path.name + ".swap")
    index.rename_to(swapped)
    assert index.lookup(1500) == TimestampOffset(1000, 105)
    assert index.delete_if_exists()
    assert not swapped.exists() and not path.exists()
    assert not index.delete_if_exists()


def test_lookups_in_threads_survive_appends_trims_and_resizes(path: Path) -> None:
    """Readers race a writer that remaps the file; every answer must be a real entry."""
    index = open_index(path, max_entries=4096)
    stop = threading.Event()
    failures: list[BaseException] = []

    def read() -> None:
        try:
            target = 0
            while not stop.is_set():
                found = index.lookup(target)
                assert found == EMPTY or found.timestamp == 10 * (found.offset - BASE) <= target
                target = (target * 7919 + 13) % 30_000
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            failures.append(error)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        for offset in range(BASE + 1, BASE + 2000):
            index.maybe_append(10 * (offset - BASE), offset)
            if offset % 50 == 0:
                index.trim_to_valid_size()
                index.resize(index.max_index_size)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not failures, failures[0]
    assert index.entries == 1999


class TimeIndexModel(RuleBasedStateMachine):
    """The index against a list of (timestamp, offset) through every operation."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.path = Path(self.directory.name) / "00000000000000000100.timeindex"
        self.index = open_index(self.path, max_entries=40)
        self.model: list[tuple[int, int]] = []

    def teardown(self) -> None:
        self.index.close_handler()
        self.directory.cleanup()

    @precondition(lambda self: not self.index.is_full)
    @rule(timestamp_step=st.integers(0, 1000), offset_step=st.integers(0, 100))
    def maybe_append(self, timestamp_step: int, offset_step: int) -> None:
        last_timestamp, last_offset = self.model[-1] if self.model else (NO_TIMESTAMP, BASE)
        entry = (last_timestamp + timestamp_step, last_offset + offset_step)
        self.index.maybe_append(*entry)
        if timestamp_step:
            self.model.append(entry)

    @rule(offset=st.integers(0, 5000))
    def truncate_to(self, offset: int) -> None:
        self.index.truncate_to(offset)
        self.model = [entry for entry in self.model if entry[1] < offset]

    @rule(target_timestamp=st.integers(-2, 50_000))
    def lookup(self, target_timestamp: int) -> None:
        below = [entry for entry in self.model if entry[0] <= target_timestamp]
        expected = TimestampOffset(*below[-1]) if below else EMPTY
        assert self.index.lookup(target_timestamp) == expected

    @rule()
    def trim_and_resize(self) -> None:
        self.index.trim_to_valid_size()
        self.index.resize(self.index.max_index_size)

    @rule()
    def reopen(self) -> None:
        self.index.close()
        self.index = open_index(self.path, max_entries=40)
        self.index.sanity_check()
        self.index.resize(self.index.max_index_size)

    @invariant()
    def same_entries(self) -> None:
        assert entries_of(self.index) == self.model
        assert self.index.last_entry == (TimestampOffset(*self.model[-1]) if self.model else EMPTY)
        assert os.path.getsize(self.path) == self.index.length


TimeIndexModel.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTimeIndexModel = TimeIndexModel.TestCase


def test_maybe_append_all_keeps_what_maybe_append_would(tmp_path: Path) -> None:
    entries = [(NO_TIMESTAMP, 100), (1000, 105), (1000, 107), (2000, 110), (3000, 120)]
    one_by_one = filled(tmp_path / "a.timeindex", entries)
    at_once = open_index(tmp_path / "b.timeindex")
    at_once.maybe_append_all(entries)
    assert entries_of(at_once) == entries_of(one_by_one) == SAMPLE
    assert at_once.last_entry == TimestampOffset(3000, 120)


def test_maybe_append_all_checks_order_and_keeps_the_roll_slot(path: Path) -> None:
    index = filled(path, SAMPLE[:1], max_entries=3)
    with pytest.raises(InvalidOffsetError, match="below the last entry"):
        index.maybe_append_all([(1500, 104)])
    with pytest.raises(InvalidOffsetError, match="below the last entry"):
        index.maybe_append_all([(900, 106)])
    with pytest.raises(ValueError, match="full"):
        index.maybe_append_all(SAMPLE[1:])
    index.maybe_append_all(SAMPLE[1:2])
    assert entries_of(index) == SAMPLE[:2]


def test_a_closed_index_refuses_even_an_append_that_adds_nothing(path: Path) -> None:
    index = filled(path, SAMPLE)
    index.close()
    for timestamp, offset in ((3000, 120), (3000, 125), (4000, 130)):
        with pytest.raises(ValueError, match="closed"):
            index.maybe_append(timestamp, offset)
