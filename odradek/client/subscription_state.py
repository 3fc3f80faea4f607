"""The partitions a consumer reads and, for each, where it reads next."""

from __future__ import annotations

from collections.abc import Iterable

from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.topic_partition import TopicPartition

RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


class SubscriptionState:
    """Assigned partitions with their positions: an offset, or a pending reset.

    A partition without a position is reset by ``auto_offset_reset`` (there are no committed
    offsets); ``seek_to_beginning``/``seek_to_end`` request a reset explicitly. Resets are
    carried out lazily, on the next poll or position lookup.
    """

    def __init__(self, auto_offset_reset: str) -> None:
        self._default_reset = RESET_TIMESTAMPS.get(auto_offset_reset)
        self._positions: dict[TopicPartition, int | None] = {}
        self._resets: dict[TopicPartition, int] = {}

    @property
    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly ``partitions`` from now on; ones already assigned keep their position."""
        positions = {tp: self._positions.get(tp) for tp in partitions}
        self._positions = positions
        self._resets = {tp: ts for tp, ts in self._resets.items() if tp in positions}

    def is_assigned(self, partition: TopicPartition) -> bool:
        return partition in self._positions

    def position(self, partition: TopicPartition) -> int | None:
        """The next offset to read, or None until a reset has run."""
        self._check_assigned(partition)
        return self._positions[partition]

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._check_assigned(partition)
        if offset < 0:
            raise ValueError(f"cannot seek {partition} to negative offset {offset}")
        self._positions[partition] = offset
        self._resets.pop(partition, None)

    def request_reset(self, partition: TopicPartition, timestamp: int) -> None:
        """Move to the offset for ``timestamp`` (EARLIEST/LATEST_TIMESTAMP) on the next poll."""
        self._check_assigned(partition)
        self._positions[partition] = None
        self._resets[partition] = timestamp

    def resets_due(self) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
        """Partitions to reset with their target timestamps, and those with no way to reset."""
        due: dict[TopicPartition, int] = {}
        stuck = []
        for tp, position in self._positions.items():
            if position is not None:
                continue
            timestamp = self._resets.get(tp, self._default_reset)
            if timestamp is None:
                stuck.append(tp)
            else:
                due[tp] = timestamp
        return due, stuck

    def all_positioned(self) -> bool:
        """Whether every assigned partition has a position (no reset is waiting)."""
        return None not in self._positions.values()

    def fetch_positions(self) -> dict[TopicPartition, int]:
        """Every assigned partition that has a position, with it."""
        return {tp: p for tp, p in self._positions.items() if p is not None}

    def _check_assigned(self, partition: TopicPartition) -> None:
        if partition not in self._positions:
            raise ValueError(f"{partition} is not assigned to this consumer")
