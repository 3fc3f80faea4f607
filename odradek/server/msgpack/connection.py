"""MsgpackConnection: one client's connection speaking odradek's msgpack protocol.

The socket reads into a FrameReader, each request is decoded and handed to ApiRouter at once;
one that must wait becomes a task of its own then (so a connection can pipeline, and a fetch
waiting for data does not hold up a produce behind it), and each response goes to the
ResponseWriter. Responses carry the request's correlation id and may leave in any order.

A produce of one partition and a fetch of one partition that may not wait and finds nothing
new, sent again and again with the same head, are read by their bytes (``read_immediate``) and
answered in a few steps, with the general path's bytes, counts and limits: at once, or at
acks=all once the append is fsync'ed, its ready answer waiting without a task (DurableAnswer,
in request order with the others waiting: DurableAnswerConnection, as on Kafka connections);
anything else is decoded and takes the general path.

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

from odradek.errors import KafkaError, UnknownServerError, error_code_for
from odradek.network.connection import ConnectionRegistry, ConnectionSettings
from odradek.network.frame_reader import FrameReader
from odradek.network.request_memory_pool import RequestMemoryPool
from odradek.network.sasl_gate import SaslGate
from odradek.network.session import Session
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.frame import FrameError, decode_frame
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.immediate import (
    FETCH,
    Immediate,
    ImmediateProduce,
    read_correlation_id,
    read_immediate,
    write_appended,
    write_nothing_new,
)
from odradek.protocol.messages import decode_request, encode_response
from odradek.protocol.produce import ProduceResponse
from odradek.protocol.schema import Message
from odradek.protocol.values.produce import Acks, ProducePartitionResponse
from odradek.record.record_batch import starts_transactional
from odradek.server.apis import EAGER_API_KEYS, ApiRouter
from odradek.server.durable_answer import DurableAnswer
from odradek.server.durable_answer_connection import DurableAnswerConnection
from odradek.server.metrics.broker_metrics import BrokerMetrics
from odradek.server.request_context import RequestContext

logger = logging.getLogger(__name__)

# (Members at hand: looking one up on its enum class costs about a call, per request.)
_ACKS_NONE = Acks.NONE
_ACKS_ALL = Acks.ALL


class RequestReader(FrameReader):
    """Hands each request over as its bytes after the frame size, undecoded: a repeated
    produce or fetch is read by its bytes (``read_immediate``), anything else decoded then.
    A request's reservation is all of its bytes."""

    decode = memoryview
    retained_bytes = len


class MsgpackConnection(DurableAnswerConnection):
    """The broker's side of one msgpack client connection."""

    protocol_label = "msgpack"

    def __init__(
        self,
        apis: ApiRouter,
        settings: ConnectionSettings,
        registry: ConnectionRegistry,
        metrics: BrokerMetrics,
        executor: Executor,
        memory_pool: RequestMemoryPool,
        session: Session | None = None,
    ) -> None:
        super().__init__(
            RequestReader(settings.max_request_bytes, memory_pool),
            settings,
            registry,
            metrics,
            executor,
            memory_pool,
            session,
            _api_name,
        )
        self._apis = apis
        self._replicas = apis.replicas
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

    def _dispatch(self, body: memoryview) -> None:
        received = self._received
        immediate = read_immediate(body)
        if immediate is not None:
            request, id_end = immediate
            gate = self._sasl_gate
            if gate is None or gate.allows(request.api_key):  # else refused on the general path
                try:
                    response = self._answer_at_once(request, body, id_end)
                except Exception:  # answered as _handle answers a handler's failure
                    self._answer_failure_at_once(body, received)
                    return
                if response is not None:
                    if response.__class__ is DurableAnswer:
                        self._wait_durable(response, len(body))
                    else:
                        self._answered_at_once(request.api_key, len(body), response)
                    return
        size = len(body)
        try:
            frame = decode_frame(body)
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

    def _answer_at_once(
        self, request: Immediate, body: memoryview, id_end: int
    ) -> bytes | DurableAnswer | None:
        """The answer, in a few steps, to a produce to one partition whose append is done at
        once, or to a fetch of one partition that may not wait and finds nothing new
        (``request``, read from ``body`` by ``read_immediate``): its response frame, or b""
        for acks=0 (none); at acks=all, its DurableAnswer, to send once fsync'ed. None when
        something else has a say (an error, a queued append, a quota or an authorizer in
        force, no time to wait for the fsync): nothing was done, and the general path, whose
        answer this is (held to it by tests), takes it."""
        if not self._apis.answers_at_once:  # an authorizer or quotas have a say
            return None
        if request.api_key == FETCH:
            offsets = self._replicas.nothing_new(
                request.topic, request.partition, request.fetch_offset, request.isolation
            )
            if offsets is None:
                return None
            return write_nothing_new(request, body, id_end, *offsets)
        acks = request.acks
        records = body[len(body) - request.payload_size :]
        if starts_transactional(records):
            return None  # a transactional batch: checked against its transaction first
        if acks is _ACKS_ALL:
            return self._durable_answer(request, body, id_end, records)
        info = self._replicas.append_at_once(request.topic, request.partition, records, acks)
        if info is None:
            return None
        if acks is _ACKS_NONE:
            return b""
        return write_appended(
            request, body, id_end, info.first_offset, info.log_append_time_ms, info.log_start_offset
        )

    def _durable_answer(
        self, request: ImmediateProduce, body: memoryview, id_end: int, records: memoryview
    ) -> DurableAnswer | None:
        """The acks=all produce ``request`` appended here and now, its answer to go out once
        fsync'ed; None when it is not appended (nothing is written then) or has no time to
        wait (``timeout_ms`` 0: the general path answers)."""
        timeout_ms = request.timeout_ms
        if timeout_ms <= 0:
            return None
        topic, partition_index = request.topic, request.partition
        appended = self._replicas.append_durably_at_once(topic, partition_index, records)
        if appended is None:
            return None
        partition, info = appended
        response = write_appended(
            request, body, id_end, info.first_offset, info.log_append_time_ms, info.log_start_offset
        )
        return DurableAnswer(
            response,
            body[12],  # the version ("v", a fixint: read_immediate's envelope)
            read_correlation_id(body, id_end),
            topic,
            partition_index,
            partition,
            info.last_offset,
            timeout_ms,
        )

    def _failed_durable_response(self, answer: DurableAnswer) -> bytes:
        error = answer.failed
        message = error.message if isinstance(error, KafkaError) else str(error)
        result = ProducePartitionResponse(
            answer.topic, answer.partition_index, error_code_for(error), message
        )
        header = ResponseHeader(answer.correlation_id)
        return b"".join(encode_response(header, ProduceResponse((result,))))

    def _answer_failure_at_once(self, body: memoryview, received: float) -> None:
        """A request whose immediate path failed unexpectedly: logged, and answered
        UNKNOWN_SERVER_ERROR, as ``_handle`` answers a handler's failure."""
        header = RequestHeader.from_header(decode_frame(body).header)
        context = RequestContext(self.peer, header, self._session)
        logger.exception("%s: %s failed", self.peer, context)
        error = UnknownServerError(f"the broker failed to handle {context}; see its log")
        self._memory_pool.release(len(body))
        self._respond(ResponseHeader.for_error(header.correlation_id, error), None)
        self._request_done(header.api_key, error.code, received)

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
        self._request_done(header.api_key, error_code, received)

    def _after_authentication_step(self) -> None:
        """A response went out on a SASL listener: a failed exchange closes the connection."""
        gate = self._sasl_gate
        if gate is not None and gate.after_step():
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
