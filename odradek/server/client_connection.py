"""ClientConnection: one client's connection speaking odradek's msgpack protocol.

The socket reads into a FrameReader, each request is decoded and handed to KafkaApis at once;
one that must wait becomes a task of its own then (so a connection can pipeline, and a fetch
waiting for data does not hold up a produce behind it), and each response goes to the
ResponseWriter. Responses carry the request's correlation id and may leave in any order.

Reading stops while the client is not keeping up (the transport's buffer is above its
high-water mark, or responses queue behind a zero-copy send), while too much of its work
is in flight, and while the broker's request memory (``queued.max.request.bytes``) is
exhausted; it resumes when that clears (see Connection, which both protocols share). A stream
that cannot be framed closes the connection; a request that cannot be decoded gets an error
response and the connection stays. A request must arrive whole within
``socket.request.timeout.ms`` of its first byte, or the connection is closed.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor
from time import perf_counter

from odradek.errors import KafkaError, UnknownServerError, error_code_for
from odradek.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.fetch import encode_nothing_new, read_fetch
from odradek.protocol.frame import Frame, FrameError
from odradek.protocol.header import RequestHeader, ResponseHeader, is_common_envelope
from odradek.protocol.messages import decode_request, encode_response
from odradek.protocol.produce import Acks, encode_appended, read_produce
from odradek.protocol.schema import Message, Payload
from odradek.server.connection import Connection, ConnectionRegistry, ConnectionSettings
from odradek.server.frame_reader import FrameReader
from odradek.server.kafka_apis import EAGER_API_KEYS, KafkaApis
from odradek.server.metrics import BrokerMetrics
from odradek.server.request_context import RequestContext
from odradek.server.request_memory_pool import RequestMemoryPool
from odradek.server.sasl_gate import SaslGate
from odradek.server.session import Session

logger = logging.getLogger(__name__)


def _supported_versions(api_key: ApiKey) -> frozenset[int]:
    """The versions of ``api_key`` the broker answers: a set, so an immediate answer tests
    a request's version in one step."""
    low, high = SUPPORTED_VERSIONS[api_key]
    return frozenset(range(low, high + 1))


_FETCH_VERSIONS = _supported_versions(ApiKey.FETCH)
_PRODUCE_VERSIONS = _supported_versions(ApiKey.PRODUCE)


class ClientConnection(Connection[Frame]):
    """The broker's side of one msgpack client connection."""

    protocol_label = "msgpack"

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
        super().__init__(
            FrameReader(settings.max_request_bytes, memory_pool),
            settings,
            registry,
            metrics,
            executor,
            memory_pool,
            session,
            _api_name,
        )
        self._apis = apis
        self._sasl_gate: SaslGate | None = None

    # --- security hooks ----------------------------------------------------------------------

    def _start_session(self) -> None:
        self._sasl_gate = SaslGate.start(
            self._session,
            self._loop,
            self._close_unauthenticated,
            self._reader,
            self._settings.max_request_bytes,
        )

    def _end_session(self) -> None:
        if self._sasl_gate is not None:
            self._sasl_gate.cancel()

    def _close_unauthenticated(self, message: str) -> None:
        self._close_for("unauthenticated", message)

    # --- requests ----------------------------------------------------------------------------

    def _dispatch(self, frame: Frame) -> None:
        received = perf_counter()
        if is_common_envelope(frame.header):
            try:
                answer = self._answer_at_once(frame)
            except Exception:  # answered as _handle answers a handler's failure
                answer = self._failed_at_once(frame)
            if answer is not None:
                self._answered(frame, *answer, received)
                return
        size = len(frame.payload)
        try:
            header = RequestHeader.from_header(frame.header)
        except FrameError as error:
            self._memory_pool.release(size)
            self._close_for("bad_frame", error.message)
            return
        if self._sasl_gate is not None and not self._sasl_gate.allows(header.api_key):
            self._memory_pool.release(size)
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
            self._respond(ResponseHeader.for_error(header.correlation_id, error), None)
            self._record(header.api_key, error_code_for(error), received)
            return
        handling = self._handle(header, request, size, received)
        self._start(handling, size, eager=header.api_key in EAGER_API_KEYS)

    def _answer_at_once(self, frame: Frame) -> tuple[int, list[Payload] | None] | None:
        """The answer, in a few steps, to a produce to one partition with acks 0 or 1 whose
        append is done at once, or to a fetch of one partition that may not wait and finds
        nothing new: its error code (0) and response frame (None for acks=0). None for
        anything else (another API or version, another shape, an error, a queued append, a
        quota or an authorizer in force, a request before SASL authentication): the general
        path, whose answer this is (held to it by tests), takes it."""
        header, payload = frame
        api_key = header["api"]
        gate = self._sasl_gate
        if gate is not None and not gate.allows(api_key):
            return None  # refused by the general path
        if api_key == ApiKey.FETCH and header["v"] in _FETCH_VERSIONS:
            fetch = read_fetch(header, payload, at_once=True)
            if fetch is None:
                return None
            [entry], _, _, _, isolation = fetch
            topic, partition = entry["topic"], entry["partition"]
            offsets = self._apis.fetch_nothing_new(
                topic, partition, entry["fetch_offset"], isolation
            )
            if offsets is None:
                return None
            return 0, encode_nothing_new(header["id"], topic, partition, *offsets)
        if api_key == ApiKey.PRODUCE and header["v"] in _PRODUCE_VERSIONS:
            produce = read_produce(header, payload, at_once=True)
            if produce is None:
                return None
            [entry], acks, _ = produce
            topic, partition = entry["topic"], entry["partition"]
            info = self._apis.produce_at_once(topic, partition, payload, acks)
            if info is None:
                return None
            if acks is Acks.NONE:
                return 0, None
            return 0, encode_appended(
                header["id"],
                topic,
                partition,
                info.first_offset,
                info.log_append_time_ms,
                info.log_start_offset,
            )
        return None

    def _failed_at_once(self, frame: Frame) -> tuple[int, list[Payload]]:
        """The answer to a request whose immediate path failed unexpectedly: logged, and
        answered UNKNOWN_SERVER_ERROR, as ``_handle`` answers a handler's failure."""
        header = RequestHeader.from_header(frame.header)
        context = RequestContext(self.peer, header, self._session)
        logger.exception("%s: %s failed", self.peer, context)
        error = UnknownServerError(f"the broker failed to handle {context}; see its log")
        return error.code, encode_response(ResponseHeader.for_error(header.correlation_id, error))

    def _answered(
        self, frame: Frame, error_code: int, response: list[Payload] | None, received: float
    ) -> None:
        """What the general path does once it has answered (see ``_handle``), for an answer
        made at once."""
        self._memory_pool.release(len(frame.payload))
        if response is not None and not self._transport.is_closing():
            self._last_active = self._loop.time()
            self._writer.write(response)
        self._start_throttle()
        self._record(frame.header["api"], error_code, received)
        if self._sasl_gate is not None:
            self._after_sasl_step(self._sasl_gate)
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
            response_header = None
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
            self._finished(size)
        if response is not None:
            self._respond(ResponseHeader(header.correlation_id), response)
        elif response_header is not None:
            self._respond(response_header, None)
        self._start_throttle()
        self._record(header.api_key, error_code, received)
        if self._sasl_gate is not None:
            self._after_sasl_step(self._sasl_gate)
        self._update_reading()

    def _after_sasl_step(self, gate: SaslGate) -> None:
        """A response went out on a SASL listener: a failed exchange closes the connection."""
        if gate.after_step():
            self._metrics.closed_connections.labels("authentication_failed").inc()
            self._loop.create_task(self.shutdown(), name=f"close-{self.peer}")

    def _respond(self, response_header: ResponseHeader, response: Message | None) -> None:
        if self._transport.is_closing():
            return
        self._last_active = self._loop.time()
        self._writer.write(encode_response(response_header, response))


def _api_name(api_key: int) -> str:
    """Kafka's name of the API; "unknown" for other keys (metric labels stay few)."""
    try:
        return ApiKey(api_key).display_name
    except ValueError:
        return "unknown"
