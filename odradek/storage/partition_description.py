"""PartitionDescription: one partition's offsets, size and place, as describe reports them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class PartitionDescription:
    """A snapshot of one partition's log."""

    topic_partition: TopicPartition
    log_dir: Path
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    size_in_bytes: int
    number_of_segments: int

    @classmethod
    def of(cls, log: UnifiedLog) -> PartitionDescription:
        return cls(
            topic_partition=log.topic_partition,
            log_dir=log.dir.parent,
            log_start_offset=log.log_start_offset,
            high_watermark=log.high_watermark,
            log_end_offset=log.log_end_offset,
            size_in_bytes=log.size_in_bytes,
            number_of_segments=log.number_of_segments,
        )
