"""SegmentSnapshot: a live segment as the cleaning process needs to know it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.log_segment import LogSegment
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.time_index import TimeIndex


@dataclass(frozen=True)
class SegmentSnapshot:
    """A segment's base offset, sizes and last-modified time when the run was planned.

    Segments below the active one do not change while they are cleaned, so the cleaning
    process reads the ``size`` bytes of the file named by ``base_offset`` and no more.
    """

    base_offset: int
    size: int
    offset_index_bytes: int
    time_index_bytes: int
    last_modified_ms: int

    @classmethod
    def of(cls, segment: LogSegment, max_index_size: int) -> SegmentSnapshot:
        """The snapshot of a segment below the active one, whose indexes hold at most
        ``max_index_size`` bytes (``segment.index.bytes``).

        Index sizes are read from the files' lengths: a segment's indexes are trimmed to their
        entries when it stops being active or is recovered, and they open lazily; opening and
        checking them here would cost the broker about a tenth of a millisecond for every
        segment a previous run swapped in. A length can only overstate the entries (which then
        makes groups smaller, never too big); a file with no room left (one still preallocated,
        as a crash leaves it before recovery) or none is opened instead.
        """
        return cls(
            base_offset=segment.base_offset,
            size=segment.size,
            offset_index_bytes=_index_bytes(
                segment.offset_index_path,
                OffsetIndex.entry_size,
                max_index_size,
                lambda: segment.offset_index.size_in_bytes,
            ),
            time_index_bytes=_index_bytes(
                segment.time_index_path,
                TimeIndex.entry_size,
                max_index_size,
                lambda: segment.time_index.size_in_bytes,
            ),
            last_modified_ms=segment.last_modified,
        )


def _index_bytes(
    path: Path, entry_size: int, max_index_size: int, opened_size: Callable[[], int]
) -> int:
    """The bytes used by the entries of the index at ``path``: its whole entries when it has
    room for one more, else ``opened_size()``."""
    try:
        length = os.stat(path).st_size
    except FileNotFoundError:
        return opened_size()
    if length + entry_size > max_index_size:
        return opened_size()
    return length // entry_size * entry_size
