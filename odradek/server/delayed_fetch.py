"""DelayedFetch: a fetch waiting until ``min_bytes`` can be returned (Kafka's DelayedFetch)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.protocol.values.wire_types import stored_at_once
from odradek.server.partition import Partition
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.topic_partition import TopicPartition


@stored_at_once
@dataclass(frozen=True)
class FetchPartitionStatus:
    """Where one partition's read of the fetch stood when it began waiting."""

    partition: Partition
    fetch_offset: LogOffsetMetadata
    max_bytes: int


class DelayedFetch:
    """Completes when its partitions hold ``min_bytes`` past their fetch offsets, or when one
    of them changed in a way only a new read can answer; the purgatory also completes it at
    its deadline. Counting bytes needs no read: it is the distance between two positions.
    """

    def __init__(
        self,
        statuses: Sequence[FetchPartitionStatus],
        min_bytes: int,
        isolation: FetchIsolation,
    ) -> None:
        self._statuses = statuses
        self._min_bytes = min_bytes
        self._isolation = isolation
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    @property
    def keys(self) -> list[TopicPartition]:
        return [status.partition.topic_partition for status in self._statuses]

    def try_complete(self) -> bool:
        """Complete if there is enough to return now; True when complete."""
        if not self.future.done() and self._ready():
            self.future.set_result(None)
        return self.future.done()

    def force_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def _ready(self) -> bool:
        accumulated = 0
        for status in self._statuses:
            end = status.partition.end_offset_metadata(self._isolation)
            fetch = status.fetch_offset
            if end.message_offset == fetch.message_offset:
                continue
            if (
                end.message_offset < fetch.message_offset
                or end.message_offset_only
                or fetch.message_offset_only
                or not end.on_same_segment(fetch)
            ):
                return True  # truncated, rolled, or position unknown: a read tells
            position_diff = end.relative_position_in_segment - fetch.relative_position_in_segment
            accumulated += min(position_diff, status.max_bytes)
        return accumulated >= self._min_bytes
