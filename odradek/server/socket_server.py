"""SocketServer: the listening socket and the set of open client connections."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from odradek.server.client_connection import ClientConnection, ConnectionSettings
from odradek.server.kafka_apis import KafkaApis
from odradek.server.kafka_connection import KafkaConnection
from odradek.server.kafka_request_handler import KafkaRequestHandler
from odradek.server.metrics import BrokerMetrics
from odradek.server.protocol_detector import ProtocolDetector, WireProtocol
from odradek.server.request_memory_pool import RequestMemoryPool

logger = logging.getLogger(__name__)

LISTEN_BACKLOG = 1024


class SocketServer:
    """Accepts connections (at most ``max_connections`` open at once) and closes them all,
    gracefully, at shutdown. The connections share one request memory pool
    (``queued.max.request.bytes``)."""

    def __init__(
        self,
        settings: ConnectionSettings,
        max_connections: int,
        metrics: BrokerMetrics,
        executor: Executor,
    ) -> None:
        self._settings = settings
        self._max_connections = max_connections
        self._metrics = metrics
        self._executor = executor
        self._server: asyncio.Server | None = None
        self._apis: KafkaApis | None = None
        self._kafka_handler: KafkaRequestHandler | None = None
        self._connections: set[ClientConnection] = set()
        queued = settings.queued_max_request_bytes
        self.memory_pool = RequestMemoryPool(None if queued == -1 else queued)
        metrics.request_memory.set_function(lambda: self.memory_pool.reserved)

    async def bind(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port) without accepting yet; return the port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection,
            host,
            port,
            backlog=LISTEN_BACKLOG,
            reuse_address=True,
            start_serving=False,
        )
        return self._server.sockets[0].getsockname()[1]

    async def start_serving(self, apis: KafkaApis, kafka_handler: KafkaRequestHandler) -> None:
        """Start accepting connections, answering their requests with ``apis`` (msgpack) or
        ``kafka_handler`` (Kafka's protocol)."""
        self._apis = apis
        self._kafka_handler = kafka_handler
        await self._server.start_serving()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def register(self, connection: ClientConnection) -> bool:
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

    def unregister(self, connection: ClientConnection) -> None:
        self._connections.discard(connection)
        self._metrics.open_connections.set(len(self._connections))

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def shutdown(self, timeout_s: float) -> None:
        """Stop accepting, then let every connection finish its requests and close."""
        self.stop_accepting()
        connections = list(self._connections)
        if connections:
            await asyncio.gather(*(c.shutdown(timeout_s) for c in connections))
        if self._server is not None:
            await self._server.wait_closed()

    def _new_connection(self) -> asyncio.BufferedProtocol:
        # --- protocol detection hook: the first bytes pick the connection type (msgpack or
        # Kafka); see odradek/server/protocol_detector.py.
        return ProtocolDetector(
            {
                WireProtocol.MSGPACK: lambda: ClientConnection(
                    self._apis,
                    self._settings,
                    self,
                    self._metrics,
                    self._executor,
                    self.memory_pool,
                ),
                WireProtocol.KAFKA: lambda: KafkaConnection(
                    self._kafka_handler,
                    self._settings,
                    self,
                    self._metrics,
                    self._executor,
                    self.memory_pool,
                ),
            },
            self._settings.max_request_bytes,
            self._settings.max_idle_ms,
            self._settings.request_timeout_ms,
            self,
            self._metrics.closed_connections.labels("unknown_protocol").inc,
            self._metrics.closed_connections.labels("request_timeout").inc,
        )
