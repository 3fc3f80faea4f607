"""LazyIndex: nothing is opened until get(); rename, delete and close work either way."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from odradek.storage.lazy_index import LazyIndex
from odradek.storage.offset_index import OffsetIndex, OffsetPosition
from odradek.storage.time_index import TimeIndex, TimestampOffset

BASE = 100
MAX_INDEX_SIZE = 16 * 8


def open_descriptors(directory: Path) -> int:
    """This process's descriptors on files in ``directory`` (others come and go with the
    threads and collected garbage of other tests)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since listed
            continue
        count += target.startswith(f"{directory}/")
    return count


def existing_index(path: Path) -> None:
    """Leave a trimmed offset index with entries for 100 and 105 at ``path``."""
    index = OffsetIndex(path, BASE, MAX_INDEX_SIZE)
    index.append(100, 0)
    index.append(105, 50)
    index.close()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000100.index"


def test_construction_opens_and_creates_nothing(path: Path) -> None:
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE)
    assert not lazy.is_loaded
    assert not path.exists()
    assert (lazy.path, lazy.base_offset) == (path, BASE)


def test_many_lazy_indexes_hold_no_descriptors(tmp_path: Path) -> None:
    paths = [tmp_path / f"{n:020d}.index" for n in range(0, 2000 * 10, 10)]
    for segment_path in paths[:50]:
        existing_index(segment_path)
    lazies = [LazyIndex.for_offset(p, int(p.stem), MAX_INDEX_SIZE) for p in paths]
    assert open_descriptors(tmp_path) == 0
    lazies[0].get()
    assert open_descriptors(tmp_path) == 1  # the map holds its own descriptor
    assert [lazy.is_loaded for lazy in lazies[:2]] == [True, False]
    lazies[0].close()
    assert open_descriptors(tmp_path) == 0


def test_get_opens_the_existing_file_once(path: Path) -> None:
    existing_index(path)
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE)
    index = lazy.get()
    assert isinstance(index, OffsetIndex)
    assert lazy.is_loaded and lazy.get() is index
    assert index.lookup(107) == OffsetPosition(105, 50)


def test_get_creates_a_missing_writable_index(path: Path) -> None:
    lazy = LazyIndex.for_time(path.with_suffix(".timeindex"), BASE, 10 * 12)
    index = lazy.get()
    assert isinstance(index, TimeIndex)
    assert index.length == 10 * 12
    index.maybe_append(1000, 101)
    assert index.lookup(2000) == TimestampOffset(1000, 101)


def test_read_only_get_of_a_missing_file_fails(path: Path) -> None:
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE, writable=False)
    with pytest.raises(FileNotFoundError):
        lazy.get()
    assert not lazy.is_loaded and not path.exists()


class SlowOffsetIndex(OffsetIndex):
    """Counts how often it is opened and opens slowly, to widen any race."""

    opened = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        type(self).opened += 1
        time.sleep(0.02)
        super().__init__(*args, **kwargs)


def test_concurrent_first_gets_open_the_index_once(path: Path) -> None:
    SlowOffsetIndex.opened = 0
    lazy = LazyIndex(SlowOffsetIndex, path, BASE, MAX_INDEX_SIZE)
    barrier = threading.Barrier(8)
    got: list[OffsetIndex] = []

    def first_get() -> None:
        barrier.wait()
        got.append(lazy.get())

    threads = [threading.Thread(target=first_get) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert SlowOffsetIndex.opened == 1
    assert len(got) == 8 and all(index is got[0] for index in got)


def test_rename_before_loading_moves_the_file(path: Path) -> None:
    existing_index(path)
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE)
    deleted = path.with_name(path.name + ".deleted")
    lazy.rename_to(deleted)
    assert not lazy.is_loaded
    assert (path.exists(), deleted.exists(), lazy.path) == (False, True, deleted)
    assert lazy.get().lookup(105) == OffsetPosition(105, 50)


def test_rename_before_loading_a_missing_file_only_moves_the_name(path: Path) -> None:
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE)
    renamed = path.with_name("00000000000000000100.index.cleaned")
    lazy.rename_to(renamed)
    assert not renamed.exists()
    assert lazy.get().path == renamed
    assert renamed.exists() and not path.exists()


def test_rename_after_loading_moves_the_open_index(path: Path) -> None:
    existing_index(path)
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE)
    index = lazy.get()
    swapped = path.with_name(path.name + ".swap")
    lazy.rename_to(swapped)
    assert index.path == lazy.path == swapped
    assert swapped.exists() and not path.exists()
    assert index.lookup(104) == OffsetPosition(100, 0)


@pytest.mark.parametrize("load", [False, True])
def test_update_parent_dir_follows_a_renamed_directory(tmp_path: Path, load: bool) -> None:
    partition_dir = tmp_path / "orders-0"
    partition_dir.mkdir()
    existing_index(partition_dir / "00000000000000000100.index")
    lazy = LazyIndex.for_offset(partition_dir / "00000000000000000100.index", BASE, MAX_INDEX_SIZE)
    if load:
        lazy.get()
    deleted_dir = tmp_path / "orders-0.abc-delete"
    partition_dir.rename(deleted_dir)
    lazy.update_parent_dir(deleted_dir)
    assert lazy.path == lazy.get().path == deleted_dir / "00000000000000000100.index"
    assert lazy.get().lookup(105) == OffsetPosition(105, 50)


@pytest.mark.parametrize("load", [False, True])
def test_delete_if_exists(path: Path, load: bool) -> None:
    existing_index(path)
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE)
    if load:
        lazy.get()
    assert lazy.delete_if_exists()
    assert not path.exists()
    assert not lazy.delete_if_exists()


def test_close_before_loading_touches_nothing(path: Path) -> None:
    lazy = LazyIndex.for_offset(path, BASE, MAX_INDEX_SIZE)
    lazy.close()
    lazy.close_handler()
    assert not path.exists() and not lazy.is_loaded


def test_close_trims_and_close_handler_does_not(tmp_path: Path) -> None:
    trimmed = LazyIndex.for_offset(tmp_path / "a.index", BASE, MAX_INDEX_SIZE)
    untrimmed = LazyIndex.for_offset(tmp_path / "b.index", BASE, MAX_INDEX_SIZE)
    for lazy in (trimmed, untrimmed):
        lazy.get().append(101, 10)
    trimmed.close()
    untrimmed.close_handler()
    assert (trimmed.path.stat().st_size, untrimmed.path.stat().st_size) == (8, MAX_INDEX_SIZE)
    with pytest.raises(ValueError, match="closed"):
        trimmed.get().lookup(101)
