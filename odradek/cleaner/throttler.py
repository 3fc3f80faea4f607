"""Throttler: holds a stream of work to a rate by sleeping (Kafka's ``Throttler``)."""

from __future__ import annotations

import time
from collections.abc import Callable

CHECK_INTERVAL_S = 0.3  # Kafka's cleaner checks its I/O rate every 300 ms


class Throttler:
    """Call :meth:`maybe_throttle` with each amount of work done; once per check interval it
    sleeps as long as it takes to bring the observed rate down to ``desired_rate_per_sec``."""

    def __init__(
        self,
        desired_rate_per_sec: float,
        check_interval_s: float = CHECK_INTERVAL_S,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec
        self._check_interval_s = check_interval_s
        self._monotonic = monotonic
        self._sleep = sleep
        self._period_start = monotonic()
        self._observed = 0.0
        self.slept_s = 0.0  # in all, since it was made

    def maybe_throttle(self, observed: float) -> None:
        self._observed += observed
        elapsed = self._monotonic() - self._period_start
        if elapsed <= self._check_interval_s or self._observed <= 0:
            return
        if self._observed / elapsed > self.desired_rate_per_sec:
            sleep_s = self._observed / self.desired_rate_per_sec - elapsed
            if sleep_s > 0:
                self._sleep(sleep_s)
                self.slept_s += sleep_s
        self._period_start = self._monotonic()
        self._observed = 0.0
