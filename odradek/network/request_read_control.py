"""RequestReadControl: what bounds the reading of one connection's requests.

Two limits, whatever the wire protocol: the broker's request memory (``queued.max.request.bytes``,
the RequestMemoryPool), and ``socket.request.timeout.ms``, within which a request must arrive
whole from its first byte. The connection reads its socket into a size-prefixed frame reader and
tells this object what happened; this object says when reading must stop for memory, and closes
the connection (logged with the peer, counted as ``request_timeout``) when a request is late.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.network.frame_reader import SizePrefixedFrameReader
from odradek.network.network_metrics import NetworkMetrics
from odradek.network.request_memory_pool import RequestMemoryPool

logger = logging.getLogger(__name__)


class RequestReadControl:
    """Request memory and the request timeout of one connection.

    ``update_reading`` is the connection's: it pauses or resumes its transport, pausing while
    ``waiting_for_memory`` among its own reasons, and reports its other pauses with ``paused``
    and ``resumed``: a request held back because its client did not read its responses, or
    had too much in flight, is not late for that time (only reading time and time waiting for
    request memory count, so that half-sent requests cannot keep the pool exhausted).
    ``abort`` drops the connection once a request is late.
    """

    def __init__(
        self,
        reader: SizePrefixedFrameReader,
        pool: RequestMemoryPool,
        timeout_ms: int,
        metrics: NetworkMetrics,
        update_reading: Callable[[], None],
        abort: Callable[[], None],
    ) -> None:
        self._reader = reader
        self._pool = pool
        self._timeout_ms = timeout_ms
        self._metrics = metrics
        self._update_reading = update_reading
        self._abort = abort
        self._loop = asyncio.get_running_loop()
        self.peer = "unknown peer"
        self.waiting_for_memory = False
        self._closed = False
        self._request_started: float | None = None  # loop time the pending frame began
        self._timer: asyncio.TimerHandle | None = None
        self._paused_at: float | None = None  # reading paused by the connection, not for memory

    def start(self, peer: str) -> None:
        """The connection is made: if the pool is exhausted, it reads nothing until it is not.
        (Not paused here: uvloop starts reading once connection_made returns, whatever it was
        told, so the connection pauses on the next turn of the loop.)"""
        self.peer = peer
        if self._pool.exhausted:
            self.waiting_for_memory = True
            self._pool.wait(self._memory_released)
            self._loop.call_soon(self._update_reading)

    def received(self, frames_completed: bool) -> None:
        """Bytes were read (completing frames or not): start or stop the request's clock,
        and stop reading if the frame's buffer cannot grow or the pool is exhausted."""
        reader = self._reader
        if reader.pending:
            if frames_completed or self._request_started is None:
                self._request_started = self._loop.time()
                if self._timer is None:
                    self._arm_timer()
            if reader.blocked:
                self._wait_for_memory()
                return
        else:
            self._request_started = None
        if self._pool.reserved >= self._pool.limit:  # exhausted
            self._wait_for_memory()

    def began_at(self, when: float) -> None:
        """The request being received began at loop time ``when``, before this connection
        had it (its first bytes went through protocol detection): its clock starts then."""
        if self._closed or self._request_started is None or when >= self._request_started:
            return
        self._request_started = when
        if self._timer is not None:
            self._timer.cancel()
            self._arm_timer()

    def paused(self) -> None:
        """The connection stopped reading for a reason of its own."""
        if not self.waiting_for_memory:
            self._paused_at = self._loop.time()

    def resumed(self) -> None:
        """The connection reads again: the pause is not counted against its request."""
        if self._paused_at is not None and self._request_started is not None:
            self._request_started += self._loop.time() - self._paused_at
        self._paused_at = None

    def close(self) -> None:
        """The connection is lost: stop the clock, stop waiting, release the reader's memory."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pool.cancel_wait(self._memory_released)
        self._reader.close()

    def _wait_for_memory(self) -> None:
        """Stop reading until the pool has room (for the frame's buffer to grow, or for any
        new request)."""
        if self.waiting_for_memory or self._closed:
            return
        self.waiting_for_memory = True
        self._pool.wait(self._memory_released)
        self._update_reading()

    def _memory_released(self) -> None:
        self.waiting_for_memory = False
        if self._closed:
            return
        if (self._reader.blocked and not self._reader.try_grow()) or self._pool.exhausted:
            self._wait_for_memory()
            return
        self._update_reading()

    def _arm_timer(self) -> None:
        self._timer = self._loop.call_at(
            self._request_started + self._timeout_ms / 1000, self._check_request_time
        )

    def _check_request_time(self) -> None:
        """Close the connection if the request being received began more than
        ``socket.request.timeout.ms`` ago; otherwise look again when the current one would."""
        self._timer = None
        if self._request_started is None or self._closed:
            return
        if self._paused_at is not None:  # not its fault: look again once reading resumes
            self._timer = self._loop.call_later(self._timeout_ms / 1000, self._check_request_time)
            return
        elapsed_s = self._loop.time() - self._request_started
        if elapsed_s < self._timeout_ms / 1000:
            self._arm_timer()
            return
        logger.warning(
            "%s: closing connection: a request still incomplete after %.1f s "
            "(socket.request.timeout.ms=%d), %d of its bytes received",
            self.peer,
            elapsed_s,
            self._timeout_ms,
            self._reader.pending_bytes,
        )
        self._metrics.closed_connections.labels("request_timeout").inc()
        self._abort()
