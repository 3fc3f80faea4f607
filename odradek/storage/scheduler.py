"""Scheduler: background threads that run one-off and periodic storage tasks (Kafka's
``KafkaScheduler``): delayed segment deletion, flushes after a roll, retention, checkpoints.

Tasks run off the caller's event loop; an exception in a task is logged and never stops the
scheduler or a periodic task's next run.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass(order=True)
class ScheduledTask:
    """A task waiting for its time; ``cancel()`` stops future runs."""

    due_monotonic: float
    sequence: int
    name: str = field(compare=False)
    function: Callable[[], object] = field(compare=False, repr=False)
    period_s: float | None = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    """A fixed pool of daemon threads draining a time-ordered queue of tasks."""

    def __init__(self, threads: int = 1, thread_name_prefix: str = "odradek-scheduler") -> None:
        self._thread_count = threads
        self._thread_name_prefix = thread_name_prefix
        self._queue: list[ScheduledTask] = []
        self._condition = threading.Condition()
        self._sequence = itertools.count()
        self._threads: list[threading.Thread] = []
        self._running = False

    def startup(self) -> None:
        with self._condition:
            if self._running:
                return
            self._running = True
        for number in range(self._thread_count):
            thread = threading.Thread(
                target=self._work, name=f"{self._thread_name_prefix}-{number}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def schedule(
        self,
        name: str,
        function: Callable[[], object],
        delay_ms: int = 0,
        period_ms: int = -1,
    ) -> ScheduledTask:
        """Run ``function`` after ``delay_ms``, then every ``period_ms`` when that is > 0."""
        task = ScheduledTask(
            due_monotonic=time.monotonic() + max(0, delay_ms) / 1000,
            sequence=next(self._sequence),
            name=name,
            function=function,
            period_s=period_ms / 1000 if period_ms > 0 else None,
        )
        with self._condition:
            heapq.heappush(self._queue, task)
            self._condition.notify()
        return task

    def shutdown(self, run_pending_one_offs: bool = False) -> None:
        """Stop the threads; with ``run_pending_one_offs`` first run queued one-off tasks now
        (e.g. delayed deletions) on the calling thread."""
        with self._condition:
            self._running = False
            pending = [task for task in self._queue if task.period_s is None and not task.cancelled]
            self._queue.clear()
            self._condition.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        if run_pending_one_offs:
            for task in sorted(pending):
                self._run(task)

    def _work(self) -> None:
        while True:
            task = self._next_due_task()
            if task is None:
                return
            self._run(task)
            if task.period_s is not None and not task.cancelled:
                with self._condition:
                    if self._running:
                        task.due_monotonic = time.monotonic() + task.period_s
                        heapq.heappush(self._queue, task)
                        self._condition.notify()

    def _next_due_task(self) -> ScheduledTask | None:
        with self._condition:
            while self._running:
                if not self._queue:
                    self._condition.wait()
                    continue
                task = self._queue[0]
                if task.cancelled:
                    heapq.heappop(self._queue)
                    continue
                wait_s = task.due_monotonic - time.monotonic()
                if wait_s <= 0:
                    return heapq.heappop(self._queue)
                self._condition.wait(wait_s)
            return None

    @staticmethod
    def _run(task: ScheduledTask) -> None:
        try:
            task.function()
        except Exception:
            logger.exception("scheduled task %r failed", task.name)
