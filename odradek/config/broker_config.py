"""The broker's settings: Kafka's broker-level names and defaults plus odradek's listeners."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from odradek.config.broker_configs import BROKER_CONFIG_DEF, TOPIC_CONFIG_SYNONYMS
from odradek.config.config_entry import ConfigEntry
from odradek.config.config_source import ConfigSource
from odradek.config.config_type import ConfigType
from odradek.config.listeners import EndPoint, parse_listeners, security_protocol_map
from odradek.config.log_config import LogConfig
from odradek.config.setting import Setting
from odradek.config.topic_configs import TOPIC_CONFIG_DEF
from odradek.errors import InvalidConfigError

_default = BROKER_CONFIG_DEF.default
MIN_DEDUPE_BUFFER_PER_THREAD = 1024 * 1024


@dataclass(frozen=True)
class BrokerConfig:
    """Every broker key as an attribute (the Kafka name with dots as underscores).

    Keys Kafka leaves unset by default (``log.roll.ms``, ``log.dirs``, ...) are None here and
    fall back to their coarser synonym. ``static_keys`` records which keys the operator set
    (file, environment or ``--set``), so DescribeConfigs can report STATIC_BROKER_CONFIG.
    Direct construction (tests) is not validated; :func:`load_broker_config` and
    :meth:`from_settings` are.
    """

    broker_id: int = _default("broker.id")
    cluster_id: str | None = _default("cluster.id")
    host: str = _default("host")
    port: int = _default("port")
    listeners: tuple[str, ...] | None = _default("listeners")
    advertised_listeners: tuple[str, ...] | None = _default("advertised.listeners")
    listener_security_protocol_map: tuple[str, ...] = _default("listener.security.protocol.map")
    metrics_host: str = _default("metrics.host")
    metrics_port: int = _default("metrics.port")
    log_dirs: tuple[str, ...] | None = _default("log.dirs")
    log_dir: str = _default("log.dir")
    log_segment_bytes: int = _default("log.segment.bytes")
    log_roll_ms: int | None = _default("log.roll.ms")
    log_roll_hours: int = _default("log.roll.hours")
    log_roll_jitter_ms: int | None = _default("log.roll.jitter.ms")
    log_roll_jitter_hours: int = _default("log.roll.jitter.hours")
    log_index_size_max_bytes: int = _default("log.index.size.max.bytes")
    log_index_interval_bytes: int = _default("log.index.interval.bytes")
    log_retention_ms: int | None = _default("log.retention.ms")
    log_retention_minutes: int | None = _default("log.retention.minutes")
    log_retention_hours: int = _default("log.retention.hours")
    log_retention_bytes: int = _default("log.retention.bytes")
    log_retention_check_interval_ms: int = _default("log.retention.check.interval.ms")
    log_initial_task_delay_ms: int = _default("log.initial.task.delay.ms")
    log_cleanup_policy: tuple[str, ...] = _default("log.cleanup.policy")
    log_message_timestamp_type: str = _default("log.message.timestamp.type")
    log_message_timestamp_before_max_ms: int = _default("log.message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms: int = _default("log.message.timestamp.after.max.ms")
    message_max_bytes: int = _default("message.max.bytes")
    log_message_decompression_max_ratio: int = _default("log.message.decompression.max.ratio")
    compression_type: str = _default("compression.type")
    log_flush_interval_messages: int = _default("log.flush.interval.messages")
    log_flush_interval_ms: int | None = _default("log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int = _default("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = _default(
        "log.flush.offset.checkpoint.interval.ms"
    )
    log_flush_start_offset_checkpoint_interval_ms: int = _default(
        "log.flush.start.offset.checkpoint.interval.ms"
    )
    replica_high_watermark_checkpoint_interval_ms: int = _default(
        "replica.high.watermark.checkpoint.interval.ms"
    )
    log_segment_delete_delay_ms: int = _default("log.segment.delete.delay.ms")
    log_preallocate: bool = _default("log.preallocate")
    producer_id_expiration_ms: int = _default("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = _default(
        "producer.id.expiration.check.interval.ms"
    )
    log_cleaner_enable: bool = _default("log.cleaner.enable")
    log_cleaner_threads: int = _default("log.cleaner.threads")
    log_cleaner_dedupe_buffer_size: int = _default("log.cleaner.dedupe.buffer.size")
    log_cleaner_io_buffer_size: int = _default("log.cleaner.io.buffer.size")
    log_cleaner_io_buffer_load_factor: float = _default("log.cleaner.io.buffer.load.factor")
    log_cleaner_io_max_bytes_per_second: float = _default("log.cleaner.io.max.bytes.per.second")
    log_cleaner_backoff_ms: int = _default("log.cleaner.backoff.ms")
    log_cleaner_min_cleanable_ratio: float = _default("log.cleaner.min.cleanable.ratio")
    log_cleaner_delete_retention_ms: int = _default("log.cleaner.delete.retention.ms")
    log_cleaner_min_compaction_lag_ms: int = _default("log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _default("log.cleaner.max.compaction.lag.ms")
    num_recovery_threads_per_data_dir: int = _default("num.recovery.threads.per.data.dir")
    num_partitions: int = _default("num.partitions")
    auto_create_topics_enable: bool = _default("auto.create.topics.enable")
    delete_topic_enable: bool = _default("delete.topic.enable")
    create_topics_max_partitions_per_request: int = _default(
        "create.topics.max.partitions.per.request"
    )
    auto_create_topics_max_per_request: int = _default("auto.create.topics.max.per.request")
    auto_create_topics_max_per_second: float = _default("auto.create.topics.max.per.second")
    offsets_topic_num_partitions: int = _default("offsets.topic.num.partitions")
    offsets_topic_segment_bytes: int = _default("offsets.topic.segment.bytes")
    offsets_load_buffer_size: int = _default("offsets.load.buffer.size")
    offsets_retention_minutes: int = _default("offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _default("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms: int = _default("offsets.commit.timeout.ms")
    offset_metadata_max_bytes: int = _default("offset.metadata.max.bytes")
    group_initial_rebalance_delay_ms: int = _default("group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms: int = _default("group.min.session.timeout.ms")
    group_max_session_timeout_ms: int = _default("group.max.session.timeout.ms")
    group_max_size: int = _default("group.max.size")
    transaction_max_timeout_ms: int = _default("transaction.max.timeout.ms")
    transactional_id_expiration_ms: int = _default("transactional.id.expiration.ms")
    transaction_state_log_num_partitions: int = _default("transaction.state.log.num.partitions")
    transaction_state_log_segment_bytes: int = _default("transaction.state.log.segment.bytes")
    transaction_state_log_load_buffer_size: int = _default(
        "transaction.state.log.load.buffer.size"
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _default(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _default(
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    )
    transaction_partition_verification_enable: bool = _default(
        "transaction.partition.verification.enable"
    )
    socket_request_max_bytes: int = _default("socket.request.max.bytes")
    queued_max_request_bytes: int = _default("queued.max.request.bytes")
    socket_request_timeout_ms: int = _default("socket.request.timeout.ms")
    max_connections: int = _default("max.connections")
    connections_max_idle_ms: int = _default("connections.max.idle.ms")
    ssl_keystore_type: str = _default("ssl.keystore.type")
    ssl_keystore_location: str | None = _default("ssl.keystore.location")
    ssl_keystore_key: str | None = _default("ssl.keystore.key")
    ssl_keystore_certificate_chain: str | None = _default("ssl.keystore.certificate.chain")
    ssl_key_password: str | None = _default("ssl.key.password")
    ssl_truststore_type: str = _default("ssl.truststore.type")
    ssl_truststore_location: str | None = _default("ssl.truststore.location")
    ssl_truststore_certificates: str | None = _default("ssl.truststore.certificates")
    ssl_client_auth: str = _default("ssl.client.auth")
    ssl_enabled_protocols: tuple[str, ...] = _default("ssl.enabled.protocols")
    ssl_cipher_suites: tuple[str, ...] | None = _default("ssl.cipher.suites")
    ssl_handshake_timeout_ms: int = _default("ssl.handshake.timeout.ms")
    sasl_enabled_mechanisms: tuple[str, ...] = _default("sasl.enabled.mechanisms")
    sasl_server_max_receive_size: int = _default("sasl.server.max.receive.size")
    sasl_server_authentication_timeout_ms: int = _default("sasl.server.authentication.timeout.ms")
    connection_failed_authentication_delay_ms: int = _default(
        "connection.failed.authentication.delay.ms"
    )
    authorizer_class_name: str | None = _default("authorizer.class.name")
    super_users: str | None = _default("super.users")
    allow_everyone_if_no_acl_found: bool = _default("allow.everyone.if.no.acl.found")
    quota_window_num: int = _default("quota.window.num")
    quota_window_size_seconds: int = _default("quota.window.size.seconds")
    log_level: str = _default("log.level")
    log_format: str = _default("log.format")
    static_keys: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Iterable[Setting]) -> BrokerConfig:
        """A validated config from settings in precedence order (a later one wins)."""
        values = BROKER_CONFIG_DEF.parse(settings)
        config = cls(
            **{BROKER_CONFIG_DEF[name].attribute: value for name, value in values.items()},
            static_keys=frozenset(values),
        )
        config.check_consistency()
        return config

    @property
    def log_dir_paths(self) -> tuple[Path, ...]:
        """The log directories in use: ``log.dirs`` when set, else ``log.dir``."""
        return tuple(Path(directory) for directory in self.log_dirs or (self.log_dir,))

    def log_config(self) -> LogConfig:
        """The topic defaults this broker gives a topic with no overrides.

        Each topic key takes its first broker synonym that is set (``log.roll.ms`` before
        ``log.roll.hours``), converted to the topic key's unit.
        """
        values = {
            TOPIC_CONFIG_DEF[topic_name].attribute: self._first_set(topic_name)
            for topic_name in TOPIC_CONFIG_SYNONYMS
        }
        return LogConfig(**values)

    def static_topic_keys(self) -> frozenset[str]:
        """Topic keys whose broker default the operator set, under any of its synonyms."""
        return frozenset(
            topic_name
            for topic_name, synonyms in TOPIC_CONFIG_SYNONYMS.items()
            if any(synonym.name in self.static_keys for synonym in synonyms)
        )

    def describe(self) -> list[ConfigEntry]:
        """Every broker key's value and source, for DescribeConfigs on the broker."""
        return [
            ConfigEntry(
                name=key.name,
                value=(
                    None
                    if key.type is ConfigType.PASSWORD
                    else key.render(getattr(self, key.attribute))
                ),
                source=(
                    ConfigSource.STATIC_BROKER_CONFIG
                    if key.name in self.static_keys
                    else ConfigSource.DEFAULT_CONFIG
                ),
                doc=key.doc,
            )
            for key in BROKER_CONFIG_DEF
        ]

    def check_consistency(self) -> None:
        """Raise InvalidConfigError when settings contradict each other."""
        topic_defaults = self.log_config()
        topic_defaults.check_consistency()
        if topic_defaults.retention_ms == 0:
            raise InvalidConfigError(
                "log.retention.ms (or .minutes, .hours) must be -1 (unlimited) or at least 1 ms"
            )
        threads = self.log_cleaner_threads if self.log_cleaner_enable else 0
        buffer_size = self.log_cleaner_dedupe_buffer_size
        if threads and buffer_size // threads < MIN_DEDUPE_BUFFER_PER_THREAD:
            raise InvalidConfigError(
                f"log.cleaner.dedupe.buffer.size ({self.log_cleaner_dedupe_buffer_size}) must be "
                f"at least 1 MiB per cleaner thread ({threads} threads)"
            )
        queued = self.queued_max_request_bytes
        if queued != -1 and queued < self.socket_request_max_bytes:
            raise InvalidConfigError(
                f"queued.max.request.bytes ({queued}) must be -1 or at least "
                f"socket.request.max.bytes ({self.socket_request_max_bytes}): a request of the "
                "largest size could never be read"
            )
        endpoints = self.endpoints()
        for listener in endpoints:
            self.advertised_listener(listener.listener_name)
            if (
                listener.port
                and listener.port == self.metrics_port
                and listener.host == self.metrics_host
            ):
                raise InvalidConfigError(
                    f"listener {listener} and metrics.port are both on "
                    f"{listener.host}:{listener.port}: they need their own ports"
                )
        ports = [e.port for e in endpoints if e.port]
        if len(set(ports)) != len(ports):
            raise InvalidConfigError(
                f"two listeners share a port: {', '.join(map(str, endpoints))}"
            )
        if any(e.uses_tls for e in endpoints) and not (
            self.ssl_keystore_location
            or (self.ssl_keystore_key and self.ssl_keystore_certificate_chain)
        ):
            raise InvalidConfigError(
                "a TLS listener (SSL or SASL_SSL) needs the broker's key and certificate: set "
                "ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain)"
            )
        if (
            self.ssl_client_auth != "none"
            and any(e.uses_tls for e in endpoints)
            and not (self.ssl_truststore_location or self.ssl_truststore_certificates)
        ):
            raise InvalidConfigError(
                f"ssl.client.auth={self.ssl_client_auth} needs the authorities that sign client "
                f"certificates: set ssl.truststore.location"
            )

    def endpoints(self) -> tuple[EndPoint, ...]:
        """The listeners the broker binds: ``listeners``, else PLAINTEXT://host:port."""
        protocols = security_protocol_map(self.listener_security_protocol_map)
        if self.listeners is None:
            return parse_listeners(
                "host/port",
                (f"PLAINTEXT://{self.host}:{self.port}",),
                {**protocols, "PLAINTEXT": "PLAINTEXT"},
            )
        if {"host", "port"} & self.static_keys:
            raise InvalidConfigError("set either listeners or host/port (--host/--port), not both")
        return parse_listeners("listeners", self.listeners, protocols)

    def listener(self) -> EndPoint:
        """The first listener (the one ``port`` reports and tools connect to by default)."""
        return self.endpoints()[0]

    def advertised_listener(self, listener_name: str | None = None) -> EndPoint:
        """What Metadata returns to a client of listener ``listener_name`` (default: the
        first): ``advertised.listeners``' entry of that name, else the listener itself (port
        0: the port bound, filled in by the broker)."""
        endpoints = self.endpoints()
        listener = endpoints[0]
        if listener_name is not None:
            listener = next(e for e in endpoints if e.listener_name == listener_name)
        if self.advertised_listeners is None:
            return listener
        protocols = security_protocol_map(self.listener_security_protocol_map)
        advertised = parse_listeners("advertised.listeners", self.advertised_listeners, protocols)
        for endpoint in advertised:
            if endpoint.host in ("0.0.0.0", "::"):
                raise InvalidConfigError(
                    f"advertised.listeners entry {endpoint} cannot be advertised: clients "
                    f"cannot connect to {endpoint.host}"
                )
        found = [e for e in advertised if e.listener_name == listener.listener_name]
        if not found:
            raise InvalidConfigError(
                f"advertised.listeners has no entry for listener {listener.listener_name}"
            )
        return found[0]

    def _first_set(self, topic_name: str) -> object:
        """The value of ``topic_name``'s first synonym that is set (the last always has one)."""
        values = (
            (synonym, getattr(self, BROKER_CONFIG_DEF[synonym.name].attribute))
            for synonym in TOPIC_CONFIG_SYNONYMS[topic_name]
        )
        return next(synonym.to_topic_value(value) for synonym, value in values if value is not None)
