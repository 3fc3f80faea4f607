"""LogOffsetMetadata: an offset plus, where known, where it sits on disk (design §1)."""

from __future__ import annotations

from typing import NamedTuple

UNKNOWN_OFFSET = -1


class LogOffsetMetadata(NamedTuple):
    """``message_offset`` and its segment and byte position, so reads can bound by bytes.

    The position is unknown (-1) for offsets restored from a checkpoint until a read resolves it.
    A named tuple: every append makes one (the new log end), at half the cost of a frozen
    dataclass.
    """

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_OFFSET

    @property
    def message_offset_only(self) -> bool:
        return (
            self.segment_base_offset == UNKNOWN_OFFSET
            and self.relative_position_in_segment == UNKNOWN_OFFSET
        )

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        self._require_position()
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        self._require_position()
        return self.segment_base_offset == other.segment_base_offset

    def _require_position(self) -> None:
        if self.message_offset_only:
            raise ValueError(f"{self} has no segment position")
