"""KafkaConnection: one client's connection speaking Kafka's wire protocol.

Like ClientConnection for the msgpack protocol: the socket reads into a frame reader, each
request is decoded on arrival and handled at once, as a task of its own once it must wait (so a
fetch waiting for data does not hold up a produce behind it), and responses go to a
ResponseWriter (fetched records with sendfile). Unlike it, responses leave in request order,
as Kafka guarantees and its clients expect: each response waits for the one before it.
Appends are started in each handler's first step, so one connection's produce requests apply
in arrival order.

A frame that cannot be read, a header that cannot be parsed, an API or version not served
(except ApiVersions, answered with UNSUPPORTED_VERSION and the full list as Kafka does) and a
body that cannot be decoded close the connection, logged once with the peer, as Kafka does.

Reading is bounded as on msgpack connections, by the same RequestReadControl: each request's
bytes are reserved in the broker's request memory pool (``queued.max.request.bytes``) as they
arrive, reading stops while the pool is exhausted, and a request must arrive whole within
``socket.request.timeout.ms`` of its first byte. A request's reservation is released once its
response is written (or it is refused).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from concurrent.futures import Executor
from typing import Any

from odradek.errors import (
    InvalidRequestError,
    KafkaError,
    SaslAuthenticationFailedError,
)
from odradek.protocol.frame import FrameError
from odradek.protocol.kafka.api_versions import API_VERSIONS, api_name
from odradek.server.client_connection import (
    MAX_IN_FLIGHT_BYTES,
    MAX_IN_FLIGHT_REQUESTS,
    WRITE_BUFFER_HIGH_BYTES,
    WRITE_BUFFER_LOW_BYTES,
    ConnectionRegistry,
    ConnectionSettings,
)
from odradek.server.eager_start import start_eagerly
from odradek.server.kafka_apis import EAGER_API_KEYS
from odradek.server.kafka_frame_reader import KafkaFrameReader
from odradek.server.kafka_request import KafkaRequest
from odradek.server.kafka_request_handler import KafkaRequestHandler
from odradek.server.metrics import BrokerMetrics
from odradek.server.request_memory_pool import RequestMemoryPool
from odradek.server.request_read_control import RequestReadControl
from odradek.server.response_writer import ResponseWriter
from odradek.server.session import Session, principal_of_transport

logger = logging.getLogger(__name__)

PROTOCOL_LABEL = "kafka"


class KafkaConnection(asyncio.BufferedProtocol):
    """The broker's side of one Kafka-protocol client connection."""

    def __init__(
        self,
        handler: KafkaRequestHandler,
        settings: ConnectionSettings,
        registry: ConnectionRegistry,
        metrics: BrokerMetrics,
        executor: Executor,
        memory_pool: RequestMemoryPool,
        session: Session | None = None,
    ) -> None:
        self._handler = handler
        self._session = session
        self._settings = settings
        self._registry = registry
        self._metrics = metrics
        self._executor = executor
        self._memory_pool = memory_pool
        self._recorder = metrics.request_recorder(PROTOCOL_LABEL, api_name)
        self._reader = KafkaFrameReader(settings.max_request_bytes, memory_pool)
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
        self._previous_response: asyncio.Task[None] | None = None
        self._in_flight_bytes = 0
        self._transport_paused = False
        self._reading_paused = False
        self._closing = False
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self.peer = "unknown peer"

    def __repr__(self) -> str:
        return f"KafkaConnection({self.peer})"

    # --- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if not self._registry.register(self):
            transport.abort()
            return
        if self._session is not None:
            # --- security hook: the principal of a verified client certificate; a SASL
            # listener's limits until the client has authenticated.
            self._session.peer = self.peer
            self._session.certificate_principal = principal_of_transport(transport)
            if self._session.authenticator is not None:
                self._session.authenticator.peer = self.peer
                self._reader.max_frame_bytes = min(
                    self._settings.max_request_bytes, self._session.authenticator.max_receive_bytes
                )
                deadline = self._session.accepted_at + self._session.authenticator.timeout_s
                self._auth_timer = self._loop.call_at(deadline, self._authentication_timed_out)
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
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        self._read_control.close()
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
            self._close_for("bad_frame", error.message)
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

    def _dispatch_all(self, frames: list[memoryview]) -> None:
        for frame in frames:
            if self._closing:
                self._memory_pool.release(len(frame))
                continue
            self._dispatch(frame)

    def eof_received(self) -> bool:
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

    def _dispatch(self, frame: memoryview) -> None:
        received = time.perf_counter()
        size = len(frame)
        session = self._session
        if session is not None and not session.authenticated:
            if session.authenticator.expects_bare_token:  # after SaslHandshake v0
                self._start(self._bare_token(frame), size)
                return
        try:
            request = self._handler.decode(frame)
        except InvalidRequestError as error:
            self._memory_pool.release(size)
            self._close_for("bad_request", error.message)
            return
        except Exception:  # a defect in a decoder must not keep the request's memory
            self._memory_pool.release(size)
            logger.exception("%s: closing Kafka connection: a request failed to decode", self.peer)
            self._metrics.closed_connections.labels("bad_request").inc()
            self._abort()
            return
        if session is not None and not session.authenticated:
            # --- security hook: before authentication only ApiVersions, SaslHandshake and
            # SaslAuthenticate are served; anything else closes the connection.
            if not session.authenticator.allows(request.api_key):
                self._memory_pool.release(size)
                self._record(request, SaslAuthenticationFailedError.code, received)
                self._close_for(
                    "unauthenticated",
                    f"{request} before SASL authentication completed "
                    f"(state {session.authenticator.state.value})",
                )
                return
        if request.refusal is not None:
            if request.api_key != API_VERSIONS:
                self._memory_pool.release(size)
                self._record(request, request.refusal.code, received)
                self._close_for("unsupported_version", request.refusal.message)
                return
            logger.info("%s: %s", self.peer, request.refusal.message)
        previous = self._previous_response
        handling = self._handle(request, size, received, previous)
        task = self._start(handling, size, eager=request.api_key in EAGER_API_KEYS)
        if task is not None:
            self._previous_response = task

    def _start(
        self, handling: Coroutine[Any, Any, None], size: int, eager: bool = False
    ) -> asyncio.Task[None] | None:
        """Handle a request: as a task, or (``eager``) now, as a task only if it must wait;
        the task, or None when it is done. Its reservation of request memory is released
        when it ends (even if cancelled)."""
        self._in_flight_bytes += size
        task = start_eagerly(self._loop, handling) if eager else self._loop.create_task(handling)
        if task is not None:
            self._tasks.add(task)
        self._update_reading()
        return task

    async def _handle(
        self,
        request: KafkaRequest,
        size: int,
        received: float,
        previous: asyncio.Task[None] | None,
    ) -> None:
        """Answer one request, after the response to the request before it (``previous``,
        the task still answering it, if any) went out."""
        error_code = 0
        response = None
        try:
            try:
                response = await self._handler.handle(self.peer, request, self._session)
            except KafkaError as error:
                logger.warning("%s: %s failed: %s", self.peer, request, error)
                error_code = error.code
            except Exception:
                logger.exception("%s: %s failed", self.peer, request)
                error_code = -1
            if previous is not None and not previous.done():
                await asyncio.wait([previous])  # (not cancelled with this one)
            if response is not None and not self._transport.is_closing():
                self._last_active = self._loop.time()
                self._writer.write(response)
            elif error_code:
                # No response can say it in this API's terms: close, as Kafka does.
                self._close_for("failed_request", f"{request} failed")
            self._after_authentication_step()
        finally:
            current = asyncio.current_task()
            if current is not None and self._previous_response is current:
                self._previous_response = None
            self._tasks.discard(current)
            self._in_flight_bytes -= size
            self._memory_pool.release(size)
        self._record(request, error_code, received)
        self._update_reading()

    async def _bare_token(self, frame: memoryview) -> None:
        """One SASL token framed by its size alone (SaslHandshake v0), answered alike."""
        try:
            authenticator = self._session.authenticator
            try:
                answer = await authenticator.authenticate(bytes(frame))
            except KafkaError:
                answer = None
            if not self._transport.is_closing() and answer is not None:
                self._writer.write([len(answer).to_bytes(4, "big"), answer])
            self._after_authentication_step()
        finally:
            self._tasks.discard(asyncio.current_task())
            self._in_flight_bytes -= len(frame)
            self._memory_pool.release(len(frame))
        self._update_reading()

    def _after_authentication_step(self) -> None:
        """A SASL exchange that failed closes the connection once its answer is out; one that
        succeeded lifts the unauthenticated limits and gives the session its principal."""
        authenticator = self._session.authenticator if self._session is not None else None
        if authenticator is None or self._closing:
            return
        if authenticator.failed:
            self._metrics.closed_connections.labels("authentication_failed").inc()
            self._loop.create_task(self.shutdown(), name=f"close-{self.peer}")
        elif authenticator.complete and self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
            self._reader.max_frame_bytes = self._settings.max_request_bytes

    def _authentication_timed_out(self) -> None:
        self._auth_timer = None
        self._close_for(
            "authentication_timeout",
            f"no SASL authentication within {self._session.authenticator.timeout_s:.0f} s",
        )

    def _record(self, request: KafkaRequest, error_code: int, received: float) -> None:
        self._recorder.record(request.api_key, error_code, time.perf_counter() - received)

    # --- flow control, idleness, closing -----------------------------------------------------

    def _update_reading(self) -> None:
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
        """Log once and drop the connection."""
        if self._closing:
            return
        logger.warning("%s: closing Kafka connection: %s", self.peer, message)
        self._metrics.closed_connections.labels(reason).inc()
        self._abort()

    def _abort(self) -> None:
        self._closing = True
        self._transport.abort()

    async def shutdown(self, timeout_s: float = 10.0) -> None:
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
                "%s: closing with %d requests running after %.0f s",
                self.peer,
                len(self._tasks),
                timeout_s,
            )
            transport.abort()
            return
        transport.close()
