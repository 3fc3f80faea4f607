"""Wall-clock source for the storage layer, replaceable in tests (Kafka's ``Time``)."""

from __future__ import annotations

import time


class Clock:
    """The system clock."""

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return time.monotonic_ns()


class MockClock(Clock):
    """A clock that moves only when told to, for retention and roll tests."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms

    def milliseconds(self) -> int:
        return self._now_ms

    def nanoseconds(self) -> int:
        return self._now_ms * 1_000_000

    def sleep(self, ms: int) -> None:
        self._now_ms += ms


SYSTEM_CLOCK = Clock()
