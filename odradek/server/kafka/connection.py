"""KafkaConnection: one client's connection speaking Kafka's wire protocol.

Like MsgpackConnection for the msgpack protocol: the socket reads into a frame reader, each
request is decoded on arrival and handled at once, as a task of its own once it must wait (so a
fetch waiting for data does not hold up a produce behind it), and responses go to a
ResponseWriter (fetched records with sendfile). Unlike it, responses leave in request order,
as Kafka guarantees and its clients expect: each response waits for the one before it.
Appends are started in each handler's first step, so one connection's produce requests apply
in arrival order.

A Produce of one partition at acks 0 or 1 and a Fetch of one partition that may not wait and
finds nothing new are answered in a few steps when no earlier response is still to go out
(KafkaRequestHandler.answer_at_once): read from the frame, applied, and their response bytes
written, with the general path's bytes, counts and limits; one at acks=all is appended so and
its ready answer waits for its fsync (DurableAnswerConnection, shared with msgpack
connections), and may join other such answers still waiting. Anything else takes the general
path.

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
from concurrent.futures import Executor

from odradek.errors import (
    InvalidRequestError,
    KafkaError,
    SaslAuthenticationFailedError,
)
from odradek.network.connection import ConnectionRegistry, ConnectionSettings
from odradek.network.kafka_frame_reader import KafkaFrameReader
from odradek.network.request_memory_pool import RequestMemoryPool
from odradek.network.session import Session
from odradek.protocol.kafka.api_versions import API_VERSIONS, api_name
from odradek.protocol.kafka.request_header import read_request_start
from odradek.server.apis import EAGER_API_KEYS
from odradek.server.durable_answer import DurableAnswer
from odradek.server.durable_answer_connection import DurableAnswerConnection
from odradek.server.kafka.request import KafkaRequest
from odradek.server.kafka.request_handler import KafkaRequestHandler
from odradek.server.metrics.broker_metrics import BrokerMetrics

logger = logging.getLogger(__name__)

PROTOCOL_LABEL = "kafka"


class KafkaConnection(DurableAnswerConnection):
    """The broker's side of one Kafka-protocol client connection."""

    protocol_label = PROTOCOL_LABEL
    description = "Kafka connection"

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
        super().__init__(
            KafkaFrameReader(settings.max_request_bytes, memory_pool),
            settings,
            registry,
            metrics,
            executor,
            memory_pool,
            session,
            api_name,
        )
        self._handler = handler
        self._without_authentication = session is None or session.authenticator is None
        """No SASL exchange gates this connection's requests (a listener's for good)."""
        self._previous_response: asyncio.Future[None] | None = None
        self._auth_timer: asyncio.TimerHandle | None = None

    # --- security hooks ----------------------------------------------------------------------

    def _start_session(self) -> None:
        """A SASL listener's limits hold until the client has authenticated."""
        authenticator = self._session.authenticator
        if authenticator is not None:
            authenticator.peer = self.peer
            self._reader.max_frame_bytes = min(
                self._settings.max_request_bytes, authenticator.max_receive_bytes
            )
            deadline = self._session.accepted_at + authenticator.timeout_s
            self._auth_timer = self._loop.call_at(deadline, self._authentication_timed_out)

    def _end_session(self) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()

    # --- requests ----------------------------------------------------------------------------

    def _dispatch(self, frame: memoryview) -> None:
        received = self._received
        previous = self._previous_response
        if (previous is None or previous is self._durable_turn) and (
            self._without_authentication or self._session.authenticator.complete
        ):
            # No response is still to go out before this one's: it may be answered now; or
            # only answers waiting for their fsync are: an acks=all one may join them.
            handler = self._handler
            try:
                if previous is None:
                    response = handler.answer_at_once(frame)
                else:
                    response = handler.answer_when_durable(frame)
            except Exception:
                self._failed_at_once(frame, received)
                return
            if response is not None:
                if response.__class__ is DurableAnswer:
                    self._wait_durable(response, len(frame))
                else:
                    self._answered_at_once(frame[1], len(frame), response)  # (frame[0] is 0)
                return
        session = self._session
        authenticator = session.authenticator if session is not None else None
        authenticating = authenticator is not None and not authenticator.complete
        size = len(frame)
        if authenticating and authenticator.expects_bare_token:  # after SaslHandshake v0
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
        if authenticating:
            # --- security hook: before authentication only ApiVersions, SaslHandshake and
            # SaslAuthenticate are served; anything else closes the connection.
            if not authenticator.allows(request.api_key):
                self._memory_pool.release(size)
                self._record(request.api_key, SaslAuthenticationFailedError.code, received)
                self._close_for(
                    "unauthenticated",
                    f"{request} before SASL authentication completed "
                    f"(state {authenticator.state.value})",
                )
                return
        if request.refusal is not None:
            if request.api_key != API_VERSIONS:
                self._memory_pool.release(size)
                self._record(request.api_key, request.refusal.code, received)
                self._close_for("unsupported_version", request.refusal.message)
                return
            # A client newer than this broker: it retries at the version the answer lists.
            logger.debug("%s: %s", self.peer, request.refusal.message)
        handling = self._handle(request, size, received, self._previous_response)
        task = self._start(handling, size, eager=request.api_key in EAGER_API_KEYS)
        if task is not None:
            self._previous_response = task

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
        finally:
            # The last response in flight may be this one's (a task's; none ran eagerly).
            last = self._previous_response
            if last is not None and last is asyncio.current_task():
                self._previous_response = None
            self._finished(size)
        self._request_done(request.api_key, error_code, received)

    # --- acks=all answers waiting for their fsync ---------------------------------------------

    def _durable_turn_began(self, turn: asyncio.Future[None]) -> None:
        self._previous_response = turn  # the response before the next request's

    def _durable_turn_ended(self, turn: asyncio.Future[None]) -> None:
        if self._previous_response is turn:
            self._previous_response = None

    def _failed_durable_response(self, answer: DurableAnswer) -> bytes:
        return self._handler.durable_answer_failed(answer, answer.failed)[0]

    def _failed_at_once(self, frame: memoryview, received: float) -> None:
        """A request whose immediate answer failed unexpectedly: logged, counted and the
        connection closed, as a handler's failure is on the general path (no response can
        say it in its API's terms)."""
        api_key, api_version, correlation_id = read_request_start(frame)
        request = KafkaRequest(api_key, api_version, correlation_id)
        logger.exception("%s: %s failed", self.peer, request)
        self._memory_pool.release(len(frame))
        self._close_for("failed_request", f"{request} failed")
        self._record(api_key, -1, received)

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
            self._finished(len(frame))
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
