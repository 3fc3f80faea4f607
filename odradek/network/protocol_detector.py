"""ProtocolDetector: tells from a connection's first bytes which protocol it speaks.

One port serves both odradek's msgpack protocol and Kafka's. Both start with a 4-byte
big-endian size; they differ in the next five bytes:

- msgpack frame: ``uint32 header_size`` then the header, a msgpack map, so byte 8 is a map
  marker (0x80-0x8f fixmap, 0xde map16, 0xdf map32). A request header holds at least ``api``,
  ``v`` and ``id`` (13 bytes or more) and fits in its frame (it may be large: a JoinGroup
  carries its members' metadata in it).
- Kafka request: ``int16 api_key, int16 api_version, int32 correlation_id``.

The rule (docs/protocol.md, "One port, two protocols"): msgpack when 13 <= header_size <=
size - 4 and byte 8 is a map marker; otherwise Kafka when the size is at least 8 (the smallest
Kafka request header) and ``api_key`` and ``api_version`` are not negative; otherwise the bytes
are neither and the connection is closed. A Kafka request can only look like msgpack when its
correlation id is negative (byte 8, its first byte, is 0x80 or above): clients count
correlation ids up from 0 and open with ApiVersions. A TLS ClientHello (0x16 0x03 ...) is
refused as neither, by its first two bytes (as a size it would be above 350 MB).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from odradek.network.connection import ConnectionRegistry

logger = logging.getLogger(__name__)

DETECTION_BYTES = 9
MIN_MSGPACK_HEADER_BYTES = 13
MIN_KAFKA_REQUEST_BYTES = 8
TLS_HANDSHAKE, TLS_MAJOR_VERSION = 0x16, 0x03
MSGPACK_MAP_MARKERS = frozenset(range(0x80, 0x90)) | {0xDE, 0xDF}


class WireProtocol(enum.Enum):
    MSGPACK = "msgpack"
    KAFKA = "kafka"


def detect_protocol(first: bytes, max_request_bytes: int) -> WireProtocol | None:
    """The protocol whose request starts with ``first`` (at least 9 bytes), None for neither."""
    if first[0] == TLS_HANDSHAKE and first[1] == TLS_MAJOR_VERSION:
        return None  # a TLS record header: a client that expects TLS on a plaintext port
    size = int.from_bytes(first[0:4], "big", signed=True)
    if size < MIN_KAFKA_REQUEST_BYTES or size > max_request_bytes:
        return None
    header_size = int.from_bytes(first[4:8], "big")
    if MIN_MSGPACK_HEADER_BYTES <= header_size <= size - 4 and first[8] in MSGPACK_MAP_MARKERS:
        return WireProtocol.MSGPACK
    api_key = int.from_bytes(first[4:6], "big", signed=True)
    api_version = int.from_bytes(first[6:8], "big", signed=True)
    if api_key >= 0 and api_version >= 0:
        return WireProtocol.KAFKA
    return None


class DetectedConnection(Protocol):
    """What the detector hands a connection over to: a buffered protocol that can be told
    when the request it is fed began."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...

    def get_buffer(self, sizehint: int) -> memoryview: ...

    def buffer_updated(self, nbytes: int) -> None: ...

    def request_began_at(self, when: float) -> None: ...


ProtocolFactory = Callable[[], DetectedConnection]


class ProtocolDetector(asyncio.BufferedProtocol):
    """A new connection's protocol until its first 9 bytes arrive; then it hands the
    transport, and those bytes, to the connection type of the protocol detected.

    As on a connection whose protocol is known, silence is idleness (closed after
    ``idle_timeout_ms``, ``connections.max.idle.ms``) and the first byte starts the request's
    clock: the 9 bytes must arrive within ``request_timeout_ms`` (``socket.request.timeout.ms``)
    of it, or the connection is closed, logged with the peer and counted by ``on_timed_out``.
    The connection handed over is told when those bytes began (``request_began_at``), so its
    first request, too, must be whole within the timeout of its first byte."""

    def __init__(
        self,
        factories: dict[WireProtocol, ProtocolFactory],
        max_request_bytes: int,
        idle_timeout_ms: int,
        request_timeout_ms: int,
        registry: ConnectionRegistry,
        on_refused: Callable[[], None],
        on_timed_out: Callable[[], None],
    ) -> None:
        self._factories = factories
        self._max_request_bytes = max_request_bytes
        self._idle_timeout_ms = idle_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._registry = registry
        self._on_refused = on_refused
        self._on_timed_out = on_timed_out
        self._buffer = bytearray(DETECTION_BYTES)
        self._received = 0
        self._first_byte_at = 0.0  # loop time
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._handed_over = False
        self.peer = "unknown peer"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = f"{peer[0]}:{peer[1]}"
        if not self._registry.register(self):  # counted from accept on (max.connections)
            transport.abort()
            return
        self._timer = asyncio.get_running_loop().call_later(
            self._idle_timeout_ms / 1000, self._idle
        )

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self._buffer)[self._received :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._timer is None:
            return  # refused at accept
        first_bytes = self._received == 0
        if first_bytes:
            self._first_byte_at = asyncio.get_running_loop().time()
        self._received += nbytes
        if self._received < DETECTION_BYTES and not self._size_refused():
            if first_bytes:
                self._timer.cancel()
                self._timer = asyncio.get_running_loop().call_later(
                    self._request_timeout_ms / 1000, self._timed_out
                )
            return
        self._timer.cancel()
        first = bytes(self._buffer[: self._received])
        protocol = None
        if self._received == DETECTION_BYTES:
            protocol = detect_protocol(first, self._max_request_bytes)
            if protocol not in self._factories:
                protocol = None  # a protocol this listener does not serve
        if protocol is None:
            logger.warning(
                "%s: closing connection: its first bytes %s are neither a Kafka request nor "
                "an odradek frame (or ask for more than socket.request.max.bytes=%d)",
                self.peer,
                first.hex(),
                self._max_request_bytes,
            )
            self._on_refused()
            self._transport.abort()
            return
        connection = self._factories[protocol]()
        self._handed_over = True
        self._registry.unregister(self)  # the connection registers itself
        self._transport.set_protocol(connection)
        connection.connection_made(self._transport)
        if self._transport.is_closing():
            return
        fed = 0
        while fed < len(first):
            target = connection.get_buffer(len(first) - fed)
            count = min(len(target), len(first) - fed)
            target[:count] = first[fed : fed + count]
            fed += count
            connection.buffer_updated(count)
        connection.request_began_at(self._first_byte_at)

    def _size_refused(self) -> bool:
        """Whether the size prefix alone (once its 4 bytes are in) rules out both protocols."""
        if self._received < 4:
            return False
        size = int.from_bytes(self._buffer[0:4], "big", signed=True)
        return size < MIN_KAFKA_REQUEST_BYTES or size > self._max_request_bytes

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self._handed_over:
            self._registry.unregister(self)

    async def shutdown(self, timeout_s: float = 10.0) -> None:
        """The broker stops: a connection that has not spoken yet has nothing to finish."""
        if self._transport is not None and not self._handed_over:
            self._transport.abort()

    def _idle(self) -> None:
        logger.info(
            "%s: closing connection silent for %.1f s (connections.max.idle.ms)",
            self.peer,
            self._idle_timeout_ms / 1000,
        )
        self._transport.abort()

    def _timed_out(self) -> None:
        logger.warning(
            "%s: closing connection: a request still incomplete after %.1f s "
            "(socket.request.timeout.ms=%d), %d of its bytes received, too few to tell its "
            "protocol",
            self.peer,
            self._request_timeout_ms / 1000,
            self._request_timeout_ms,
            self._received,
        )
        self._on_timed_out()
        self._transport.abort()
