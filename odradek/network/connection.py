"""Connection: what a client connection does whatever wire protocol it speaks.

MsgpackConnection (odradek's msgpack protocol) and KafkaConnection (Kafka's) differ in how a
frame becomes a request and a response, and in their security hooks. Everything else is here:
registering with the socket server (refused past ``max.connections``), reading frames into a
size-prefixed frame reader, bounding what is read (RequestReadControl: the request memory pool,
``socket.request.timeout.ms``; and below, the client's unread responses and its work in
flight), the ResponseWriter, closing idle connections after ``connections.max.idle.ms``, the
request metrics, and a graceful shutdown.

A request is handled at once in the read's callback when its API allows it (EAGER_API_KEYS), so
most produce and fetch requests are answered without a task; one that must wait becomes a task
then. The responses to the requests of one read leave in one write.
"""

from __future__ import annotations

import abc
import asyncio
import logging
from bisect import bisect_left
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Generic, Protocol, TypeVar

from odradek.network.connection_throttle import ConnectionThrottle
from odradek.network.eager_start import start_eagerly
from odradek.network.frame_reader import SizePrefixedFrameReader
from odradek.network.network_metrics import NetworkMetrics
from odradek.network.request_memory_pool import RequestMemoryPool
from odradek.network.request_read_control import RequestReadControl
from odradek.network.response_writer import ResponseWriter
from odradek.network.session import Session, principal_of_transport
from odradek.protocol.frame import FrameError

logger = logging.getLogger(__name__)

WRITE_BUFFER_HIGH_BYTES = 1024 * 1024
WRITE_BUFFER_LOW_BYTES = 256 * 1024
MAX_IN_FLIGHT_REQUESTS = 64
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024

FrameT = TypeVar("FrameT")


@dataclass(frozen=True)
class ConnectionSettings:
    """The limits every connection runs with (``socket.request.max.bytes``,
    ``connections.max.idle.ms``, ``socket.request.timeout.ms``, and
    ``queued.max.request.bytes`` for all of them together; -1 for no limit)."""

    max_request_bytes: int
    max_idle_ms: int
    request_timeout_ms: int = 30000
    queued_max_request_bytes: int = -1


class ConnectionRegistry(Protocol):
    """Where connections announce themselves; ``register`` refuses past max.connections."""

    def register(self, connection: Connection) -> bool: ...

    def unregister(self, connection: Connection) -> None: ...


class Connection(asyncio.BufferedProtocol, Generic[FrameT], metaclass=abc.ABCMeta):
    """The broker's side of one client connection; subclasses say how a frame is handled
    (``_dispatch``) and add their security hooks (``_start_session``, ``_end_session``)."""

    protocol_label: str
    """The wire protocol, as the request metrics label it."""
    description = "connection"
    """What the log calls it when it closes."""

    def __init__(
        self,
        reader: SizePrefixedFrameReader[FrameT],
        settings: ConnectionSettings,
        registry: ConnectionRegistry,
        metrics: NetworkMetrics,
        executor: Executor,
        memory_pool: RequestMemoryPool,
        session: Session | None,
        api_name: Callable[[int], str],
    ) -> None:
        self._session = session
        self._settings = settings
        self._registry = registry
        self._metrics = metrics
        self._executor = executor
        self._memory_pool = memory_pool
        self._recorder = metrics.request_recorder(self.protocol_label, api_name)
        self._record: Callable[[int, int, float], None] = self._recorder.record_since
        """Count a request of ``api_key`` answered with ``error_code`` that arrived at
        ``perf_counter()`` reading ``received``."""
        self._succeeded = self._recorder.bound  # each API's series of successes, bound once
        self._latency_bounds = self._recorder.bounds
        self._received = 0.0
        """When the requests of the read being handled arrived, by ``perf_counter``: one
        clock read for all of them, since they came together."""
        self._reader = reader
        self.get_buffer = reader.get_buffer  # asyncio.BufferedProtocol's, without a call between
        self._network = metrics.network
        self._read_control = RequestReadControl(
            reader,
            memory_pool,
            settings.request_timeout_ms,
            metrics,
            self._pause_or_resume_reading,
            self._abort,
        )
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._writer: ResponseWriter | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight_bytes = 0
        self._transport_paused = False
        self._reading_paused = False
        self._throttle = ConnectionThrottle(self._pause_or_resume_reading)
        self._closing = False
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self.peer = "unknown peer"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.peer})"

    # --- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self.peer = _address(transport.get_extra_info("peername"))
        if not self._registry.register(self):
            transport.abort()
            return
        if self._session is not None:  # --- security hook: who the requests come from
            self._session.peer = self.peer
            self._session.certificate_principal = principal_of_transport(transport)
            self._start_session()
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES, low=WRITE_BUFFER_LOW_BYTES)
        self._writer = ResponseWriter(
            transport, self.peer, self._executor, self._metrics, self._pause_or_resume_reading
        )
        self._arm_idle_timer(self._settings.max_idle_ms / 1000)
        self._read_control.start(self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.unregister(self)
        self._closing = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._end_session()
        self._read_control.close()
        self._throttle.cancel()
        if self._writer is not None:
            self._writer.close()
        for task in self._tasks:
            task.cancel()
        if exc is not None:
            logger.info("%s: connection lost: %s", self.peer, exc)

    def request_began_at(self, when: float) -> None:
        """Its first request began at loop time ``when``, while its protocol was detected."""
        self._read_control.began_at(when)

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active = self._loop.time()
        self._received = perf_counter()
        self._network.received += nbytes
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameError as error:
            self._close_for("bad_frame", error.message)
            return
        self._read_control.received(bool(frames))
        if not frames:
            return
        held = len(frames) > 1
        if held:  # their responses leave in one write, those ready by the end
            self._writer.hold()
        try:
            for frame in frames:
                if self._closing:
                    self._memory_pool.release(self._reader.retained_bytes(frame))
                else:
                    self._dispatch(frame)
        finally:
            if held:
                self._writer.release()

    def eof_received(self) -> bool:
        # Keep the write side open until the responses to requests already read are sent.
        if self._tasks or (self._writer is not None and self._writer.busy):
            self._loop.create_task(self.shutdown(), name=f"close-{self.peer}")
            return True
        return False

    def pause_writing(self) -> None:
        self._transport_paused = True
        self._pause_or_resume_reading()

    def resume_writing(self) -> None:
        self._transport_paused = False
        self._writer.transport_resumed()
        self._pause_or_resume_reading()

    # --- what a protocol says ------------------------------------------------------------------

    @abc.abstractmethod
    def _dispatch(self, frame: FrameT) -> None:
        """Handle one request frame (its memory reservation is the handler's to release)."""

    def _start_session(self) -> None:
        """The connection is made on a listener with a session (security hook)."""

    def _end_session(self) -> None:
        """The connection is lost: stop what ``_start_session`` started."""

    def _after_authentication_step(self) -> None:
        """A response went out on a SASL listener (security hook): a failed exchange closes
        the connection, one that succeeded lifts the limits of the unauthenticated."""

    # --- requests ----------------------------------------------------------------------------

    def _start(
        self, handling: Coroutine[Any, Any, None], size: int, eager: bool = False
    ) -> asyncio.Task[None] | None:
        """Handle a request of ``size`` bytes: as a task, or (``eager``) now and as a task only
        once it must wait; the task, or None when it is done. ``handling`` ends by calling
        ``_finished``, even if cancelled."""
        self._in_flight_bytes += size
        task = start_eagerly(self._loop, handling) if eager else self._loop.create_task(handling)
        if task is not None:
            self._tasks.add(task)
            self._pause_or_resume_reading()
        # else it is answered already, and looked at reading as it ended
        return task

    def _finished(self, size: int) -> None:
        """A request of ``size`` bytes is done with: its memory goes back to the pool."""
        if self._tasks:  # (none when it ran without a task)
            self._tasks.discard(asyncio.current_task())
        self._in_flight_bytes -= size
        self._memory_pool.release(size)

    def _request_done(self, api_key: int, error_code: int, received: float) -> None:
        """What ends every request once its response is written (or refused): the quota
        throttle it earned, the SASL exchange's outcome (``_after_authentication_step``), its
        count and latency (``received`` is when it arrived, by ``perf_counter``), and reading
        again if it was paused (``_update_reading``, without a call of its own)."""
        session = self._session
        if session is not None and (session.throttle_s or session.authenticator is not None):
            self._start_throttle()
            self._after_authentication_step()
        self._record(api_key, error_code, received)
        if self._reading_paused:
            self._pause_or_resume_reading()

    def _answered_at_once(
        self, api_key: int, size: int, response: bytes, received: float | None = None
    ) -> None:
        """What ends a request of ``api_key`` and ``size`` bytes answered without error in
        the callback of the read that brought it (or, ``received`` then, when it arrived by
        ``perf_counter``, later without a task), with ``response`` (b"" for none, acks=0):
        what ``_finished`` and ``_request_done`` do at the end of the general path, in one
        call. (The read marked the connection active; the success is counted as
        ``record_since`` counts it, into the series bound once.)"""
        self._memory_pool.release(size)
        if response and not self._transport.is_closing():
            self._writer.write_bytes(response)
        session = self._session
        if session is not None and (session.throttle_s or session.authenticator is not None):
            self._start_throttle()
            self._after_authentication_step()
        seconds = perf_counter() - (self._received if received is None else received)
        try:
            succeeded, latencies = self._succeeded[api_key]
        except KeyError:
            succeeded, latencies = self._recorder.bind(api_key)
        succeeded.value += 1
        latencies.buckets[bisect_left(self._latency_bounds, seconds)] += 1
        latencies.total_seconds += seconds
        if self._reading_paused:
            self._pause_or_resume_reading()

    def _start_throttle(self) -> None:
        """Mute the connection while the quota throttle its last request earned lasts."""
        if self._session is not None and self._session.throttle_s:  # --- quota hook
            self._throttle.start(self._session)

    # --- flow control, idleness, closing -----------------------------------------------------

    def _update_reading(self) -> None:
        """A request is done with: resume reading if it was paused and nothing holds it back
        any more. (Whatever can call for a pause looks at reading itself as it happens, so the
        end of a request never pauses it: this costs a request one look at one flag.)"""
        if self._reading_paused:
            self._pause_or_resume_reading()

    def _pause_or_resume_reading(self) -> None:
        """Read while the client keeps up with its responses and its work in flight is
        bounded; stop otherwise (the kernel's socket buffer then pushes back on it)."""
        if self._transport is None or self._closing:
            return
        pause = (
            self._transport_paused
            or self._read_control.waiting_for_memory
            or (self._writer is not None and self._writer.backlog_bytes > WRITE_BUFFER_HIGH_BYTES)
            or self._requests_in_flight() >= MAX_IN_FLIGHT_REQUESTS
            or self._in_flight_bytes >= MAX_IN_FLIGHT_BYTES
            or self._throttle.muted
        )
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                self._transport.pause_reading()
                self._read_control.paused()
            else:
                self._transport.resume_reading()
                self._read_control.resumed()

    def _requests_in_flight(self) -> int:
        """Requests read and not answered yet, bounded by MAX_IN_FLIGHT_REQUESTS: one task
        each (a protocol adds those it keeps waiting without one)."""
        return len(self._tasks)

    def _arm_idle_timer(self, delay_s: float) -> None:
        self._idle_timer = self._loop.call_later(delay_s, self._check_idle)

    def _check_idle(self) -> None:
        """Close after ``connections.max.idle.ms`` without traffic and without work in flight;
        otherwise look again when that much time will have passed since the last traffic."""
        max_idle_s = self._settings.max_idle_ms / 1000
        idle_s = self._loop.time() - self._last_active
        busy = self._tasks or self._writer.busy
        if idle_s >= max_idle_s and not busy:
            logger.info("%s: closing connection idle for %.1f s", self.peer, idle_s)
            self._metrics.closed_connections.labels("idle").inc()
            self._closing = True
            self._transport.close()
            return
        self._arm_idle_timer(max_idle_s if busy else max_idle_s - idle_s)

    def _close_for(self, reason: str, message: str) -> None:
        """Log once, count it under ``reason`` and drop the connection."""
        if self._closing:
            return
        logger.warning("%s: closing %s: %s", self.peer, self.description, message)
        self._metrics.closed_connections.labels(reason).inc()
        self._abort()

    def _abort(self) -> None:
        self._closing = True
        self._transport.abort()

    async def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop reading, let the requests already read finish and their responses go out
        (for at most ``timeout_s``), then close."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self._closing = True
        transport.pause_reading()
        try:
            async with asyncio.timeout(timeout_s):
                while self._tasks:
                    await asyncio.wait(set(self._tasks))
                await self._writer.flush()
        except TimeoutError:
            logger.warning(
                "%s: closing with %d requests running or responses unsent after %.0f s",
                self.peer,
                len(self._tasks),
                timeout_s,
            )
            transport.abort()
            return
        transport.close()


def _address(peername: object) -> str:
    if isinstance(peername, tuple) and len(peername) >= 2:
        return f"{peername[0]}:{peername[1]}"
    return str(peername or "unknown peer")
