"""SegmentSnapshot: a live segment as the cleaning process needs to know it."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.storage.log_segment import LogSegment


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
    def of(cls, segment: LogSegment) -> SegmentSnapshot:
        return cls(
            base_offset=segment.base_offset,
            size=segment.size,
            offset_index_bytes=segment.offset_index.size_in_bytes,
            time_index_bytes=segment.time_index.size_in_bytes,
            last_modified_ms=segment.last_modified,
        )
