"""TimeIndex: a segment's sparse map from timestamps to offsets (design §5)."""

from __future__ import annotations

import mmap
import operator
import struct
from dataclasses import dataclass

from odradek.errors import InvalidOffsetError
from odradek.int_limits import INT32_MAX
from odradek.record.record_batch import NO_TIMESTAMP
from odradek.storage.abstract_index import AbstractIndex
from odradek.storage.segment_append_state import AppendState


@dataclass(frozen=True)
class TimestampOffset:
    """A timestamp and the offset from which on every record's timestamp may exceed it."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """Entries of 12 bytes: timestamp (int64), offset relative to the base offset (int32).

    An entry (T, O) says the largest timestamp before offset O is T: a record with a timestamp
    above T comes at or after O. Timestamps strictly increase and offsets never decrease, so a
    ListOffsets-by-time request finds where to start by binary search.
    """

    _ENTRY = struct.Struct(">qi")
    entry_size = _ENTRY.size
    _TIMESTAMP_FIELD = 0
    _OFFSET_FIELD = 1

    def _lent_entries(self, state: AppendState) -> int:
        return state.time_entries

    def _lent_last(self, state: AppendState) -> tuple[int, int] | None:
        return state.time_last

    @property
    def is_full(self) -> bool:
        """Full one entry early: the last slot is kept for the entry a roll appends."""
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset) when there is none."""
        with self._lock:
            last = self._last_fields()
            if last is None:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            return self._as_timestamp_offset(last)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (``timestamp``, ``offset``) if the timestamp is above the last entry's.

        A timestamp equal to the last one adds nothing (a roll and a close both append the
        segment's largest timestamp). Offsets and timestamps going backwards are errors.
        ``skip_full_check`` lets a roll use the slot ``is_full`` keeps back.
        """
        with self._lock:
            last = self._last
            if (
                last is not None
                and timestamp == last[0]
                and offset >= self._base_offset + last[1]
                and not self._closed
            ):
                return  # the segment's max timestamp has not grown: the usual case, kept cheap
            index_map = self._current_map()
            last = last or self._last_fields()
            if last is not None and timestamp == last[0] and offset >= self._base_offset + last[1]:
                return
            if not skip_full_check and self._entries >= self._max_entries - 1:  # is_full
                raise ValueError(f"cannot append to {self!r}: it is full")
            relative = offset - self._base_offset
            if last is None:
                if timestamp > NO_TIMESTAMP:
                    self._append_fields(index_map, timestamp, self.relative_offset(offset))
                return
            if relative < last[1]:
                raise InvalidOffsetError(
                    f"cannot append offset {offset} to {self._path}: it is below the last "
                    f"offset {self._base_offset + last[1]}"
                )
            if timestamp < last[0]:
                raise ValueError(
                    f"cannot append timestamp {timestamp} to {self._path}: it is below the last "
                    f"timestamp {last[0]}"
                )
            if timestamp > last[0]:
                if not 0 <= relative <= INT32_MAX:
                    self.relative_offset(offset)  # raises, naming the offset and the file
                self._append_fields(index_map, timestamp, relative)

    def maybe_append_all(self, entries: list[tuple[int, int]]) -> None:
        """Add each (timestamp, offset) of ``entries`` as :meth:`maybe_append` would, in one
        write: those whose timestamp is above the one before."""
        with self._lock:
            index_map = self._current_map()
            last = self.last_entry
            last_timestamp, last_offset = last.timestamp, last.offset
            fields = []
            for timestamp, offset in entries:
                if offset < last_offset or timestamp < last_timestamp:
                    raise InvalidOffsetError(
                        f"cannot append ({timestamp}, {offset}) to {self._path}: it is below "
                        f"the last entry ({last_timestamp}, {last_offset})"
                    )
                if timestamp > last_timestamp:
                    fields.append((timestamp, self.relative_offset(offset)))
                    last_timestamp, last_offset = timestamp, offset
            if self._entries + len(fields) > self._max_entries - 1:
                raise ValueError(f"cannot append {len(fields)} entries to {self!r}: it is full")
            self._append_all_fields(index_map, fields)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry whose timestamp is <= ``target_timestamp``, else (-1, base offset)."""
        with self._lock:
            index_map = self._current_map()
            slot = self._count_at_most(index_map, target_timestamp, self._TIMESTAMP_FIELD) - 1
            if slot < 0:
                return TimestampOffset(NO_TIMESTAMP, self._base_offset)
            return self._as_timestamp_offset(self._fields(index_map, slot))

    def entry(self, n: int) -> TimestampOffset:
        """The ``n``-th entry (from 0)."""
        return self._as_timestamp_offset(self._entry_fields(n))

    def _as_timestamp_offset(self, fields: tuple[int, int]) -> TimestampOffset:
        timestamp, relative_offset = fields
        return TimestampOffset(timestamp, self._base_offset + relative_offset)

    def _check_order(self, index_map: mmap.mmap) -> None:
        self._check_sorted(
            index_map, self._TIMESTAMP_FIELD, operator.ge, "timestamps must strictly increase"
        )
        self._check_sorted(
            index_map, self._OFFSET_FIELD, operator.gt, "relative offsets must not decrease"
        )
