"""One TCP connection to a broker: the ApiVersions handshake, then pipelined requests.

Requests are written as soon as they are sent; responses are matched to them by correlation id,
so they may come back in any order. The connection is an asyncio Protocol: bytes go straight
from ``data_received`` into the frame decoder, with no reader task or stream buffer in between.
Following Kafka, a request that times out closes the connection, and a closed connection fails
every request still waiting with NetworkError.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NamedTuple

from odradek.client.client_security import ClientSecurity
from odradek.errors import (
    InvalidRequestError,
    KafkaError,
    NetworkError,
    RequestTimedOutError,
    UnsupportedVersionError,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import ApiVersionsRequest, ApiVersionsResponse
from odradek.protocol.frame import Frame, FrameDecoder
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.schema import Message

logger = logging.getLogger(__name__)

MAX_RESPONSE_FRAME_BYTES = 1024 * 1024 * 1024
"""Largest response frame accepted: far above any fetch, low enough to catch a garbled stream."""

CLIENT_SOFTWARE_NAME = "odradek-python"
CLIENT_SOFTWARE_VERSION = "0.1.0"


class InFlightRequest(NamedTuple):
    """A request written on a connection, waiting for its response."""

    correlation_id: int
    api_key: ApiKey
    future: asyncio.Future[Frame]
    api_version: int = 0


class Connection(asyncio.Protocol):
    """A connection to the broker at ``host:port``; :meth:`connect` must succeed before use."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None,
        request_timeout_ms: int,
        security: ClientSecurity | None = None,
    ) -> None:
        self._security = security or ClientSecurity()
        self.host = host
        self.port = port
        self._client_id = client_id
        self._request_timeout_s = request_timeout_ms / 1000
        self._decoder = FrameDecoder(MAX_RESPONSE_FRAME_BYTES)
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, tuple[asyncio.Future[Frame], ApiKey]] = {}
        self._next_correlation_id = 0
        self._versions: dict[int, tuple[int, int]] = {}
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._failure: NetworkError | None = None
        self.api_versions: ApiVersionsResponse | None = None

    def __repr__(self) -> str:
        return f"Connection({self.host}:{self.port})"

    @property
    def closed(self) -> bool:
        return self._failure is not None

    async def connect(self) -> ApiVersionsResponse:
        """Open the socket and do the handshake; NetworkError if either fails."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._request_timeout_s):
                await loop.create_connection(
                    lambda: self,
                    self.host,
                    self.port,
                    ssl=self._security.ssl_context,
                    server_hostname=self._security.server_hostname(self.host),
                )
        except (OSError, TimeoutError) as error:
            self._failure = NetworkError(f"cannot connect to {self.host}:{self.port}: {error}")
            raise self._failure from None
        request = ApiVersionsRequest(CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION)
        try:
            response = await self.send(request)
            await self._security.authenticate(self.send)
        except KafkaError as error:
            self.abort(NetworkError(f"handshake with {self.host}:{self.port} failed: {error}"))
            raise
        self._versions = {v.api_key: (v.min_version, v.max_version) for v in response.api_versions}
        self.api_versions = response
        return response

    async def send(self, request: Message, timeout_ms: int | None = None) -> Any:
        """Send ``request`` and return its decoded response.

        Raises the response's request-level error, RequestTimedOutError after ``timeout_ms``
        (default ``request_timeout_ms``; the connection is then closed), or NetworkError when
        the connection is or becomes closed.
        """
        await self._writable()
        return await self.response(self._start(request), timeout_ms)

    def try_start(self, request: Message) -> InFlightRequest | None:
        """Write ``request`` at once, in the caller's step, when the connection is open and
        takes writes; None when it would have to wait (then :meth:`send` it). Await
        :meth:`response` for the answer."""
        if self._failure is not None or not self._can_write.is_set():
            return None
        return self._start(request)

    async def response(self, in_flight: InFlightRequest, timeout_ms: int | None = None) -> Any:
        """The decoded response to a request written by :meth:`try_start`; raises as
        :meth:`send` does."""
        timeout_s = self._request_timeout_s if timeout_ms is None else timeout_ms / 1000
        try:
            async with asyncio.timeout(timeout_s):
                frame = await in_flight.future
        except TimeoutError:
            name = in_flight.api_key.display_name
            message = f"no response to {name} request {in_flight.correlation_id} in {timeout_s}s"
            self.abort(NetworkError(f"connection closed: {message}"))
            raise RequestTimedOutError(message) from None
        finally:
            self._pending.pop(in_flight.correlation_id, None)
        return decode_response(in_flight.api_key, frame, in_flight.api_version)

    async def send_no_response(self, request: Message) -> None:
        """Send a request the broker does not answer (a Produce with ``acks`` 0)."""
        await self._writable()
        self._write(request, ApiKey(request.api_key), request.wire_version)

    async def close(self) -> None:
        """Close the socket; requests still waiting fail with NetworkError."""
        self.abort(NetworkError(f"connection to {self.host}:{self.port} was closed"))

    def abort(self, error: NetworkError) -> None:
        """Close now, failing every waiting request with ``error``."""
        if self._failure is None:
            self._failure = error
        if self._transport is not None:
            self._transport.abort()
        self._fail_pending()

    async def _writable(self) -> None:
        """Return once the transport takes writes; NetworkError if the connection is closed."""
        while not self._can_write.is_set() and self._failure is None:
            await self._can_write.wait()
        if self._failure is not None:
            raise self._failure

    def _start(self, request: Message) -> InFlightRequest:
        """Write ``request`` and register it for its response, in one step: nothing is missed."""
        api_key = ApiKey(request.api_key)
        version = request.wire_version
        correlation_id = self._write(request, api_key, version)
        future: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, api_key)
        return InFlightRequest(correlation_id, api_key, future, version)

    def _write(self, request: Message, api_key: ApiKey, version: int) -> int:
        self._check_served(api_key, version)
        header = RequestHeader(api_key, version, self._correlation_id(), self._client_id)
        self._transport.writelines(encode_request(header, request))
        return header.correlation_id

    def supports(self, api_key: ApiKey, version: int) -> bool:
        """Whether the broker serves ``version`` of ``api_key`` (as its handshake said)."""
        low, high = self._versions.get(api_key, (0, -1))
        return low <= version <= high

    def _check_served(self, api_key: ApiKey, version: int) -> None:
        """UnsupportedVersionError unless the broker serves ``version`` of ``api_key`` (a
        message's version is its own: each message class is one version of its API).
        Before the handshake, anything goes."""
        if self._versions and not self.supports(api_key, version):
            low, high = self._versions.get(api_key, (0, -1))
            served = f"v{low}..v{high}" if high >= 0 else "no version"
            raise UnsupportedVersionError(
                f"the broker at {self.host}:{self.port} does not support {api_key.display_name} "
                f"v{version} (it serves {served})"
            )

    def _correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        return correlation_id

    def _fail_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            if not future.done():
                future.set_exception(self._failure)
        self._can_write.set()

    # asyncio.Protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._decoder.feed(data)
        except InvalidRequestError as error:
            self.abort(NetworkError(f"unreadable response stream: {error.message}"))
            return
        for frame in frames:
            self._dispatch(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._failure is None:
            reason = f": {exc}" if exc else ""
            self._failure = NetworkError(f"connection to {self.host}:{self.port} lost{reason}")
        self._fail_pending()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def _dispatch(self, frame: Frame) -> None:
        try:
            correlation_id = ResponseHeader.from_header(frame.header).correlation_id
        except KafkaError as error:
            self.abort(NetworkError(f"response with a bad header: {error.message}"))
            return
        pending = self._pending.pop(correlation_id, None)
        if pending is None:
            logger.warning("%r: response to unknown request %d dropped", self, correlation_id)
        elif not pending[0].done():
            pending[0].set_result(frame)
