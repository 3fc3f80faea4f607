"""AbstractIndex: the memory-mapped file of sorted fixed-size entries both segment indexes are.

Kafka's layout (design §5): big-endian entries, one after another, no header. The file is
preallocated while its segment is active and trimmed to the used entries when it stops being.
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
import struct
import sys
import threading
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable
from itertools import chain, compress, count, islice
from pathlib import Path
from typing import ClassVar

from odradek.errors import CorruptIndexError, IndexOffsetOverflowError
from odradek.int_limits import INT32_MAX
from odradek.storage.idle_file_cache import IDLE_FILES
from odradek.storage.segment_append_state import AppendState

logger = logging.getLogger(__name__)


# Lookups search the last 8 KiB of entries first: appends and in-sync reads keep those pages in
# the page cache, while a plain binary search would fault in cold pages at every new page.
WARM_SECTION_BYTES = 8192

_TYPECODE_FOR_WIDTH = {4: "i", 8: "q"}  # array typecodes of the signed integers entries hold

# Linux keeps one page cache for reads, writes and shared maps: an fsync writes what a map changed.
_FSYNC_WRITES_MAPPED_PAGES = sys.platform.startswith("linux")

# From Python 3.13 a map need not keep a duplicate of the file's descriptor; before, each map
# holds one (which the idle file cache bounds).
_UNTRACKED_FD: dict[str, bool] = {"trackfd": False} if sys.version_info >= (3, 13) else {}


def delete_file_if_exists(path: Path) -> bool:
    """Unlink ``path``; return whether there was a file to delete."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


class AbstractIndex(ABC):
    """A memory-mapped file of fixed-size entries, sorted, searched by binary search.

    Each entry holds two integers, one of them an offset stored relative to ``base_offset``. A new
    writable file is preallocated to ``max_index_size`` rounded down to whole entries. An existing
    file is taken to hold ``size // entry_size`` entries and to be full: the owner resizes it back
    to the maximum to append again, and runs ``sanity_check`` first when it may have been left by
    a crash (a preallocated file then holds zero padding after the real entries).

    One writer and many reader threads may use an index at once: every operation holds the
    index's lock, so a remap never takes the map away from a lookup.

    The map is kept among the most recently used idle files (``IDLE_FILES``): evicted, it is
    dropped (the last user of the old map unmaps it) and mapped again on the next use, so a
    broker with many segments holds a bounded number of maps and, through them, descriptors.
    The file itself is closed once mapped, as Kafka does.
    """

    entry_size: ClassVar[int]  # bytes per entry, readable without opening an index
    _ENTRY: ClassVar[struct.Struct]  # the layout of one entry
    _OFFSET_FIELD: ClassVar[int]  # which of its two fields is the relative offset

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int, writable: bool = True
    ) -> None:
        self._path = Path(path)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._lock = threading.RLock()
        # The active segment's append state while it owns the entry count and the last entry
        # (LogSegment lends them; see lend_to).
        self._append_state: AppendState | None = None
        self._mmap: mmap.mmap | None = None
        self._closed = False
        # The last entry's fields, kept so that appends (one per index.interval.bytes) do not
        # read it back from the map; None when it must be read.
        self._last: tuple[int, int] | None = None
        if writable and not self._path.exists():
            if max_index_size < self.entry_size:
                raise ValueError(f"max index size {max_index_size} is below one entry")
            self._map_file("x+b", self._round_down(max_index_size))
            self._entries = 0
        else:
            self._map_file("r+b" if writable else "rb")
            self._entries = self._length // self.entry_size
        logger.debug("Loaded %r, room for %d entries", self, self.max_entries)

    # --- the entry count and last entry, owned by the append state while it is lent ----------

    @property
    def _entries(self) -> int:
        state = self._append_state
        return self._own_entries if state is None else self._lent_entries(state)

    @_entries.setter
    def _entries(self, entries: int) -> None:
        self._check_not_lent()
        self._own_entries = entries

    @property
    def _last(self) -> tuple[int, int] | None:
        state = self._append_state
        return self._own_last if state is None else self._lent_last(state)

    @_last.setter
    def _last(self, last: tuple[int, int] | None) -> None:
        self._check_not_lent()
        self._own_last = last

    @abstractmethod
    def _lent_entries(self, state: AppendState) -> int:
        """The entry count of this index in ``state``."""

    @abstractmethod
    def _lent_last(self, state: AppendState) -> tuple[int, int] | None:
        """The last entry's fields of this index in ``state``."""

    def lend_to(self, state: AppendState) -> None:
        """``state`` writes the entries and owns their count from now on (it holds a buffer on
        the map, so that the map cannot be resized or closed until ``take_back``)."""
        with self._lock:
            self._check_open()
            self._append_state = state

    def take_back(self) -> None:
        """Own the entry count and last entry again, as the append state left them."""
        with self._lock:
            state = self._append_state
            if state is not None:
                self._own_entries = self._lent_entries(state)
                self._own_last = self._lent_last(state)
                self._append_state = None

    def writable_map(self) -> mmap.mmap | None:
        """The map an append state writes entries through (None for an empty file)."""
        with self._lock:
            return self._current_map()

    def last_fields(self) -> tuple[int, int] | None:
        """The stored fields of the last entry, None when there is none."""
        with self._lock:
            return self._last_fields()

    def _check_not_lent(self) -> None:
        if self._append_state is not None:
            raise RuntimeError(f"{self._path} is written through its segment's append state")

    @property
    def path(self) -> Path:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        """How many entries the file holds at its current length."""
        return self._max_entries

    @property
    def is_mapped(self) -> bool:
        """Whether the index holds a map now (one the idle file cache evicted does not)."""
        return self._mmap is not None

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def length(self) -> int:
        """The file's size in bytes, preallocated space included."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """The bytes the entries use."""
        return self._entries * self.entry_size

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, which must fit a non-negative int32."""
        relative = offset - self._base_offset
        if not 0 <= relative <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"offset {offset} is not within int32 above base offset {self._base_offset} "
                f"of {self._path}"
            )
        return relative

    def resize(self, new_size: int) -> bool:
        """Set the file to ``new_size`` rounded down to whole entries and remap it.

        Returns whether the size changed. The entries in use must fit.
        """
        with self._lock:
            self._check_open()
            rounded_size = self._round_down(new_size)
            if rounded_size == self._length:
                return False
            if rounded_size < self.size_in_bytes:
                raise ValueError(
                    f"cannot resize {self._path} to {rounded_size} bytes: "
                    f"its entries use {self.size_in_bytes}"
                )
            self._unmap()
            self._map_file("r+b", rounded_size)
            logger.debug("Resized index %s to %d bytes", self._path, rounded_size)
            return True

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated space off, leaving only the entries in use."""
        with self._lock:
            self.resize(self.size_in_bytes)

    def reset(self) -> None:
        """Drop every entry and grow the file back to ``max_index_size``."""
        with self._lock:
            self.truncate()
            self.resize(self._max_index_size)

    def truncate(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._drop_entries_from(0)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is ``offset`` or above."""
        with self._lock:
            index_map = self._current_map()
            relative_target = offset - self._base_offset
            kept = self._count_at_most(index_map, relative_target - 1, self._OFFSET_FIELD)
            self._drop_entries_from(kept)

    def _drop_entries_from(self, kept: int) -> None:
        """Keep the first ``kept`` entries and zero the bytes of the others: past the last
        entry the file holds zeros, as a preallocated one does, so a reader of the file (a
        crash's recovery, ``dump-log --verify-index`` on a live broker) never takes a dropped
        entry for one in use. The caller holds the lock."""
        self._check_open()
        if self._entries > kept:
            index_map = self._current_map()
            written = self._written_entries(index_map, kept, self._entries)
            if written > kept:
                start, end = kept * self.entry_size, written * self.entry_size
                index_map[start:end] = bytes(end - start)
        self._entries = kept
        self._last = None

    def _written_entries(self, index_map: mmap.mmap | None, low: int, high: int) -> int:
        """Where the zeros start between entries ``low`` and ``high``: written entries are never
        all zeros and the unwritten tail is, so a binary search finds it (a few pages touched,
        where zeroing a whole preallocated index after a crash would write megabytes)."""
        size = self.entry_size
        zero = bytes(size)
        while low < high:
            middle = (low + high) // 2
            if index_map[middle * size : (middle + 1) * size] == zero:
                high = middle
            else:
                low = middle + 1
        return low

    def flush(self) -> None:
        """Write the entries and the file's size to disk.

        ``mmap.flush`` (msync) holds the GIL until the pages are on disk, stalling every thread
        of the broker, its event loop included. On Linux an fsync of the file also writes the
        pages changed through a shared map, so only the fsync runs there; it releases the GIL,
        and runs outside the index lock so lookups go on meanwhile.
        """
        with self._lock:
            if _FSYNC_WRITES_MAPPED_PAGES:
                self._check_open()  # and no need to map an evicted index again
            elif (index_map := self._current_map()) is not None:
                index_map.flush()
            descriptor = os.open(self._path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def close(self) -> None:
        """Trim the file to its entries and release the map; closing twice does nothing."""
        with self._lock:
            if not self._closed:
                self.trim_to_valid_size()
                self.close_handler()

    def close_handler(self) -> None:
        """Release the map without trimming (the file is about to be deleted or renamed)."""
        with self._lock:
            self._unmap()
            self._closed = True
        IDLE_FILES.discard(self)

    def release_idle(self) -> None:
        """Drop the map (the idle file cache evicts it): a user holding it unmaps it when done,
        the next use maps the file again. Takes no lock, so that evicting never waits on an
        index in use; the entries are kept on the object, not in the map. An append state
        holding a buffer on the map gives it back (it maps the index again when an entry is
        due)."""
        self._mmap = None
        state = self._append_state
        if state is not None:
            state.release_maps()

    def delete_if_exists(self) -> bool:
        """Close the index and unlink its file; return whether there was a file."""
        with self._lock:
            self.close_handler()
            return delete_file_if_exists(self._path)

    def rename_to(self, new_path: Path) -> None:
        """Move the file to ``new_path``; the open map stays valid."""
        with self._lock:
            os.replace(self._path, new_path)
            self._path = Path(new_path)

    def update_parent_dir(self, parent_dir: Path) -> None:
        """Follow a rename of the directory holding the file (the file itself stays put)."""
        with self._lock:
            self._path = Path(parent_dir) / self._path.name

    def sanity_check(self) -> None:
        """Raise CorruptIndexError, naming the file and the fault, unless the index is sound.

        Sound means: whole entries, sorted (as each index type defines), no offset below the base.
        """
        with self._lock:
            index_map = self._current_map()
            if self._length % self.entry_size:
                raise self._corruption(
                    f"{self._length} bytes is not a whole number of {self.entry_size}-byte entries"
                )
            if self._entries == 0:
                return
            self._check_order(index_map)
            first_offset = self._base_offset + self._fields(index_map, 0)[self._OFFSET_FIELD]
            if first_offset < self._base_offset:
                raise self._corruption(
                    f"offset {first_offset} is below the base offset {self._base_offset}"
                )

    @abstractmethod
    def _check_order(self, index_map: mmap.mmap) -> None:
        """Raise CorruptIndexError unless the entries are in the order appends keep."""

    def _check_sorted(
        self, index_map: mmap.mmap, field: int, out_of_order: Callable[[int, int], bool], rule: str
    ) -> None:
        """Raise CorruptIndexError at the first entry whose ``field`` breaks ``rule``.

        ``out_of_order(previous, current)`` is true where an entry breaks it.
        """
        values = self._column(index_map, field)
        pairs_out_of_order = map(out_of_order, values, islice(values, 1, None))
        slot = next(compress(count(1), pairs_out_of_order), None)
        if slot is not None:
            raise self._corruption(
                f"{rule}, but entry {slot - 1} has {values[slot - 1]} "
                f"and entry {slot} has {values[slot]}"
            )

    def _column(self, index_map: mmap.mmap, field: int) -> array:
        """``field`` of every entry, gathered by strided slices: no object per entry.

        Byte k of the field in every entry is one slice of the map; interleaving the slices
        gives the big-endian values back to back.
        """
        codes = self._ENTRY.format.lstrip(">")
        start = struct.calcsize(">" + codes[:field])
        width = struct.calcsize(">" + codes[field])
        used = index_map[: self.size_in_bytes]
        gathered = bytearray(self._entries * width)
        for byte in range(width):
            gathered[byte::width] = used[start + byte :: self.entry_size]
        values = array(_TYPECODE_FOR_WIDTH[width], gathered)
        if sys.byteorder == "little":
            values.byteswap()
        return values

    def _corruption(self, fault: str) -> CorruptIndexError:
        return CorruptIndexError(f"index file {self._path} is corrupt: {fault}")

    def _entry_fields(self, n: int) -> tuple[int, int]:
        """The stored fields of entry ``n``, which must exist."""
        with self._lock:
            index_map = self._current_map()
            if not 0 <= n < self._entries:
                raise IndexError(f"entry {n} of {self._path}, which has {self._entries} entries")
            return self._fields(index_map, n)

    def _fields(self, index_map: mmap.mmap | None, slot: int) -> tuple[int, int]:
        return self._ENTRY.unpack_from(index_map, slot * self.entry_size)

    def _last_fields(self) -> tuple[int, int] | None:
        """The stored fields of the last entry, None when there is none; the caller holds the
        lock."""
        if self._last is None and self._entries:
            self._last = self._fields(self._current_map(), self._entries - 1)
        return self._last

    def _append_fields(self, index_map: mmap.mmap | None, first: int, second: int) -> None:
        """Write one entry after the last; the caller holds the lock and has checked order."""
        entries = self._entries
        if entries >= self._max_entries:
            raise ValueError(f"cannot append to {self!r}: it is full")
        self._ENTRY.pack_into(index_map, entries * self.entry_size, first, second)
        self._entries = entries + 1
        self._last = (first, second)

    def _append_all_fields(
        self, index_map: mmap.mmap | None, fields: list[tuple[int, int]]
    ) -> None:
        """Write ``fields`` as entries after the last, in one go (recovery rebuilds an index this
        way); the caller holds the lock and has checked order."""
        if not fields:
            return
        if self._entries + len(fields) > self._max_entries:
            raise ValueError(f"cannot append {len(fields)} entries to {self!r}: it is full")
        codes = self._ENTRY.format.lstrip(">")
        packed = struct.pack(">" + codes * len(fields), *chain.from_iterable(fields))
        start = self.size_in_bytes
        index_map[start : start + len(packed)] = packed
        self._entries += len(fields)
        self._last = fields[-1]

    def _count_at_most(self, index_map: mmap.mmap | None, target: int, field: int) -> int:
        """How many entries have ``field`` <= ``target`` (the field must be sorted)."""
        entries = self._entries
        if entries == 0:
            return 0
        size = self.entry_size
        unpack_from = self._ENTRY.unpack_from

        def key(slot: int) -> int:
            return unpack_from(index_map, slot * size)[field]

        first_warm = max(0, entries - WARM_SECTION_BYTES // size)
        if key(first_warm) <= target:
            return bisect.bisect_right(range(entries), target, first_warm + 1, entries, key=key)
        return bisect.bisect_right(range(entries), target, 0, first_warm, key=key)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self._path} is closed")

    def _current_map(self) -> mmap.mmap | None:
        """The map (None for an empty file), mapped again if it was evicted; raises once the
        index is closed (a closed index holds no map)."""
        index_map = self._mmap
        if index_map is not None:
            IDLE_FILES.touch(self)
            return index_map
        self._check_open()
        if self._length:
            index_map = self._map_file("r+b" if self._writable else "rb")
        return index_map

    def _map_file(self, mode: str, new_length: int | None = None) -> mmap.mmap | None:
        """Map the file (resized to ``new_length`` first, if given) and close it. On a failure
        (no descriptor left) the index stays unmapped, its length that of the file, and
        the next use maps it again."""
        with open(self._path, mode) as file:
            if new_length is not None:
                file.truncate(new_length)
            length = os.fstat(file.fileno()).st_size
            self._length = length
            self._max_entries = length // self.entry_size  # read on every append: kept
            access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
            index_map = (
                mmap.mmap(file.fileno(), length, access=access, **_UNTRACKED_FD) if length else None
            )
        if index_map is not None:
            # Lookups are binary searches and appends touch one page at a time: readahead
            # only costs here. Without this the first touch of a fresh, preallocated index
            # reads ahead its whole sparse length (~2 ms for the default 10 MB).
            index_map.madvise(mmap.MADV_RANDOM)
        self._mmap = index_map
        if index_map is not None:
            IDLE_FILES.touch(self)
        return index_map  # (another thread may evict it from self._mmap at once)

    def _unmap(self) -> None:
        index_map, self._mmap = self._mmap, None
        if index_map is not None:
            index_map.close()

    def _round_down(self, size: int) -> int:
        return size - size % self.entry_size

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path}, entries={self._entries})"
