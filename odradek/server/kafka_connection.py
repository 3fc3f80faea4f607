"""KafkaConnection: one client's connection speaking Kafka's wire protocol.

Like ClientConnection for the msgpack protocol: the socket reads into a frame reader, each
request is decoded on arrival and handled as its own task (so a fetch waiting for data does
not hold up a produce behind it), and responses go to a ResponseWriter (fetched records with
sendfile). Unlike it, responses leave in request order, as Kafka guarantees and its clients
expect: each response waits for the one before it. Appends are started in each handler's
first step, so one connection's produce requests apply in arrival order.

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
from concurrent.futures import Executor

from odradek.errors import InvalidRequestError, KafkaError, error_name_for
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
from odradek.server.kafka_frame_reader import KafkaFrameReader
from odradek.server.kafka_request import KafkaRequest
from odradek.server.kafka_request_handler import KafkaRequestHandler
from odradek.server.metrics import BrokerMetrics
from odradek.server.request_memory_pool import RequestMemoryPool
from odradek.server.request_read_control import RequestReadControl
from odradek.server.response_writer import ResponseWriter

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
    ) -> None:
        self._handler = handler
        self._settings = settings
        self._registry = registry
        self._metrics = metrics
        self._executor = executor
        self._memory_pool = memory_pool
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
        self._previous_response: asyncio.Future[None] | None = None
        self._in_flight_bytes = 0
        self._transport_paused = False
        self._reading_paused = False
        self._closing = False
        self._last_active = self._loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None
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
        if request.refusal is not None:
            if request.api_key != API_VERSIONS:
                self._memory_pool.release(size)
                self._record(request, request.refusal.code, received)
                self._close_for("unsupported_version", request.refusal.message)
                return
            logger.info("%s: %s", self.peer, request.refusal.message)
        self._in_flight_bytes += size
        written = self._loop.create_future()
        previous, self._previous_response = self._previous_response, written
        task = self._loop.create_task(self._handle(request, size, received, previous, written))
        # released when the task ends, even if cancelled (connection lost) before it ran
        task.add_done_callback(lambda _: self._memory_pool.release(size))
        self._tasks.add(task)
        self._update_reading()

    async def _handle(
        self,
        request: KafkaRequest,
        size: int,
        received: float,
        previous: asyncio.Future[None] | None,
        written: asyncio.Future[None],
    ) -> None:
        """Answer one request, after the response to the request before it went out."""
        error_code = 0
        response = None
        try:
            try:
                response = await self._handler.handle(self.peer, request)
            except KafkaError as error:
                logger.warning("%s: %s failed: %s", self.peer, request, error)
                error_code = error.code
            except Exception:
                logger.exception("%s: %s failed", self.peer, request)
                error_code = -1
            if previous is not None and not previous.done():
                await previous
            if response is not None and not self._transport.is_closing():
                self._last_active = self._loop.time()
                self._writer.write(response)
            elif error_code:
                # No response can say it in this API's terms: close, as Kafka does.
                self._close_for("failed_request", f"{request} failed")
        finally:
            if not written.done():
                written.set_result(None)
            if self._previous_response is written:
                self._previous_response = None
            self._tasks.discard(asyncio.current_task())
            self._in_flight_bytes -= size
        self._record(request, error_code, received)
        self._update_reading()

    def _record(self, request: KafkaRequest, error_code: int, received: float) -> None:
        api = api_name(request.api_key)
        self._metrics.requests.labels(api, error_name_for(error_code), PROTOCOL_LABEL).inc()
        self._metrics.request_latency.labels(api, PROTOCOL_LABEL).observe(
            time.perf_counter() - received
        )

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
