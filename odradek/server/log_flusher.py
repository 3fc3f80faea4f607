"""LogFlusher: the acks=all fsyncs on threads of their own, each answered on the loop in one hop."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue

from odradek.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)

Flushed = Callable[[BaseException | None], None]
"""Called on the event loop once a flush has ended: with its error, or None."""


class LogFlusher:
    """Runs ``UnifiedLog.flush`` for the partitions' group commits, never on the event loop.

    A flush is queued with ``flush`` (a put on a queue that wakes one idle flush thread) and
    its end is handed back to the loop with one ``call_soon_threadsafe``: no executor future,
    no future chained onto the loop, one wake-up of each side per fsync. ``threads`` flushes
    (of different partitions: a partition's group commit runs one at a time) may run at once.

    ``commit_linger_s`` is how long a group commit may hold a flush back for the requests it
    expects to join it (``log.flush.commit.linger.ms``, see GroupCommit).
    """

    def __init__(self, threads: int, commit_linger_ms: int = 0) -> None:
        self.commit_linger_s = commit_linger_ms / 1000
        self._size = threads
        self._queue: SimpleQueue[
            tuple[asyncio.AbstractEventLoop, UnifiedLog, int, Flushed] | None
        ] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shut_down = False

    def flush(
        self, loop: asyncio.AbstractEventLoop, log: UnifiedLog, offset: int, flushed: Flushed
    ) -> None:
        """fsync ``log`` up to ``offset`` on a flush thread, then call ``flushed`` on ``loop``.
        Raises RuntimeError once shut down (as an executor's submit does)."""
        if self._shut_down:
            raise RuntimeError("the log flusher is shut down")
        if not self._threads:
            self._start_threads()
        self._queue.put((loop, log, offset, flushed))

    def shutdown(self) -> None:
        """Let the queued flushes run, then end the threads (blocking)."""
        with self._lock:
            self._shut_down = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        for thread in threads:
            thread.join()

    def _start_threads(self) -> None:
        with self._lock:
            if self._threads or self._shut_down:
                return
            for number in range(self._size):
                thread = threading.Thread(
                    target=self._run, name=f"odradek-flush_{number}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _run(self) -> None:
        queue = self._queue
        while (item := queue.get()) is not None:
            loop, log, offset, flushed = item
            error: BaseException | None = None
            try:
                log.flush(offset)
            except BaseException as failure:  # handed to the waiters, as a future would
                error = failure
            try:
                loop.call_soon_threadsafe(flushed, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                logger.debug("[%s] flush ended after its event loop closed", log.topic_partition)
            del item, loop, log, flushed, error
