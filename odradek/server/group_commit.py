"""GroupCommit: acks=all producers of one partition share fsyncs instead of queueing their own."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial

from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.unified_log import UnifiedLog


class GroupCommit:
    """Makes a partition's appends durable for the producers waiting on them.

    At most one flush of the partition runs at a time, on ``executor`` (an fsync never runs on
    the event loop). It covers the log end at the moment it starts, so every producer already
    waiting is answered by it; producers arriving while it runs are covered by the next one,
    started as soon as it ends. However many producers wait, the partition costs one fsync per
    flush window, not one per request.

    The flush also makes durable the directory entries of the partition's files created since
    the last one (``UnifiedLog.flush``): the first acks=all append into a new segment is answered
    only once the segment's name survives a power cut, for one directory fsync per roll, shared here
    like the segments' own.
    """

    def __init__(
        self,
        log: UnifiedLog,
        executor: Executor,
        on_flushed: Callable[[LogOffsetMetadata], None],
    ) -> None:
        self._log = log
        self._executor = executor
        self._on_flushed = on_flushed
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._flushing: asyncio.Future[None] | None = None

    def durable(self, last_offset: int) -> asyncio.Future[None]:
        """A future done once every offset up to ``last_offset`` is fsync'ed; it fails with
        the flush's error (KafkaStorageError) if the flush fails."""
        waiter = asyncio.get_running_loop().create_future()
        if last_offset < self._log.recovery_point:
            waiter.set_result(None)
            return waiter
        waiter.add_done_callback(_read_outcome)
        self._waiters.append((last_offset, waiter))
        if self._flushing is None:
            self._start_flush()
        return waiter

    def _start_flush(self) -> None:
        end = self._log.log_end_offset_metadata
        flush = self._executor.submit(self._log.flush, end.message_offset)
        self._flushing = asyncio.wrap_future(flush)
        self._flushing.add_done_callback(partial(self._flushed, end))

    def _flushed(self, end: LogOffsetMetadata, flushing: asyncio.Future[None]) -> None:
        self._flushing = None
        error = flushing.exception()
        if error is None:
            self._on_flushed(end)
        waiters = self._waiters
        while waiters and waiters[0][0] < end.message_offset:
            _, waiter = waiters.popleft()
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
        if waiters:
            self._start_flush()


def _read_outcome(waiter: asyncio.Future[None]) -> None:
    """Read a waiter's failure, so that one nobody awaits any more (its producer went away,
    its request timed out) is not reported as an exception never retrieved; a producer still
    waiting gets it all the same."""
    if not waiter.cancelled():
        waiter.exception()
