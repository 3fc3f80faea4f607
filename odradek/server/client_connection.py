"""ClientConnection: one client's TCP connection, from bytes in to response frames out.

The protocol object only frames: the socket reads into a FrameReader, each request is
decoded and handed to KafkaApis at once; one that must wait becomes a task of its own then (so
a connection can pipeline, and a fetch waiting for data does not hold up a produce behind it),
and each response goes to the ResponseWriter.
Responses carry the request's correlation id and may leave in any order.

Reading stops while the client is not keeping up (the transport's buffer is above its
high-water mark, or responses queue behind a zero-copy send), while too much of its work
is in flight, and while the broker's request memory (``queued.max.request.bytes``) is
exhausted; it resumes when that clears. A stream that cannot be framed closes the
connection; a request that cannot be decoded gets an error response and the connection stays.
A request must arrive whole within ``socket.request.timeout.ms`` of its first byte, or the
connection is closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Protocol

from odradek.errors import KafkaError, UnknownServerError, error_code_for
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.frame import Frame, FrameError
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.messages import decode_request, encode_response
from odradek.protocol.schema import Message
from odradek.server.eager_start import start_eagerly
from odradek.server.frame_reader import FrameReader
from odradek.server.kafka_apis import EAGER_API_KEYS, KafkaApis
from odradek.server.metrics import BrokerMetrics
from odradek.server.request_context import RequestContext
from odradek.server.request_memory_pool import RequestMemoryPool
from odradek.server.request_read_control import RequestReadControl
from odradek.server.response_writer import ResponseWriter
from odradek.server.sasl_gate import SaslGate
from odradek.server.session import Session, principal_of_transport

logger = logging.getLogger(__name__)

WRITE_BUFFER_HIGH_BYTES = 1024 * 1024
WRITE_BUFFER_LOW_BYTES = 256 * 1024
MAX_IN_FLIGHT_REQUESTS = 64
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024
PROTOCOL_LABEL = "msgpack"


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

    def register(self, connection: ClientConnection) -> bool: ...

    def unregister(self, connection: ClientConnection) -> None: ...


class ClientConnection(asyncio.BufferedProtocol):
    """The broker's side of one client connection."""

    def __init__(
        self,
        apis: KafkaApis,
        settings: ConnectionSettings,
        registry: ConnectionRegistry,
        metrics: BrokerMetrics,
        executor: Executor,
        memory_pool: RequestMemoryPool,
        session: Session | None = None,
    ) -> None:
        self._apis = apis
        self._session = session
        self._settings = settings
        self._registry = registry
        self._metrics = metrics
        self._executor = executor
        self._memory_pool = memory_pool
        self._recorder = metrics.request_recorder(PROTOCOL_LABEL, _api_name)
        self._reader = FrameReader(settings.max_request_bytes, memory_pool)
        self._read_control = RequestReadControl(
            self._reader,
            memory_pool,
            settings.request_timeout_ms,
            metrics,
            self._update_reading,
            self._abort,
        )
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._writer: ResponseWriter | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight_bytes = 0
        self._transport_paused = False
        self._reading_paused = False
        self._closing = False
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._sasl_gate: SaslGate | None = None
        self.peer = "unknown peer"

    def __repr__(self) -> str:
        return f"ClientConnection({self.peer})"

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
            self._sasl_gate = SaslGate.start(
                self._session,
                self._loop,
                self._close_unauthenticated,
                self._reader,
                self._settings.max_request_bytes,
            )
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH_BYTES, low=WRITE_BUFFER_LOW_BYTES)
        self._writer = ResponseWriter(
            transport, self.peer, self._executor, self._metrics, self._update_reading
        )
        self._arm_idle_timer(self._settings.max_idle_ms / 1000)
        self._read_control.start(self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.unregister(self)
        self._closing = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._read_control.close()
        if self._sasl_gate is not None:
            self._sasl_gate.cancel()
        if self._writer is not None:
            self._writer.close()
        for task in self._tasks:
            task.cancel()
        if exc is not None:
            logger.info("%s: connection lost: %s", self.peer, exc)

    def request_began_at(self, when: float) -> None:
        """Its first request began at loop time ``when``, while its protocol was detected."""
        self._read_control.began_at(when)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active = self._loop.time()
        self._metrics.bytes_in.inc(nbytes)
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameError as error:
            self._close_for(error)
            return
        self._read_control.received(bool(frames))
        if len(frames) > 1:  # their responses leave in one write, those ready by the end
            self._writer.hold()
            try:
                self._dispatch_all(frames)
            finally:
                self._writer.release()
        elif frames:
            self._dispatch_all(frames)

    def _dispatch_all(self, frames: list[Frame]) -> None:
        for frame in frames:
            if self._closing:
                self._memory_pool.release(len(frame.payload))
                continue
            self._dispatch(frame)

    def eof_received(self) -> bool:
        # Keep the write side open until the responses to requests already read are sent.
        if self._tasks or (self._writer is not None and self._writer.busy):
            self._loop.create_task(self.shutdown(), name=f"close-{self.peer}")
            return True
        return False

    def pause_writing(self) -> None:
        self._transport_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._transport_paused = False
        self._writer.transport_resumed()
        self._update_reading()

    # --- requests ----------------------------------------------------------------------------

    def _dispatch(self, frame: Frame) -> None:
        received = time.perf_counter()
        size = len(frame.payload)
        try:
            header = RequestHeader.from_header(frame.header)
        except FrameError as error:
            self._memory_pool.release(size)
            self._close_for(error)
            return
        if self._sasl_gate is not None and not self._sasl_gate.allows(header.api_key):
            self._close_unauthenticated(f"API key {header.api_key} before SASL authentication")
            return
        try:
            request = decode_request(header, frame)
        except KafkaError as error:
            self._memory_pool.release(size)
            logger.warning(
                "%s: request %d (API key %d v%d) rejected: %s",
                self.peer,
                header.correlation_id,
                header.api_key,
                header.api_version,
                error,
            )
            self._respond(header, ResponseHeader.for_error(header.correlation_id, error), None)
            self._record(header, error_code_for(error), received)
            return
        self._in_flight_bytes += size
        handling = self._handle(header, request, size, received)
        if header.api_key in EAGER_API_KEYS:
            task = start_eagerly(self._loop, handling)
        else:
            task = self._loop.create_task(handling)
        if task is not None:  # it waits (an fsync, a fetch for data): a task finishes it
            self._tasks.add(task)
        self._update_reading()

    async def _handle(
        self, header: RequestHeader, request: Message, size: int, received: float
    ) -> None:
        """Run one request and write its response; appends happen in the handler's first
        step, so produce requests are applied in the order they arrived."""
        context = RequestContext(self.peer, header, self._session)
        error_code = 0
        try:
            response = await self._apis.handle(context, request)
            response_header = ResponseHeader(header.correlation_id)
        except KafkaError as error:
            logger.warning("%s: %s failed: %s", self.peer, context, error)
            response, response_header = None, ResponseHeader.for_error(header.correlation_id, error)
            error_code = error.code
        except Exception:
            logger.exception("%s: %s failed", self.peer, context)
            error = UnknownServerError(f"the broker failed to handle {context}; see its log")
            response, response_header = None, ResponseHeader.for_error(header.correlation_id, error)
            error_code = error.code
        finally:
            self._tasks.discard(asyncio.current_task())
            self._in_flight_bytes -= size
            self._memory_pool.release(size)
        if response is not None or response_header.error:
            self._respond(header, response_header, response)
        self._record(header, error_code, received)
        if self._sasl_gate is not None and self._sasl_gate.after_step():
            self._metrics.closed_connections.labels("authentication_failed").inc()
            self._loop.create_task(self.shutdown(), name=f"close-{self.peer}")
        self._update_reading()

    def _respond(
        self, header: RequestHeader, response_header: ResponseHeader, response: Message | None
    ) -> None:
        if self._transport.is_closing():
            return
        self._last_active = self._loop.time()
        self._writer.write(encode_response(response_header, response))

    def _record(self, header: RequestHeader, error_code: int, received: float) -> None:
        self._recorder.record(header.api_key, error_code, time.perf_counter() - received)

    # --- flow control, idleness, closing -----------------------------------------------------

    def _update_reading(self) -> None:
        """Read while the client keeps up with its responses and its work in flight is
        bounded; stop otherwise (the kernel's socket buffer then pushes back on it)."""
        if self._transport is None or self._closing:
            return
        pause = (
            self._transport_paused
            or self._read_control.waiting_for_memory
            or (self._writer is not None and self._writer.backlog_bytes > WRITE_BUFFER_HIGH_BYTES)
            or len(self._tasks) >= MAX_IN_FLIGHT_REQUESTS
            or self._in_flight_bytes >= MAX_IN_FLIGHT_BYTES
        )
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                self._transport.pause_reading()
                self._read_control.paused()
            else:
                self._transport.resume_reading()
                self._read_control.resumed()

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

    def _close_unauthenticated(self, message: str) -> None:
        if self._closing:
            return
        logger.warning("%s: closing connection: %s", self.peer, message)
        self._metrics.closed_connections.labels("unauthenticated").inc()
        self._closing = True
        self._transport.abort()

    def _close_for(self, error: FrameError) -> None:
        """The stream cannot be framed any more: log it once and drop the connection."""
        logger.warning("%s: closing connection: %s", self.peer, error.message)
        self._metrics.closed_connections.labels("bad_frame").inc()
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


def _api_name(api_key: int) -> str:
    """Kafka's name of the API; "unknown" for other keys (metric labels stay few)."""
    try:
        return ApiKey(api_key).display_name
    except ValueError:
        return "unknown"
