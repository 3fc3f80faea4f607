"""The unit of work of a read: one topic-partition's offsets [start, end)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets [start, end) of one topic-partition: one Spark input partition.

    It carries explicit offsets, never earliest or latest, so reading it again reads the same
    records (unless retention deleted some meanwhile).
    """

    topic: str
    partition: int
    start: int
    end: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)

    def split(self, parts: int) -> list[OffsetRange]:
        """``parts`` consecutive ranges of (nearly) equal size covering this one."""
        ranges = []
        start, remaining = self.start, self.size
        for part in range(parts):
            length = remaining // (parts - part)
            remaining -= length
            ranges.append(OffsetRange(self.topic, self.partition, start, start + length))
            start += length
        return ranges


def offset_ranges(
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """The non-empty ranges from ``starts`` to ``ends``, split up to ``min_partitions``."""
    ranges = [OffsetRange(tp.topic, tp.partition, starts[tp], ends[tp]) for tp in sorted(ends)]
    return [r for r in split_ranges(ranges, min_partitions) if r.size > 0]


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges in proportion to their size until there are about ``min_partitions``.

    As Spark's Kafka source does (rounding half up): nothing is split when there are already
    enough ranges, and each range keeps at least one part.
    """
    total = sum(r.size for r in ranges)
    if min_partitions is None or len(ranges) >= min_partitions or total == 0:
        return list(ranges)
    return [
        part for r in ranges for part in r.split(max(int(r.size / total * min_partitions + 0.5), 1))
    ]
