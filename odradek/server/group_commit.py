"""GroupCommit: acks=all producers of one partition share fsyncs instead of queueing their own."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from functools import partial

from odradek.server.log_flusher import LogFlusher
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.unified_log import UnifiedLog

Durable = Callable[[BaseException | None], None]
"""Called on the event loop once an offset is fsync'ed (None), or its flush failed (the error)."""


class GroupCommit:
    """Makes a partition's appends durable for the producers waiting on them.

    At most one flush of the partition runs at a time, on the ``flusher``'s threads (an fsync
    never runs on the event loop). It covers the log end at the moment it starts, so every
    producer already waiting is answered by it; producers arriving while it runs are covered
    by the next one. However many producers wait, the partition costs one fsync per flush,
    not one per request.

    When to start the next flush: a producer answered by a flush sends its next request about
    one client turn-around later (the Java client keeps up to five in flight a partition, and
    sends again as soon as it reads the answers). Started at once, the next flush would cover
    only the requests that arrived while the last one ran, and the answered ones would wait for
    the one after: the partition falls into a rhythm of a lone request's fsync and a shared
    one's (measured: 2.4 requests an fsync with five in flight). So after a flush the commit
    expects as many requests as were waiting (the ones answered, and the ones that came
    meanwhile), and holds the next flush back until that many wait or ``commit_linger_s``
    (``log.flush.commit.linger.ms``) has passed since the flush ended, whichever is first. A
    request after a quiet moment (nothing expected, or the linger over) starts one at once;
    with a linger of 0 every flush starts at once. So does a write nothing else follows until
    it is durable (``durable(..., at_once=True)``: a transaction's marker, which the producer's
    next transaction waits for), as no request it could wait for would come.

    The flush also makes durable the directory entries of the partition's files created since
    the last one (``UnifiedLog.flush``): the first acks=all append into a new segment is answered
    only once the segment's name survives a power cut, for one directory fsync per roll, shared here
    like the segments' own.
    """

    def __init__(
        self,
        log: UnifiedLog,
        flusher: LogFlusher,
        on_flushed: Callable[[LogOffsetMetadata], None],
    ) -> None:
        self._log = log
        self._flusher = flusher
        self._on_flushed = on_flushed
        self._waiters: deque[tuple[int, asyncio.Future[None] | Durable]] = deque()
        self._flushing = False
        self._expected = 0
        """The requests expected to join the next flush (see the class's docstring)."""
        self._linger_until = 0.0
        """Loop time until which the next flush may wait for them."""
        self._linger: asyncio.TimerHandle | None = None
        self._at_once = False
        """A waiter asked for the next flush not to linger."""

    def durable(self, last_offset: int, at_once: bool = False) -> asyncio.Future[None]:
        """A future done once every offset up to ``last_offset`` is fsync'ed; it fails with
        the flush's error (KafkaStorageError) if the flush fails. ``at_once``: the flush
        covering it starts without lingering for the requests expected to join it (as soon
        as the one running, if any, ends)."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        if self._committed(last_offset):
            waiter.set_result(None)
            return waiter
        waiter.add_done_callback(_read_outcome)
        self._at_once = self._at_once or at_once
        self._wait(loop, last_offset, waiter)
        return waiter

    def when_durable(self, last_offset: int, durable: Durable) -> bool:
        """``durable`` called once every offset up to ``last_offset`` is fsync'ed (or with the
        flush's error); True instead, without a call, when they are already. (``durable``
        without a future: for the answers that wait without a task.)"""
        if self._committed(last_offset):
            return True
        self._wait(asyncio.get_running_loop(), last_offset, durable)
        return False

    def _committed(self, last_offset: int) -> bool:
        """``last_offset`` is fsync'ed and under the high watermark already (a duplicate
        batch's offsets, retried). One a flush outside the group commit made durable (the
        roll's, the scheduler's) still waits for a flush of the commit's own, which moves the
        high watermark over it before it is answered."""
        log = self._log
        return last_offset < log.recovery_point and last_offset < log.high_watermark

    def _wait(
        self,
        loop: asyncio.AbstractEventLoop,
        last_offset: int,
        waiter: asyncio.Future[None] | Durable,
    ) -> None:
        waiters = self._waiters
        waiters.append((last_offset, waiter))
        if self._flushing:
            return
        if self._at_once or len(waiters) >= self._expected or loop.time() >= self._linger_until:
            self._start_flush(loop)
        elif self._linger is None:
            self._linger = loop.call_at(self._linger_until, self._lingered, loop)

    def _lingered(self, loop: asyncio.AbstractEventLoop) -> None:
        self._linger = None
        if not self._flushing and self._waiters:
            self._start_flush(loop)

    def _start_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        self._flushing = True
        self._at_once = False  # the flush covers every waiter so far: the log end is theirs
        end = self._log.log_end_offset_metadata
        self._flusher.flush(loop, self._log, end.message_offset, partial(self._flushed, loop, end))

    def _flushed(
        self, loop: asyncio.AbstractEventLoop, end: LogOffsetMetadata, error: BaseException | None
    ) -> None:
        self._flushing = False
        if error is None:
            self._on_flushed(end)
        waiters = self._waiters
        answered = 0
        while waiters and waiters[0][0] < end.message_offset:
            _, waiter = waiters.popleft()
            answered += 1
            if not isinstance(waiter, asyncio.Future):
                waiter(error)
            elif waiter.done():
                continue
            elif error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
        waiting = len(waiters)
        linger_s = self._flusher.commit_linger_s
        self._expected = answered + waiting
        self._linger_until = loop.time() + linger_s
        if waiting:
            if self._at_once or waiting >= self._expected or linger_s <= 0 or error is not None:
                self._start_flush(loop)
            else:
                self._linger = loop.call_at(self._linger_until, self._lingered, loop)
        else:
            self._at_once = False  # its waiter was covered by the flush that just ended


def _read_outcome(waiter: asyncio.Future[None]) -> None:
    """Read a waiter's failure, so that one nobody awaits any more (its producer went away,
    its request timed out) is not reported as an exception never retrieved; a producer still
    waiting gets it all the same."""
    if not waiter.cancelled():
        waiter.exception()
