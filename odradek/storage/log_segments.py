"""LogSegments: a partition's segments ordered by base offset, safe for concurrent readers."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from odradek.storage.log_segment import LogSegment


class LogSegments:
    """The segment map of one UnifiedLog (Kafka's ``LogSegments``).

    Writers replace an immutable snapshot (a sorted tuple of base offsets and a dict); readers
    take the current snapshot without a lock and never see a half-made change.
    """

    def __init__(self) -> None:
        self._snapshot: tuple[tuple[int, ...], dict[int, LogSegment]] = ((), {})
        self.last: LogSegment | None = None
        """The segment with the largest base offset (the active one), None when there is
        none: an attribute, not a property, because every append reads it (under the UnifiedLog's
        lock, which every change here is made under as well)."""

    @property
    def _bases(self) -> tuple[int, ...]:
        return self._snapshot[0]

    @property
    def _by_base(self) -> dict[int, LogSegment]:
        return self._snapshot[1]

    def add(self, segment: LogSegment) -> None:
        """Add ``segment``, replacing any segment with the same base offset."""
        by_base = dict(self._by_base)
        by_base[segment.base_offset] = segment
        self._publish(by_base)

    def remove(self, base_offset: int) -> None:
        by_base = dict(self._by_base)
        by_base.pop(base_offset, None)
        self._publish(by_base)

    def clear(self) -> None:
        self._publish({})

    def _publish(self, by_base: dict[int, LogSegment]) -> None:
        bases = tuple(sorted(by_base))
        self._snapshot = (bases, by_base)
        self.last = by_base[bases[-1]] if bases else None

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_base.get(base_offset)

    def contains(self, base_offset: int) -> bool:
        return base_offset in self._by_base

    @property
    def is_empty(self) -> bool:
        return not self._bases

    @property
    def number_of_segments(self) -> int:
        return len(self._bases)

    @property
    def size_in_bytes(self) -> int:
        by_base = self._by_base
        return sum(segment.size for segment in by_base.values())

    @property
    def base_offsets(self) -> tuple[int, ...]:
        return self._bases

    def values(self) -> list[LogSegment]:
        bases, by_base = self._snapshot
        return [by_base[base] for base in bases]

    def values_between(self, from_offset: int, to_offset: int) -> list[LogSegment]:
        """Segments that may hold offsets in ``[from_offset, to_offset)``."""
        bases, by_base = self._snapshot
        start = max(0, bisect_right(bases, from_offset) - 1)
        end = bisect_left(bases, to_offset)
        return [by_base[base] for base in bases[start:end]]

    @property
    def first_segment(self) -> LogSegment | None:
        bases, by_base = self._snapshot
        return by_base[bases[0]] if bases else None

    @property
    def active_segment(self) -> LogSegment:
        last = self.last
        if last is None:
            raise LookupError("the log has no segment")
        return last

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        bases, by_base = self._snapshot
        index = bisect_right(bases, offset) - 1
        return by_base[bases[index]] if index >= 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        bases, by_base = self._snapshot
        index = bisect_right(bases, offset)
        return by_base[bases[index]] if index < len(bases) else None

    def non_active(self) -> list[LogSegment]:
        return self.values()[:-1]

    def close(self) -> None:
        for segment in self.values():
            segment.close()

    def __iter__(self) -> Iterable[LogSegment]:
        return iter(self.values())

    def __len__(self) -> int:
        return len(self._bases)
