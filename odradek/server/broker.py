"""Broker: the lifecycle around the LogManager: start it and serve it, stop in reverse."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from wsgiref.simple_server import WSGIServer

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.log_cleaner import LogCleaner
from odradek.config.broker_config import BrokerConfig
from odradek.config.listeners import advertised_host
from odradek.native import native_summary
from odradek.protocol.api_versions import ApiVersionsResponse, supported_api_versions
from odradek.protocol.metadata import BrokerMetadata
from odradek.server.admin_manager import AdminManager
from odradek.server.client_connection import ConnectionSettings
from odradek.server.event_loop_lag_monitor import EventLoopLagMonitor
from odradek.server.kafka_apis import KafkaApis
from odradek.server.kafka_request_handler import KafkaRequestHandler
from odradek.server.metrics import BrokerMetrics
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.replica_manager import ReplicaManager
from odradek.server.socket_server import SocketServer
from odradek.server.topic_ids import TopicIds
from odradek.storage.descriptor_budget import raise_descriptor_limit
from odradek.storage.idle_file_cache import IDLE_FILES, default_capacity
from odradek.storage.log_manager import LogManager
from odradek.storage.topic_admin import TopicAdmin

logger = logging.getLogger(__name__)

IO_THREADS = 8
"""Threads for work that may wait on the disk: cold reads, admin changes, start and stop."""
APPEND_THREADS = 2
"""Threads for large appends (one at a time per partition, in arrival order)."""
FLUSH_THREADS = 4
"""Threads for acks=all fsyncs (one at a time per partition: group commit)."""
SHUTDOWN_TIMEOUT_S = 10.0


class Broker:
    """One broker: its logs and their cleaner, its listener on ``host:port`` and metrics on
    ``metrics.port``.

    ``start()`` loads the logs (recovering them if the last stop was not clean), starts the
    log cleaner and begins serving; ``stop()`` stops accepting, lets in-flight requests finish
    (waiting fetches are answered at once), waits for topic operations that outlived their
    requests (a creation still running is abandoned and rolled back), stops the cleaner, then
    shuts the LogManager down: flush, checkpoints and, only when nothing is left half done,
    clean-shutdown markers. Each wait is bounded. Ports given as 0 are chosen by the system;
    ``port`` and ``metrics_port`` tell which.
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.metrics = BrokerMetrics()
        self.log_manager = LogManager(config)
        self.topic_admin = TopicAdmin(self.log_manager, config)
        self.log_cleaner = LogCleaner(
            CleanerConfig.from_broker_config(config), self.log_manager.all_logs, self.log_manager
        )
        self._io_executor = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="odradek-io")
        self._append_executor = ThreadPoolExecutor(
            APPEND_THREADS, thread_name_prefix="odradek-append"
        )
        self._flush_executor = ThreadPoolExecutor(FLUSH_THREADS, thread_name_prefix="odradek-flush")
        self.replica_manager = ReplicaManager(
            self.log_manager, self._append_executor, self._flush_executor, self._io_executor
        )
        self.producer_ids = ProducerIdManager(self.log_manager.log_dirs, self._io_executor)
        settings = ConnectionSettings(
            config.socket_request_max_bytes, config.connections_max_idle_ms
        )
        self._socket_server = SocketServer(
            settings, config.max_connections, self.metrics, self._io_executor
        )
        self._lag_monitor = EventLoopLagMonitor(self.metrics.event_loop_lag)
        self._metrics_server: WSGIServer | None = None
        self.port = 0
        self.metrics_port = 0

    async def start(self) -> None:
        """Load the logs, bind the listener and the metrics endpoint, start serving.

        On failure (a locked log directory, a port in use) everything started is stopped
        again and the error raised.
        """
        logger.info("broker %d starting; %s", self.config.broker_id, native_summary())
        try:
            await self._in_thread(self._start_storage)
        except BaseException:
            self._shut_down_executors()
            raise
        try:
            listener = self.config.listener()
            self.port = await self._socket_server.bind(listener.host or None, listener.port)
            self._metrics_server = self.metrics.serve(
                self.config.metrics_host, self.config.metrics_port
            )
        except BaseException:
            await self._stop_storage()
            raise
        self.metrics_port = self._metrics_server.server_port
        self._lag_monitor.start()
        await self._socket_server.start_serving(*self._handlers())
        logger.info(
            "broker %d serving on %s:%d (metrics on %s:%d)",
            self.config.broker_id,
            self.config.listener().host or "*",
            self.port,
            self.config.metrics_host,
            self.metrics_port,
        )

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, then shut the logs down cleanly."""
        logger.info("broker %d shutting down", self.config.broker_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_TIMEOUT_S
        self._socket_server.stop_accepting()
        self.replica_manager.shutdown()
        await self._socket_server.shutdown(SHUTDOWN_TIMEOUT_S)
        # Topic operations that outlived their requests get what is left of the same bound.
        remaining_s = max(0.0, deadline - loop.time())
        await self._in_thread(lambda: self.topic_admin.shutdown(remaining_s))
        await self._lag_monitor.stop()
        if self._metrics_server is not None:
            await self._in_thread(self._metrics_server.shutdown)
            self._metrics_server.server_close()
        await self._stop_storage()
        logger.info("broker %d shut down", self.config.broker_id)

    def _start_storage(self) -> None:
        raise_descriptor_limit()
        IDLE_FILES.set_capacity(default_capacity())  # a share of the limit now in force
        self.log_manager.startup()
        self.log_manager.attach_cleaner(self.log_cleaner)
        self.log_cleaner.startup()
        self.metrics.watch(self.log_manager)
        self.metrics.watch_cleaner(self.log_cleaner)
        self.replica_manager.startup()
        self.producer_ids.load()

    async def _stop_storage(self) -> None:
        await self._in_thread(self.log_cleaner.shutdown)
        await self._in_thread(self.log_manager.shutdown)
        self._shut_down_executors()

    def _shut_down_executors(self) -> None:
        for executor in (self._append_executor, self._flush_executor, self._io_executor):
            executor.shutdown()

    def _handlers(self) -> tuple[KafkaApis, KafkaRequestHandler]:
        """The handlers of both protocols: KafkaApis, and the Kafka protocol's over it."""
        config = self.config
        host, port = self.advertised()
        broker = BrokerMetadata(config.broker_id, host, port)
        topic_ids = TopicIds(self.log_manager, self._io_executor)

        def topic_deleted(topic: str) -> None:
            self.replica_manager.forget_topic(topic)
            topic_ids.forget(topic)

        admin = AdminManager(
            self.log_manager,
            self.topic_admin,
            config,
            broker,
            self._io_executor,
            topic_deleted,
        )
        api_versions = ApiVersionsResponse(
            supported_api_versions(),
            config.broker_id,
            admin.cluster_id,
            version("odradek"),
            config.socket_request_max_bytes,
        )
        apis = KafkaApis(
            self.replica_manager, admin, api_versions, self.metrics, self.producer_ids
        )
        kafka_handler = KafkaRequestHandler(
            apis,
            self.replica_manager,
            admin,
            topic_ids,
            config,
            config.broker_id,
            self.advertised,
        )
        return apis, kafka_handler

    def advertised(self) -> tuple[str, int]:
        """The host and port Metadata tells clients to connect to (advertised.listeners)."""
        endpoint = self.config.advertised_listener()
        return advertised_host(endpoint.host), endpoint.port or self.port

    async def _in_thread(self, function: Callable[[], object]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io_executor, function)
