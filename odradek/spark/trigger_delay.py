"""minOffsetsPerTrigger with maxTriggerDelay: hold micro-batches back until enough is waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class TriggerDelay:
    """Whether a micro-batch waits, as Spark's Kafka source decides it: a batch runs when at
    least ``min_offsets`` offsets are waiting, or when ``max_delay_s`` has passed since the last
    one ran (the query's first batch runs at once). A trigger with nothing waiting runs no batch
    either way, and does not count as one."""

    min_offsets: int
    max_delay_s: float
    clock: Callable[[], float] = time.monotonic
    _last_batch: float | None = field(default=None, init=False)

    def holds_back(self, waiting: int) -> bool:
        """Called at each trigger with the offsets waiting; False when a batch is to run."""
        if waiting <= 0:
            return False
        now = self.clock()
        last = self._last_batch
        if waiting >= self.min_offsets or last is None or now - last >= self.max_delay_s:
            self._last_batch = now
            return False
        return True
