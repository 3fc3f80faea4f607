"""CoordinatorTasks: the group coordinator's own background work (writes to
``__consumer_offsets`` and what follows them), run to its end even when the request that
started it goes away, and awaited at shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


class CoordinatorTasks:
    """The running tasks; they belong to the coordinator, not to any connection."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, group_id: str, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` for ``group_id`` to its end; a failure nobody awaits is logged."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._done(group_id, done))
        return task

    def _done(self, group_id: str, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning(
                "group %s: coordinator background work failed: %s", group_id, task.exception()
            )

    async def wait_all(self) -> None:
        """Wait for every task running now (their failures are logged, not raised)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
