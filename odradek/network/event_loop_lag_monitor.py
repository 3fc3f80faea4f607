"""EventLoopLagMonitor: how long the event loop is held up by work that does not yield."""

from __future__ import annotations

import asyncio
import contextlib

from prometheus_client import Histogram

DEFAULT_INTERVAL_S = 0.01


class EventLoopLagMonitor:
    """Sleeps ``interval_s`` again and again and records how much later than asked it woke.

    A late wake-up is time some callback kept the loop busy: every connection waited that long.
    """

    def __init__(self, histogram: Histogram, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self._histogram = histogram
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="event-loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time() + self._interval_s
            await asyncio.sleep(self._interval_s)
            self._histogram.observe(max(0.0, loop.time() - asked))
