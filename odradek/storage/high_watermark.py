"""HighWatermark: the offset below which a partition's records are committed (Kafka's
``UnifiedLog.highWatermarkMetadata``; design §7).

A ``LogOffsetMetadata`` replaced whole, never mutated, so readers read ``metadata`` without a
lock. It moves under a lock of its own, not the log's: the event loop raising it after an
append does not wait for the next append (or a roll) holding the log's lock. Whoever holds both
takes the log's first. It never ends above the log end: a raise checks the log end under this
lock, and whatever lowers the log end (under the log's lock) lowers the HW under this one after
moving the end. The log end is the partition's LocalLog's; the log start offset, passed in,
the UnifiedLog's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from odradek.storage.local_log import LocalLog
from odradek.storage.log_offset_metadata import LogOffsetMetadata


class HighWatermark:
    """One partition's high watermark, with its position once resolved."""

    __slots__ = ("metadata", "lock", "_local")

    def __init__(self, metadata: LogOffsetMetadata, local: LocalLog) -> None:
        self.metadata = metadata
        """The HW: its offset, and its position once a read or an append resolved it."""
        self.lock = threading.Lock()
        """Held while ``metadata`` is replaced (the append path sets it under it directly)."""
        self._local = local

    def update(self, high_watermark: int, log_start_offset: int) -> int:
        """Set the HW, clamped into [``log_start_offset``, log end]; return the value set.
        The caller holds the log's lock."""
        with self.lock:
            end = self._local.next_offset_metadata
            if high_watermark >= end.message_offset:
                metadata = end
            else:
                metadata = LogOffsetMetadata(max(high_watermark, log_start_offset))
            self.metadata = metadata
            return metadata.message_offset

    def maybe_increment(self, new_high_watermark: LogOffsetMetadata) -> LogOffsetMetadata | None:
        """Move the HW forward (never back); return the old value when it moved. Does not
        wait for an append in progress. Called after every append, so the raise comes first;
        what it checks holds for every value set: the HW never above the log end."""
        offset = new_high_watermark.message_offset
        with self.lock:
            old = self.metadata
            if offset > old.message_offset:
                end = self._local.next_offset_metadata.message_offset
                if offset > end:
                    raise ValueError(
                        f"high watermark {offset} of {self._local.topic_partition} would be above "
                        f"the log end offset {end}"
                    )
                self.metadata = new_high_watermark
                return old
            # At or below the HW, so at or below the log end: it may still resolve or move
            # the HW's position.
            if offset == old.message_offset and (
                old.message_offset_only or old.on_older_segment(new_high_watermark)
            ):
                self.metadata = new_high_watermark
                return old
            return None

    def lower_to_log_end(self) -> None:
        """A HW at or above the log end moves to it (with its position): never above it."""
        end = self._local.next_offset_metadata
        with self.lock:
            if self.metadata.message_offset >= end.message_offset:
                self.metadata = end

    def set(self, metadata: LogOffsetMetadata) -> None:
        """Set the HW to ``metadata`` (the log restarted there, or the HW's position found)."""
        with self.lock:
            self.metadata = metadata

    def metadata_with_position(
        self,
        log_lock: threading.RLock,
        position_of: Callable[[int], LogOffsetMetadata],
    ) -> LogOffsetMetadata:
        """The HW with its on-disk position, found once by ``position_of`` (under the log's
        lock) when only its offset is known, and kept unless the HW moved meanwhile."""
        high_watermark = self.metadata
        if not high_watermark.message_offset_only:
            return high_watermark
        with log_lock:
            high_watermark = self.metadata
            if high_watermark.message_offset_only:
                resolved = position_of(high_watermark.message_offset)
                with self.lock:
                    if self.metadata is high_watermark:  # (not raised meanwhile)
                        self.metadata = resolved
                high_watermark = resolved
            return high_watermark
