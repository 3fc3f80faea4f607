"""CleanerCheckpointStore: where the cleaner keeps each log's first dirty offset."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from odradek.topic_partition import TopicPartition


class CleanerCheckpointStore(Protocol):
    """The ``cleaner-offset-checkpoint`` files of every log directory, as one map.

    The LogManager is one (it also drops a deleted topic's entries); on its own the cleaner
    uses :class:`~odradek.cleaner.cleaner_offset_checkpoints.CleanerOffsetCheckpoints`.
    """

    def cleaner_offsets(self) -> dict[TopicPartition, int]:
        """Every partition's checkpointed first dirty offset."""
        ...

    def update_cleaner_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Set these partitions' first dirty offsets, each in its log's directory."""
        ...
