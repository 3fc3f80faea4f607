"""The background event loop the sync clients run their asyncio cores on.

One daemon thread per process runs one uvloop event loop, started on first use and shared by
every sync Producer, Consumer and Admin: their network I/O all happens there, while their
callers block on the results. A daemon thread does not keep the process alive, so close sync
clients (or use them as context managers) to flush what they hold.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


class EventLoopThread:
    """A thread running an event loop forever, and ways to hand it work from other threads."""

    def __init__(self, name: str = "odradek-client-loop") -> None:
        self.loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def is_current(self) -> bool:
        """Whether the caller is running on this loop's thread."""
        return threading.current_thread() is self._thread

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and block until its result (or ``timeout`` seconds).

        On timeout the coroutine is cancelled and TimeoutError raised. Calling this from the
        loop's own thread would deadlock, so it raises RuntimeError instead.
        """
        if self.is_current:
            coroutine.close()
            raise RuntimeError("a sync client was called from its own event loop thread")
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no result within {timeout}s") from None

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call a plain function on the loop thread and return its result.

        For what must happen where the loop runs: creating an asyncio client, touching state
        its tasks share.
        """
        return self.run(_call(function, *args, **kwargs))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()


async def _call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return function(*args, **kwargs)


_shared: EventLoopThread | None = None
_shared_lock = threading.Lock()


def shared_event_loop_thread() -> EventLoopThread:
    """The process's event loop thread, started on the first call."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = EventLoopThread()
        return _shared
