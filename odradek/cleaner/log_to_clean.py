"""LogToClean: a compacted log with its clean and dirty sizes (Kafka's ``LogToClean``)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class LogToClean:
    """``log`` split at ``first_dirty_offset`` into a clean tail and a dirty head, of which the
    part below ``first_uncleanable_offset`` (a segment's base offset) may be cleaned now;
    ``compaction_delay_ms`` is how long its oldest dirty record is overdue for cleaning."""

    log: UnifiedLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int = 0

    @classmethod
    def of(
        cls,
        log: UnifiedLog,
        first_dirty_offset: int,
        uncleanable_offset: int,
        compaction_delay_ms: int = 0,
    ) -> LogToClean:
        """Measure ``log``; cleaning stops at the base of the segment holding
        ``uncleanable_offset`` (whole segments are cleaned, never the active one)."""
        segments = log.segments
        floor = segments.floor_segment(uncleanable_offset)
        first_uncleanable_offset = floor.base_offset if floor else uncleanable_offset
        clean = segments.values_between(0, first_dirty_offset)
        cleanable = segments.values_between(
            min(first_dirty_offset, first_uncleanable_offset), first_uncleanable_offset
        )
        return cls(
            log=log,
            first_dirty_offset=first_dirty_offset,
            first_uncleanable_offset=first_uncleanable_offset,
            clean_bytes=sum(segment.size for segment in clean),
            cleanable_bytes=sum(segment.size for segment in cleanable),
            compaction_delay_ms=compaction_delay_ms,
        )

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic_partition

    @property
    def needs_compaction_now(self) -> bool:
        """Records are past ``max.compaction.lag.ms``: clean whatever the dirty ratio."""
        return self.compaction_delay_ms > 0

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """The dirty ratio: cleanable bytes over clean plus cleanable bytes."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0
