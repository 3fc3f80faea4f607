"""OffsetIndex: format, lookups, truncation, resizing, reopening, corruption, threads."""

from __future__ import annotations

import bisect
import os
import re
import struct
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis_budget import examples

from odradek.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from odradek.storage.offset_index import OffsetIndex, OffsetPosition

BASE = 100
ENTRY = 8


def open_index(path: Path, max_entries: int = 16, base: int = BASE) -> OffsetIndex:
    return OffsetIndex(path, base, max_entries * ENTRY)


def filled(path: Path, offsets: list[int], max_entries: int = 16) -> OffsetIndex:
    """An index with an entry per offset, at position 10 * (offset - BASE)."""
    index = open_index(path, max_entries)
    for offset in offsets:
        index.append(offset, 10 * (offset - BASE))
    return index


def write_entries(path: Path, entries: list[tuple[int, int]], padding: bytes = b"") -> None:
    path.write_bytes(b"".join(struct.pack(">ii", *entry) for entry in entries) + padding)


def naming(path: Path, fault: str) -> str:
    """A pattern for an error message that names ``path`` and then ``fault``."""
    return rf"{re.escape(str(path))}.*{fault}"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000100.index"


def test_new_index_is_preallocated_to_whole_entries(path: Path) -> None:
    assert OffsetIndex.entry_size == ENTRY
    index = OffsetIndex(path, BASE, 10 * ENTRY + 5)
    assert path.stat().st_size == 10 * ENTRY
    assert (index.length, index.entries, index.max_entries) == (10 * ENTRY, 0, 10)
    assert (index.size_in_bytes, index.is_full, index.last_offset) == (0, False, BASE)


def test_max_index_size_below_one_entry_is_refused(path: Path) -> None:
    with pytest.raises(ValueError, match="below one entry"):
        OffsetIndex(path, BASE, ENTRY - 1)


def test_entries_are_written_in_kafka_format(path: Path) -> None:
    index = open_index(path)
    index.append(105, 4096)
    index.append(BASE + 2**31 - 1, 2**31 - 1)
    index.flush()
    assert path.read_bytes()[: 2 * ENTRY] == struct.pack(">iiii", 5, 4096, 2**31 - 1, 2**31 - 1)


def test_round_trip(path: Path) -> None:
    index = filled(path, [100, 103, 110])
    assert [index.entry(n) for n in range(3)] == [
        OffsetPosition(100, 0),
        OffsetPosition(103, 30),
        OffsetPosition(110, 100),
    ]
    assert (index.entries, index.size_in_bytes, index.last_offset) == (3, 3 * ENTRY, 110)
    with pytest.raises(IndexError):
        index.entry(3)
    with pytest.raises(IndexError):
        index.entry(-1)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (0, OffsetPosition(BASE, 0)),  # below the base offset
        (104, OffsetPosition(BASE, 0)),  # before the first entry
        (105, OffsetPosition(105, 50)),  # exactly the first
        (109, OffsetPosition(105, 50)),  # between
        (110, OffsetPosition(110, 100)),  # exactly a middle one
        (120, OffsetPosition(120, 200)),  # exactly the last
        (2**40, OffsetPosition(120, 200)),  # far after the last
    ],
)
def test_lookup_finds_the_last_entry_at_or_below_the_target(
    path: Path, target: int, expected: OffsetPosition
) -> None:
    assert filled(path, [105, 110, 120]).lookup(target) == expected


def test_lookup_in_an_empty_index_gives_the_segment_start(path: Path) -> None:
    assert open_index(path).lookup(BASE + 7) == OffsetPosition(BASE, 0)


def test_lookup_across_the_warm_section_boundary(path: Path) -> None:
    offsets = list(range(BASE, BASE + 3 * 3000, 3))  # more entries than the 8 KiB warm section
    index = filled(path, offsets, max_entries=3000)
    for target in range(BASE - 1, offsets[-1] + 2):
        slot = bisect.bisect_right(offsets, target) - 1
        expected = OffsetPosition(offsets[slot], 10 * (offsets[slot] - BASE)) if slot >= 0 else (
            OffsetPosition(BASE, 0)
        )
        assert index.lookup(target) == expected


@pytest.mark.parametrize("offset", [104, 105])
def test_append_must_move_the_offset_forward(path: Path, offset: int) -> None:
    index = filled(path, [105])
    with pytest.raises(InvalidOffsetError, match=re.escape(str(path))):
        index.append(offset, 500)
    assert index.entries == 1


def test_append_refuses_a_position_beyond_int32(path: Path) -> None:
    with pytest.raises(ValueError, match="position"):
        open_index(path).append(BASE, 2**31)


def test_full_index_refuses_appends(path: Path) -> None:
    index = filled(path, [100, 101, 102], max_entries=3)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(103, 30)
    assert index.last_offset == 102


@pytest.mark.parametrize(
    ("offset", "kept"),
    [
        (0, []),
        (100, []),
        (104, []),
        (105, []),
        (106, [105]),
        (110, [105]),
        (111, [105, 110]),
        (120, [105, 110]),
        (121, [105, 110, 120]),
        (2**40, [105, 110, 120]),
    ],
)
def test_truncate_to_drops_entries_at_or_above_the_offset(
    path: Path, offset: int, kept: list[int]
) -> None:
    index = filled(path, [105, 110, 120])
    index.truncate_to(offset)
    assert [index.entry(n).offset for n in range(index.entries)] == kept
    assert index.last_offset == (kept[-1] if kept else BASE)
    index.append(200, 1000)  # appends continue after the cut
    assert index.last_offset == 200


def test_truncate_and_reset(path: Path) -> None:
    index = filled(path, [100, 101])
    index.trim_to_valid_size()
    index.truncate()
    assert (index.entries, index.length) == (0, 2 * ENTRY)
    index.reset()
    assert (index.entries, index.length) == (0, 16 * ENTRY)
    assert index.last_offset == BASE  # the last entry is not remembered past a reset
    index.append(100, 0)
    assert index.last_offset == 100


def test_trim_and_resize_back_keep_the_entries(path: Path) -> None:
    index = filled(path, [100, 105, 110])
    index.trim_to_valid_size()
    assert path.stat().st_size == index.length == 3 * ENTRY
    assert index.is_full
    assert index.lookup(107) == OffsetPosition(105, 50)
    assert index.resize(16 * ENTRY + 3)
    assert (path.stat().st_size, index.max_entries) == (16 * ENTRY, 16)
    assert not index.resize(16 * ENTRY)
    index.append(111, 110)
    assert [index.entry(n).offset for n in range(index.entries)] == [100, 105, 110, 111]


def test_resize_below_the_entries_in_use_is_refused(path: Path) -> None:
    index = filled(path, [100, 105, 110])
    with pytest.raises(ValueError, match="entries use 24"):
        index.resize(2 * ENTRY)
    assert index.lookup(110) == OffsetPosition(110, 100)


def test_reopen_a_trimmed_index(path: Path) -> None:
    filled(path, [100, 105, 110]).close()
    assert path.stat().st_size == 3 * ENTRY
    index = open_index(path)
    assert (index.entries, index.last_offset, index.is_full) == (3, 110, True)
    index.sanity_check()
    assert index.lookup(109) == OffsetPosition(105, 50)
    index.resize(index.max_index_size)
    index.append(120, 200)
    assert index.entries == 4


def test_reopen_a_preallocated_index_left_by_a_crash(path: Path) -> None:
    filled(path, [105, 110]).close_handler()  # no trim: zero padding after the entries
    index = open_index(path)
    assert index.entries == 16
    with pytest.raises(CorruptIndexError, match=naming(path, "strictly increase.*entry 2 has 0")):
        index.sanity_check()


def test_reopen_an_empty_file(path: Path) -> None:
    path.touch()
    index = open_index(path)
    assert (index.entries, index.length, index.is_full) == (0, 0, True)
    assert index.lookup(500) == OffsetPosition(BASE, 0)
    assert index.fetch_upper_bound_offset(OffsetPosition(BASE, 0), 10) is None
    index.sanity_check()
    with pytest.raises(ValueError, match="full"):
        index.append(BASE, 0)
    index.resize(index.max_index_size)
    index.append(BASE, 0)
    assert index.entry(0) == OffsetPosition(BASE, 0)


def test_read_only_index(path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        OffsetIndex(path, BASE, 16 * ENTRY, writable=False)
    filled(path, [100, 105]).close()
    index = OffsetIndex(path, BASE, 16 * ENTRY, writable=False)
    assert index.lookup(106) == OffsetPosition(105, 50)
    with pytest.raises(ValueError, match="full"):
        index.append(110, 100)
    index.close()
    assert path.stat().st_size == 2 * ENTRY


def test_sanity_check_passes_a_sound_index(path: Path) -> None:
    filled(path, [100, 105, 110]).sanity_check()
    open_index(path.with_name("empty.index")).sanity_check()


@pytest.mark.parametrize(
    ("entries", "padding", "fault"),
    [
        ([(0, 0), (5, 50)], b"\x00\x01\x02", "19 bytes is not a whole number of 8-byte entries"),
        ([(0, 0), (5, 50), (5, 60)], b"", "offsets must strictly increase.*entry 1 has 5"),
        ([(0, 0), (7, 50), (5, 60)], b"", "offsets must strictly increase.*entry 2 has 5"),
        ([(0, 0), (5, 50), (7, 40)], b"", "positions must not decrease.*entry 2 has 40"),
        ([(-1, 0)], b"", "offset 99 is below the base offset 100"),
        ([(-9, 0), (-3, 10)], b"", "offset 91 is below the base offset 100"),
    ],
)
def test_sanity_check_names_the_file_and_the_fault(
    path: Path, entries: list[tuple[int, int]], padding: bytes, fault: str
) -> None:
    write_entries(path, entries, padding)
    with pytest.raises(CorruptIndexError, match=naming(path, fault)):
        open_index(path).sanity_check()


def test_a_corrupt_index_with_an_offset_below_base_still_looks_up_safely(path: Path) -> None:
    write_entries(path, [(-1, 0)])
    assert open_index(path).lookup(BASE) == OffsetPosition(BASE - 1, 0)


@pytest.mark.parametrize(
    ("fetch_position", "fetch_size", "expected"),
    [
        (0, 1, OffsetPosition(105, 50)),
        (0, 50, OffsetPosition(105, 50)),
        (0, 51, OffsetPosition(110, 100)),
        (50, 50, OffsetPosition(110, 100)),
        (60, 140, OffsetPosition(120, 200)),
        (60, 141, None),
    ],
)
def test_fetch_upper_bound_offset(
    path: Path, fetch_position: int, fetch_size: int, expected: OffsetPosition | None
) -> None:
    index = filled(path, [100, 105, 110, 120])
    fetch_offset = OffsetPosition(BASE, fetch_position)
    assert index.fetch_upper_bound_offset(fetch_offset, fetch_size) == expected


def test_relative_offsets_must_fit_int32(path: Path) -> None:
    index = open_index(path)
    assert index.relative_offset(BASE + 7) == 7
    for offset in (BASE - 1, BASE + 2**31):
        with pytest.raises(IndexOffsetOverflowError, match=rf"offset {offset} "):
            index.append(offset, 0)
    assert index.entries == 0


def test_rename_keeps_the_index_working(path: Path) -> None:
    index = filled(path, [100, 105])
    deleted = path.with_name(path.name + ".deleted")
    index.rename_to(deleted)
    assert not path.exists() and index.path == deleted
    assert index.lookup(107) == OffsetPosition(105, 50)
    index.append(110, 100)
    index.close()
    assert deleted.stat().st_size == 3 * ENTRY


def test_update_parent_dir_follows_a_renamed_partition_directory(tmp_path: Path) -> None:
    partition_dir = tmp_path / "orders-0"
    partition_dir.mkdir()
    index = filled(partition_dir / "00000000000000000100.index", [100, 105])
    deleted_dir = tmp_path / "orders-0.abc-delete"
    partition_dir.rename(deleted_dir)
    index.update_parent_dir(deleted_dir)
    assert index.path == deleted_dir / "00000000000000000100.index"
    assert index.lookup(106) == OffsetPosition(105, 50)
    index.close()
    assert index.path.stat().st_size == 2 * ENTRY


def test_delete_if_exists(path: Path) -> None:
    index = filled(path, [100])
    assert index.delete_if_exists()
    assert not path.exists()
    assert not index.delete_if_exists()
    with pytest.raises(ValueError, match="closed"):
        index.lookup(100)


def test_a_closed_index_refuses_use_and_closes_twice(path: Path) -> None:
    index = filled(path, [100, 105])
    index.close()
    index.close()
    assert path.stat().st_size == 2 * ENTRY
    for use in (lambda: index.lookup(100), lambda: index.append(110, 0), index.flush):
        with pytest.raises(ValueError, match="closed"):
            use()


def test_close_handler_does_not_trim(path: Path) -> None:
    filled(path, [100]).close_handler()
    assert path.stat().st_size == 16 * ENTRY


def test_flushed_entries_survive_in_the_file(path: Path) -> None:
    index = filled(path, [100, 105])
    index.flush()
    copy = path.with_name("copy.index")
    copy.write_bytes(path.read_bytes()[: 2 * ENTRY])
    assert open_index(copy).entry(1) == OffsetPosition(105, 50)


def test_lookups_in_threads_survive_appends_trims_and_resizes(path: Path) -> None:
    """Readers race a writer that remaps the file; every answer must be a real entry."""
    index = open_index(path, max_entries=4096)
    stop = threading.Event()
    failures: list[BaseException] = []

    def read() -> None:
        try:
            target = BASE
            while not stop.is_set():
                found = index.lookup(target)
                assert found.offset <= target and found.position == 10 * (found.offset - BASE)
                target = BASE + (target * 7919) % 9000
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            failures.append(error)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    try:
        for offset in range(BASE, BASE + 2000):
            index.append(offset, 10 * (offset - BASE))
            if offset % 50 == 0:
                index.trim_to_valid_size()
                index.resize(index.max_index_size)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not failures, failures[0]
    assert index.entries == 2000


class OffsetIndexModel(RuleBasedStateMachine):
    """The index against a sorted list of (offset, position) through every operation."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.path = Path(self.directory.name) / "00000000000000000100.index"
        self.index = open_index(self.path, max_entries=40)
        self.model: list[tuple[int, int]] = []

    def teardown(self) -> None:
        self.index.close_handler()
        self.directory.cleanup()

    def next_entry(self) -> tuple[int, int]:
        return self.model[-1] if self.model else (BASE - 1, 0)

    @precondition(lambda self: not self.index.is_full)
    @rule(offset_step=st.integers(1, 1000), position_step=st.integers(0, 5000))
    def append(self, offset_step: int, position_step: int) -> None:
        last_offset, last_position = self.next_entry()
        entry = (last_offset + offset_step, last_position + position_step)
        self.index.append(*entry)
        self.model.append(entry)

    @rule(offset=st.integers(0, 20_000))
    def truncate_to(self, offset: int) -> None:
        self.index.truncate_to(offset)
        self.model = [entry for entry in self.model if entry[0] < offset]

    @rule(target_offset=st.integers(0, 20_000))
    def lookup(self, target_offset: int) -> None:
        below = [entry for entry in self.model if entry[0] <= target_offset]
        expected = OffsetPosition(*(below[-1] if below else (BASE, 0)))
        assert self.index.lookup(target_offset) == expected

    @rule(position=st.integers(0, 40_000), size=st.integers(0, 10_000))
    def fetch_upper_bound(self, position: int, size: int) -> None:
        above = [entry for entry in self.model if entry[1] >= position + size]
        expected = OffsetPosition(*above[0]) if above else None
        assert self.index.fetch_upper_bound_offset(OffsetPosition(BASE, position), size) == expected

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
        assert self.index.entries == len(self.model)
        assert self.index.last_offset == (self.model[-1][0] if self.model else BASE)
        assert os.path.getsize(self.path) == self.index.length


OffsetIndexModel.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestOffsetIndexModel = OffsetIndexModel.TestCase


def test_append_all_writes_what_appends_one_by_one_would(tmp_path: Path) -> None:
    one_by_one = filled(tmp_path / "a.index", [100, 103, 110])
    at_once = open_index(tmp_path / "b.index")
    at_once.append_all([(100, 0), (103, 30), (110, 100)])
    assert at_once.entries == 3 and at_once.last_offset == 110
    one_by_one.flush(), at_once.flush()
    assert (tmp_path / "a.index").read_bytes() == (tmp_path / "b.index").read_bytes()
    at_once.append(111, 110)  # single appends go on after the bulk
    assert at_once.lookup(111) == OffsetPosition(111, 110)


def test_append_all_checks_order_and_room(path: Path) -> None:
    index = filled(path, [105], max_entries=3)
    with pytest.raises(InvalidOffsetError, match="offset 105 .*not above the last offset 106"):
        index.append_all([(106, 60), (105, 70)])
    with pytest.raises(ValueError, match="full"):
        index.append_all([(106, 60), (107, 70), (108, 80)])
    assert index.entries == 1 and index.last_offset == 105


def test_a_lookup_answers_while_a_flush_syncs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fsync of a flush can take milliseconds (longer on a busy disk); it runs outside the
    index lock, so a fetch looking up an offset meanwhile is not held up."""
    index = filled(path, [100, 105])
    in_fsync, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(descriptor: int) -> None:
        in_fsync.set()
        assert release.wait(10)
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    found: list[OffsetPosition] = []
    flusher = threading.Thread(target=index.flush)
    looker = threading.Thread(target=lambda: found.append(index.lookup(106)))
    flusher.start()
    try:
        assert in_fsync.wait(10)
        looker.start()
        looker.join(5)
        assert found == [OffsetPosition(105, 50)], "the lookup waited for the flush's fsync"
    finally:
        release.set()
        flusher.join()
        if looker.is_alive():
            looker.join()


def test_a_flush_does_not_msync_where_fsync_writes_the_map(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """msync (``mmap.flush``) holds the GIL until the pages are on disk, stalling every thread,
    the event loop's included. On Linux an fsync also writes what the map changed, so a flush
    does not msync there; elsewhere it must."""
    index = filled(path, [100, 105])
    index_map, msyncs = index._current_map(), []

    class RecordingMap:
        def flush(self) -> None:
            msyncs.append(None)
            index_map.flush()

    monkeypatch.setattr(index, "_current_map", RecordingMap)
    index.flush()
    assert len(msyncs) == (0 if sys.platform.startswith("linux") else 1)
