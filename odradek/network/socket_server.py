"""SocketServer: the listening socket and the set of open client connections."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial

from odradek.config.listeners import EndPoint
from odradek.network.connection import Connection, ConnectionRegistry, ConnectionSettings
from odradek.network.network_metrics import NetworkMetrics
from odradek.network.protocol_detector import ProtocolDetector, WireProtocol
from odradek.network.request_memory_pool import RequestMemoryPool
from odradek.network.sasl_authenticator import SaslAuthenticator
from odradek.network.session import Session

logger = logging.getLogger(__name__)

LISTEN_BACKLOG = 1024


AuthenticatorFactory = Callable[[], SaslAuthenticator]

ConnectionFactory = Callable[
    [ConnectionSettings, ConnectionRegistry, NetworkMetrics, Executor, RequestMemoryPool, Session],
    Connection,
]
"""Makes the connection of one wire protocol: the server binds its request handler in (e.g.
``partial(KafkaConnection, kafka_handler)``), the socket server passes the rest."""


class SocketServer:
    """Accepts connections on every listener (at most ``max_connections`` open at once over
    all of them) and closes them all, gracefully, at shutdown. The connections share one
    request memory pool (``queued.max.request.bytes``)."""

    def __init__(
        self,
        settings: ConnectionSettings,
        max_connections: int,
        metrics: NetworkMetrics,
        executor: Executor,
        sasl_max_receive_bytes: int = 524288,
    ) -> None:
        self._settings = settings
        self._max_connections = max_connections
        self._metrics = metrics
        self._executor = executor
        self._sasl_max_receive_bytes = sasl_max_receive_bytes
        self._servers: list[asyncio.Server] = []
        self._connection_factories: dict[WireProtocol, ConnectionFactory] = {}
        self._connections: set[Connection] = set()
        queued = settings.queued_max_request_bytes
        self.memory_pool = RequestMemoryPool(None if queued == -1 else queued)
        metrics.request_memory.set_function(lambda: self.memory_pool.reserved)

    async def bind(
        self,
        endpoint: EndPoint,
        ssl_context: ssl.SSLContext | None = None,
        authenticator: AuthenticatorFactory | None = None,
        ssl_handshake_timeout_s: float | None = None,
    ) -> int:
        """Listen on ``endpoint`` (port 0: any free port) without accepting yet; return the
        port. TLS listeners get ``ssl_context``; SASL listeners authenticate each connection
        with a fresh ``authenticator()``."""
        loop = asyncio.get_running_loop()
        tls = {}
        if ssl_context is not None:
            tls = {"ssl": ssl_context, "ssl_handshake_timeout": ssl_handshake_timeout_s}
        server = await loop.create_server(
            partial(self._new_connection, endpoint, authenticator),
            endpoint.host or None,
            endpoint.port,
            backlog=LISTEN_BACKLOG,
            reuse_address=True,
            start_serving=False,
            **tls,
        )
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    async def start_serving(self, connections: dict[WireProtocol, ConnectionFactory]) -> None:
        """Start accepting connections, each made by the factory of the wire protocol its
        first bytes speak (the server's Kafka and msgpack connections)."""
        self._connection_factories = dict(connections)
        for server in self._servers:
            await server.start_serving()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def register(self, connection: Connection) -> bool:
        if len(self._connections) >= self._max_connections:
            logger.warning(
                "%s: connection refused: max.connections=%d are open",
                connection.peer,
                self._max_connections,
            )
            self._metrics.rejected_connections.inc()
            return False
        self._connections.add(connection)
        self._metrics.open_connections.set(len(self._connections))
        return True

    def unregister(self, connection: Connection) -> None:
        self._connections.discard(connection)
        self._metrics.open_connections.set(len(self._connections))

    def stop_accepting(self) -> None:
        for server in self._servers:
            server.close()

    async def shutdown(self, timeout_s: float) -> None:
        """Stop accepting, then let every connection finish its requests and close."""
        self.stop_accepting()
        connections = list(self._connections)
        if connections:
            await asyncio.gather(*(c.shutdown(timeout_s) for c in connections))
        for server in self._servers:
            await server.wait_closed()

    def _new_connection(
        self, endpoint: EndPoint, authenticator: AuthenticatorFactory | None
    ) -> asyncio.BufferedProtocol:
        # --- protocol detection hook: the first bytes pick the connection type (msgpack or
        # Kafka); see odradek/network/protocol_detector.py.
        # --- security hook: each connection's Session carries its listener and, on a SASL
        # listener, the authenticator that gates its requests until it has authenticated.
        session = Session(endpoint, authenticator=authenticator() if authenticator else None)
        args = (self._settings, self, self._metrics, self._executor, self.memory_pool, session)
        factories = {
            wire: partial(factory, *args) for wire, factory in self._connection_factories.items()
        }
        max_request_bytes = self._settings.max_request_bytes
        idle_timeout_ms = self._settings.max_idle_ms
        request_timeout_ms = self._settings.request_timeout_ms
        if session.authenticator is not None:  # the SASL deadline holds from accept on
            max_request_bytes = min(max_request_bytes, self._sasl_max_receive_bytes)
            sasl_timeout_ms = int(session.authenticator.timeout_s * 1000)
            idle_timeout_ms = min(idle_timeout_ms, sasl_timeout_ms)
            request_timeout_ms = min(request_timeout_ms, sasl_timeout_ms)
        return ProtocolDetector(
            factories,
            max_request_bytes,
            idle_timeout_ms,
            request_timeout_ms,
            self,
            self._metrics.closed_connections.labels("unknown_protocol").inc,
            self._metrics.closed_connections.labels("request_timeout").inc,
        )
