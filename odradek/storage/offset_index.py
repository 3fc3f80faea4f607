"""OffsetIndex: a segment's sparse map from offsets to byte positions in its ``.log``
(design §5)."""

from __future__ import annotations

import mmap
import operator
import struct
from dataclasses import dataclass

from odradek.errors import InvalidOffsetError
from odradek.int_limits import INT32_MAX
from odradek.storage.abstract_index import AbstractIndex
from odradek.storage.segment_append_state import AppendState


@dataclass(frozen=True)
class OffsetPosition:
    """An offset and the byte position in the segment's ``.log`` of the batch holding it."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """Entries of 8 bytes: offset relative to the base offset (int32), file position (int32).

    Offsets strictly increase and positions never decrease, so a read finds where to start
    scanning the ``.log`` by binary search instead of reading the segment from the top.
    """

    _ENTRY = struct.Struct(">ii")
    entry_size = _ENTRY.size
    _OFFSET_FIELD = 0
    _POSITION_FIELD = 1

    def _lent_entries(self, state: AppendState) -> int:
        return state.offset_entries

    def _lent_last(self, state: AppendState) -> tuple[int, int] | None:
        return state.offset_last

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when there is none."""
        with self._lock:
            last = self._last_fields()
            return self._base_offset if last is None else self._base_offset + last[0]

    def append(self, offset: int, position: int) -> None:
        """Add ``offset`` at byte ``position``; the offset must be above the last one."""
        with self._lock:
            index_map = self._current_map()
            last = self._last or self._last_fields()
            relative = offset - self._base_offset
            if last is not None and relative <= last[0]:
                raise InvalidOffsetError(
                    f"cannot append offset {offset} to {self._path}: it is not above the last "
                    f"offset {self._base_offset + last[0]}"
                )
            if not 0 <= position <= INT32_MAX:
                raise ValueError(f"position {position} does not fit an int32 index entry")
            if not 0 <= relative <= INT32_MAX:
                self.relative_offset(offset)  # raises, naming the offset and the file
            self._append_fields(index_map, relative, position)

    def append_all(self, entries: list[tuple[int, int]]) -> None:
        """Add each (offset, position) of ``entries`` as :meth:`append` would, in one write."""
        with self._lock:
            index_map = self._current_map()
            last_offset = self.last_offset if self._entries else self._base_offset - 1
            fields = []
            for offset, position in entries:
                if offset <= last_offset:
                    raise InvalidOffsetError(
                        f"cannot append offset {offset} to {self._path}: it is not above the "
                        f"last offset {last_offset}"
                    )
                if not 0 <= position <= INT32_MAX:
                    raise ValueError(f"position {position} does not fit an int32 index entry")
                fields.append((self.relative_offset(offset), position))
                last_offset = offset
            self._append_all_fields(index_map, fields)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry whose offset is <= ``target_offset``, else (base offset, 0)."""
        with self._lock:
            index_map = self._current_map()
            relative_target = target_offset - self._base_offset
            slot = self._count_at_most(index_map, relative_target, self._OFFSET_FIELD) - 1
            if slot < 0:
                return OffsetPosition(self._base_offset, 0)
            return self._as_position(self._fields(index_map, slot))

    def fetch_upper_bound_offset(
        self, fetch_offset: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry at or past ``fetch_size`` bytes after ``fetch_offset``, if any.

        A fetch starting at ``fetch_offset`` cannot reach beyond it, so it bounds the bytes
        to scan.
        """
        with self._lock:
            index_map = self._current_map()
            upper_bound = fetch_offset.position + fetch_size
            slot = self._count_at_most(index_map, upper_bound - 1, self._POSITION_FIELD)
            if slot == self._entries:
                return None
            return self._as_position(self._fields(index_map, slot))

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry (from 0)."""
        return self._as_position(self._entry_fields(n))

    def _as_position(self, fields: tuple[int, int]) -> OffsetPosition:
        relative_offset, position = fields
        return OffsetPosition(self._base_offset + relative_offset, position)

    def _check_order(self, index_map: mmap.mmap) -> None:
        self._check_sorted(
            index_map, self._OFFSET_FIELD, operator.ge, "relative offsets must strictly increase"
        )
        self._check_sorted(
            index_map, self._POSITION_FIELD, operator.gt, "positions must not decrease"
        )
