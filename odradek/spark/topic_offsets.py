"""What the broker knows about the topics read: their partitions and offset bounds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self

from odradek.client import Admin
from odradek.errors import UnknownTopicOrPartitionError, error_for_code
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.spark.offset_spec import OffsetSpec
from odradek.topic_partition import TopicPartition


class TopicOffsets:
    """Looks up partitions and their earliest and latest offsets through the admin client.

    Latest is the high watermark: the offset after the last record a consumer may read.
    """

    def __init__(self, **configs: Any) -> None:
        self._admin = Admin(**configs)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def partitions(self, topics: Iterable[str] | None) -> list[TopicPartition]:
        """Every partition of those of ``topics`` (None: of all topics) that exist; other
        broker errors raise."""
        response = self._admin.metadata(topics)
        found = []
        for topic in response.topics:
            if topic.error == UnknownTopicOrPartitionError.code:
                continue
            if topic.error:
                raise error_for_code(topic.error, topic.message or f"topic {topic.name!r}")
            found += [TopicPartition(topic.name, p.partition) for p in topic.partitions]
        return sorted(found)

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return self._offsets(partitions, EARLIEST_TIMESTAMP)

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition."""
        return self._offsets(partitions, LATEST_TIMESTAMP)

    def found_for(
        self, spec: OffsetSpec, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """For a timestamp ``spec``, the first offset of each partition whose record has a
        timestamp at or after the spec's (-1: none); empty for any other spec."""
        return self._offsets_at(spec.timestamps_for(list(partitions)))

    def close(self) -> None:
        self._admin.close()

    def _offsets(
        self, partitions: Iterable[TopicPartition], target: int
    ) -> dict[TopicPartition, int]:
        return self._offsets_at(dict.fromkeys(partitions, target))

    def _offsets_at(self, targets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The offset the broker lists for each partition's target timestamp (or EARLIEST /
        LATEST)."""
        if not targets:
            return {}
        found = self._admin.list_offsets(targets)
        return {tp: entry.offset for tp, entry in found.items()}
