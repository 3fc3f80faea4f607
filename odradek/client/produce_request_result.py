"""The outcome of one batch's produce request, shared by the futures of all its records."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from odradek.errors import KafkaError


class ProduceRequestResult:
    """Set once, on the event loop thread, when the batch is acknowledged or has failed.

    Waiting works from any thread (:meth:`wait`); callbacks run on the thread that completes
    the result, or at once if it is already complete.
    """

    __slots__ = ("_done", "_lock", "_callbacks", "base_offset", "log_append_time_ms", "error")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: KafkaError | None = None

    @property
    def is_done(self) -> bool:
        return self._done.is_set()

    def complete(self, base_offset: int, log_append_time_ms: int, error: KafkaError | None) -> None:
        """Record the outcome and run the callbacks; later calls are ignored."""
        with self._lock:
            if self._done.is_set():
                return
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until complete or ``timeout`` seconds; whether it completed."""
        return self._done.wait(timeout)

    async def completion(self) -> None:
        """Wait without blocking the event loop (the loop that completes this result)."""
        if not self._done.is_set():
            waiter = asyncio.get_running_loop().create_future()
            self.add_callback(lambda: waiter.done() or waiter.set_result(None))
            await waiter

    def add_callback(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback()
