"""Broker: the lifecycle around the LogManager: start it and serve it, stop in reverse."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from importlib.metadata import version
from wsgiref.simple_server import WSGIServer

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.log_cleaner import LogCleaner
from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config.broker_config import BrokerConfig
from odradek.config.listeners import advertised_host
from odradek.errors import KafkaError
from odradek.native import native_summary
from odradek.network.connection import ConnectionSettings
from odradek.network.event_loop_lag_monitor import EventLoopLagMonitor
from odradek.network.protocol_detector import WireProtocol
from odradek.network.sasl_authenticator import SaslAuthenticator
from odradek.network.socket_server import SocketServer
from odradek.network.ssl_factory import server_ssl_context
from odradek.protocol.api_versions import ApiVersionsResponse, supported_api_versions
from odradek.protocol.values.broker_metadata import BrokerMetadata
from odradek.security.acl_store import AclStore
from odradek.security.credential_store import CredentialStore
from odradek.server.admin.admin_manager import AdminManager
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.server.admin.topic_ids import TopicIds
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.group.coordinator_log import CoordinatorLog
from odradek.server.group.group_coordinator import GroupCoordinator
from odradek.server.group.group_coordinator_collector import GroupCoordinatorCollector
from odradek.server.group.group_coordinator_metrics import GroupCoordinatorMetrics
from odradek.server.kafka.connection import KafkaConnection
from odradek.server.kafka.groups import KafkaGroupApis
from odradek.server.kafka.partition_admin import KafkaPartitionAdminApis
from odradek.server.kafka.request_handler import KafkaRequestHandler
from odradek.server.kafka.security import KafkaSecurityApis
from odradek.server.kafka.transactions import KafkaTransactionApis
from odradek.server.log_flusher import LogFlusher
from odradek.server.metrics.broker_metrics import BrokerMetrics
from odradek.server.msgpack.connection import MsgpackConnection
from odradek.server.msgpack.groups import MsgpackGroupApis
from odradek.server.msgpack.kafka_data import MsgpackKafkaData
from odradek.server.msgpack.quotas import MsgpackQuotaApis
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.quota.client_quota_admin import ClientQuotaAdmin
from odradek.server.quota.client_quota_store import ClientQuotaStore
from odradek.server.quota.client_quotas import ClientQuotas
from odradek.server.quota.quota_collector import QuotaCollector
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext
from odradek.server.transaction.transaction_coordinator import TransactionCoordinator
from odradek.server.transaction.transaction_coordinator_keys import TransactionCoordinatorKeys
from odradek.server.transaction.transaction_coordinator_metrics import (
    TransactionCoordinatorMetrics,
)
from odradek.server.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from odradek.server.transaction.transaction_state_manager import TransactionStateManager
from odradek.storage.descriptor_budget import raise_descriptor_limit
from odradek.storage.idle_file_cache import IDLE_FILES, default_capacity
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

IO_THREADS = 8
"""Threads for work that may wait on the disk: cold reads, admin changes, start and stop."""
APPEND_THREADS = 2
"""Threads for large appends and appends whose batches expand far once decompressed (one at a
time per partition, in arrival order)."""
APPEND_THREAD_NICENESS = 10
"""How much lower the append threads' scheduling priority is than the event loop's: their
work is bulk (a client can make them decompress up to max.message.bytes x
message.decompression.max.ratio per batch), the loop's is every client's latency."""
FLUSH_THREADS = 4
"""Threads for acks=all fsyncs (one at a time per partition: group commit)."""
SHUTDOWN_TIMEOUT_S = 10.0


def _yield_to_the_loop() -> None:
    """Lower the calling thread's priority (Linux schedules threads one by one); best effort."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), APPEND_THREAD_NICENESS)
    except OSError as error:
        logger.info("append threads keep the loop's priority: %s", error)


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

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.metrics = BrokerMetrics()
        self.log_manager = LogManager(config)
        self.topic_admin = TopicAdmin(self.log_manager, config)
        self.log_cleaner = LogCleaner(
            CleanerConfig.from_broker_config(config),
            self.log_manager.all_logs,
            on_dir_failure=self.log_manager.failure_channel.maybe_add_offline_log_dir,
        )
        self._io_executor = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="odradek-io")
        self._append_executor = ThreadPoolExecutor(
            APPEND_THREADS, thread_name_prefix="odradek-append", initializer=_yield_to_the_loop
        )
        self._flusher = LogFlusher(FLUSH_THREADS, config.log_flush_commit_linger_ms)
        self.replica_manager = ReplicaManager(
            self.log_manager, self._append_executor, self._flusher, self._io_executor
        )
        self.producer_ids = ProducerIdManager(self.log_manager.log_dirs, self._io_executor)
        self.group_coordinator_log = CoordinatorLog(
            config,
            self.log_manager,
            self.replica_manager,
            self._io_executor,
            clock,
            self.topic_admin.create_topic,
        )
        self.group_metrics = GroupCoordinatorMetrics(self.metrics.registry)
        self.group_coordinator = GroupCoordinator(
            config, self.group_coordinator_log, self.log_manager, self.group_metrics, clock
        )
        self.transaction_state = TransactionStateManager(
            config,
            self.log_manager,
            self.replica_manager,
            self._io_executor,
            clock,
            self.topic_admin.create_topic,
        )
        self.transaction_metrics = TransactionCoordinatorMetrics(self.metrics.registry)
        self.transaction_coordinator = TransactionCoordinator(
            config,
            self.transaction_state,
            self.producer_ids,
            TransactionMarkerChannelManager(
                self.replica_manager,
                self.transaction_state,
                self.group_coordinator.handle_transaction_completion,
            ),
            self.transaction_metrics,
            clock,
        )
        # A TxnOffsetCommit's __consumer_offsets partition is checked against (or, KIP-890,
        # added to) the producer's transaction.
        self.group_coordinator.verify_transaction = (
            self.transaction_coordinator.verify_or_add_partitions
        )
        settings = ConnectionSettings(
            config.socket_request_max_bytes,
            config.connections_max_idle_ms,
            config.socket_request_timeout_ms,
            config.queued_max_request_bytes,
        )
        self._socket_server = SocketServer(
            settings,
            config.max_connections,
            self.metrics,
            self._io_executor,
            config.sasl_server_max_receive_size,
        )
        security_dir = config.log_dir_paths[0]
        self.credentials = CredentialStore(security_dir)
        self.authorizer = Authorizer(
            AclStore(security_dir),
            enabled=bool(config.authorizer_class_name),
            super_users=Authorizer.parse_super_users(config.super_users or ""),
            allow_if_no_acl=config.allow_everyone_if_no_acl_found,
        )
        self.quotas = ClientQuotas(
            ClientQuotaStore(security_dir),
            config.quota_window_num,
            config.quota_window_size_seconds,
        )
        self._lag_monitor = EventLoopLagMonitor(self.metrics.event_loop_lag)
        self._metrics_server: WSGIServer | None = None
        self.port = 0
        self.listener_ports: dict[str, int] = {}
        self.served_api_keys: dict[str, frozenset[int]] = {}
        """The API keys each protocol's router answers ("kafka", "msgpack"), once started."""
        """The port each listener is bound to, by listener name."""
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
            await self._bind_listeners()
            self._metrics_server = self.metrics.serve(
                self.config.metrics_host, self.config.metrics_port
            )
        except BaseException:
            await self._stop_storage()
            raise
        self.metrics_port = self._metrics_server.server_port
        self._lag_monitor.start()
        self.group_coordinator.startup()
        self.transaction_coordinator.startup()
        self.quotas.start()
        apis, kafka_handler = self._handlers()
        self.served_api_keys = {
            "kafka": kafka_handler.served_api_keys,
            "msgpack": apis.served_api_keys,
        }
        await self._socket_server.start_serving(
            {
                WireProtocol.KAFKA: partial(KafkaConnection, kafka_handler),
                WireProtocol.MSGPACK: partial(MsgpackConnection, apis),
            }
        )
        logger.info(
            "broker %d serving on %s (metrics on %s:%d)",
            self.config.broker_id,
            ", ".join(
                f"{e.listener_name}://{e.host or '*'}:{self.listener_ports[e.listener_name]}"
                for e in self.config.endpoints()
            ),
            self.config.metrics_host,
            self.metrics_port,
        )

    async def _bind_listeners(self) -> None:
        """Bind every listener, TLS and SASL as their security protocols say."""
        config = self.config
        endpoints = config.endpoints()
        ssl_context = server_ssl_context(config) if any(e.uses_tls for e in endpoints) else None

        def authenticator() -> SaslAuthenticator:
            return SaslAuthenticator(
                config.sasl_enabled_mechanisms,
                self.credentials,
                self._io_executor,
                config.sasl_server_max_receive_size,
                config.sasl_server_authentication_timeout_ms / 1000,
                config.connection_failed_authentication_delay_ms / 1000,
            )

        for endpoint in endpoints:
            port = await self._socket_server.bind(
                endpoint,
                ssl_context if endpoint.uses_tls else None,
                authenticator if endpoint.uses_sasl else None,
                config.ssl_handshake_timeout_ms / 1000,
            )
            self.listener_ports[endpoint.listener_name] = port
        self.port = self.listener_ports[endpoints[0].listener_name]

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, then shut the logs down cleanly."""
        logger.info("broker %d shutting down", self.config.broker_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SHUTDOWN_TIMEOUT_S
        self._socket_server.stop_accepting()
        self.quotas.stop()
        self.replica_manager.shutdown()
        await self.transaction_coordinator.shutdown()
        await self.group_coordinator.shutdown()
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
        self.group_coordinator.load()
        self.transaction_coordinator.load()
        self.quotas.load()
        self.metrics.registry.register(QuotaCollector(self.quotas))
        self.metrics.registry.register(
            GroupCoordinatorCollector(self.group_coordinator, self.group_metrics, self.log_manager)
        )

    async def _stop_storage(self) -> None:
        await self._in_thread(self.log_cleaner.shutdown)
        await self._in_thread(self.log_manager.shutdown)
        self._shut_down_executors()

    def _shut_down_executors(self) -> None:
        for executor in (self._append_executor, self._io_executor):
            executor.shutdown()
        self._flusher.shutdown()

    def _handlers(self) -> tuple[ApiRouter, KafkaRequestHandler]:
        """The handlers of both protocols: ApiRouter, and the Kafka protocol's over it."""
        config = self.config
        host, port = self.advertised()
        broker = BrokerMetadata(config.broker_id, host, port)
        topic_ids = TopicIds(self.log_manager, self._io_executor)

        def topic_deleted(topic: str) -> None:
            """Forget a deleted topic's partitions, its id and, as Kafka does, the offsets
            committed on it."""
            self.replica_manager.forget_topic(topic)
            topic_ids.forget(topic)
            self.group_coordinator.topic_deleted(topic)

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
        transaction_keys = TransactionCoordinatorKeys(self.transaction_coordinator, self.authorizer)
        groups = MsgpackGroupApis(
            self.group_coordinator,
            self.group_coordinator_log,
            broker,
            self.authorizer,
            transaction_keys,
        )
        apis = ApiRouter(
            self.replica_manager,
            admin,
            api_versions,
            self.metrics,
            self.producer_ids,
            groups,
            self.authorizer,
            self.quotas,
            MsgpackQuotaApis(ClientQuotaAdmin(self.quotas, self.authorizer, self._io_executor)),
        )
        transactions = KafkaTransactionApis(
            self.transaction_coordinator,
            self.group_coordinator_log,
            self._partition_exists,
            config.transaction_partition_verification_enable,
            self.authorizer,
        )
        kafka_handler = KafkaRequestHandler(
            apis,
            self.replica_manager,
            admin,
            self.producer_ids,
            topic_ids,
            config,
            config.broker_id,
            self.endpoint_for,
            KafkaSecurityApis(self.credentials, self.authorizer, self._io_executor),
            self.authorizer,
            self._io_executor,
            KafkaGroupApis(
                self.group_coordinator,
                self.group_coordinator_log,
                config.broker_id,
                self.endpoint_for,
                topic_ids,
                self.authorizer,
                transaction_keys,
            ),
            self.quotas,
            KafkaPartitionAdminApis(self.log_manager, self.authorizer, self._io_executor),
            transactions,
        )
        apis.serve_kafka_data(MsgpackKafkaData(kafka_handler.handlers))
        apis.check_transactional_produce(transactions.check_transactional_produce)
        return apis, kafka_handler

    def _partition_exists(self, tp: TopicPartition) -> bool:
        try:
            self.replica_manager.partition(tp.topic, tp.partition)
        except KafkaError:
            return False
        return True

    def advertised(self, listener_name: str | None = None) -> tuple[str, int]:
        """The host and port Metadata tells a client of ``listener_name`` (default: the
        first listener) to connect to (advertised.listeners)."""
        endpoint = self.config.advertised_listener(listener_name)
        bound = self.listener_ports.get(endpoint.listener_name, self.port)
        return advertised_host(endpoint.host), endpoint.port or bound

    def endpoint_for(self, context: RequestContext) -> tuple[str, int]:
        """The host and port the client of a request reaches this broker at: the advertised
        endpoint of the listener the request came in on (what Metadata, DescribeCluster and
        FindCoordinator name)."""
        session = context.session
        return self.advertised(session.listener.listener_name if session is not None else None)

    async def _in_thread(self, function: Callable[[], object]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io_executor, function)
