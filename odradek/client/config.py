"""Client settings under Kafka's client config names (dots as underscores) and defaults.

Each client takes them as keyword arguments, e.g.
``AsyncProducer(bootstrap_servers="broker:9092", linger_ms=10, compression_type="lz4")``;
an unknown name is a TypeError and a bad value an InvalidConfigError.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.client.client_security import ClientSecurity, client_security
from odradek.errors import InvalidConfigError
from odradek.int_limits import INT32_MAX
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.values.produce import Acks
from odradek.record.compression import CompressionType

MAX_IDEMPOTENT_IN_FLIGHT = 5
"""Kafka's limit: a partition remembers the last five batches of a producer."""
_ACKS_BY_NAME = {"all": Acks.ALL, "-1": Acks.ALL, "0": Acks.NONE, "1": Acks.LEADER}
_OFFSET_RESETS = ("earliest", "latest", "none")
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ASSIGNOR_NAMES = ("range", "roundrobin")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidConfigError(message)


@dataclass(frozen=True, kw_only=True)
class ClientConfig:
    """Settings every client shares: where the broker is and how long to wait for it."""

    bootstrap_servers: str | tuple[str, ...] = "localhost:9092"
    client_id: str = "odradek-python"
    request_timeout_ms: int = 30000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    retry_backoff_ms: int = 100
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_truststore_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_keystore_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str = "https"

    def __post_init__(self) -> None:
        self.broker_addresses()
        self.security()
        _require(self.request_timeout_ms > 0, "request_timeout_ms must be > 0")
        _require(self.reconnect_backoff_ms >= 0, "reconnect_backoff_ms must be >= 0")
        _require(self.reconnect_backoff_max_ms >= 0, "reconnect_backoff_max_ms must be >= 0")
        _require(self.retry_backoff_ms >= 0, "retry_backoff_ms must be >= 0")

    def security(self) -> ClientSecurity:
        """TLS and SASL as the ``security_protocol``, ``sasl_*`` and ``ssl_*`` settings say."""
        return client_security(
            self.security_protocol,
            self.sasl_mechanism,
            self.sasl_username,
            self.sasl_password,
            self.ssl_ca_location or self.ssl_truststore_location,
            self.ssl_certificate_location,
            self.ssl_key_location,
            self.ssl_keystore_location,
            self.ssl_key_password,
            self.ssl_endpoint_identification_algorithm,
        )

    def broker_addresses(self) -> list[tuple[str, int]]:
        """``bootstrap_servers`` ("host:port", comma-separated or a tuple) as (host, port) pairs."""
        servers = self.bootstrap_servers
        entries = servers.split(",") if isinstance(servers, str) else list(servers)
        addresses = []
        for entry in (e.strip() for e in entries):
            host, sep, port = entry.rpartition(":")
            _require(
                bool(sep and host and port.isdigit() and 0 < int(port) < 65536),
                f"bootstrap server {entry!r} is not of the form host:port",
            )
            addresses.append((host.strip("[]"), int(port)))
        _require(bool(addresses), "bootstrap_servers is empty")
        return addresses


@dataclass(frozen=True, kw_only=True)
class ProducerConfig(ClientConfig):
    """Kafka's producer settings; ``batch_size`` counts uncompressed bytes. A
    ``transactional_id`` makes the producer transactional (and idempotent, as in Kafka)."""

    acks: int | str = "all"
    linger_ms: int = 5
    batch_size: int = 16384
    compression_type: str = "none"
    retries: int = INT32_MAX
    delivery_timeout_ms: int = 120000
    max_request_size: int = 1048576
    buffer_memory: int = 32 * 1024 * 1024
    max_block_ms: int = 60000
    enable_idempotence: bool | None = None
    max_in_flight_requests_per_connection: int = 5
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.transactional_id is not None:
            _require(bool(self.transactional_id), "transactional_id must not be empty")
            _require(
                self.enable_idempotence is not False,
                "cannot set a transactional_id without also enabling idempotence",
            )
            _require(self.transaction_timeout_ms > 0, "transaction_timeout_ms must be > 0")
        self.required_acks()
        self.compression()
        _require(self.linger_ms >= 0, "linger_ms must be >= 0")
        _require(self.batch_size > 0, "batch_size must be > 0")
        _require(self.retries >= 0, "retries must be >= 0")
        _require(self.max_request_size > 0, "max_request_size must be > 0")
        _require(self.buffer_memory > 0, "buffer_memory must be > 0")
        _require(self.max_block_ms >= 0, "max_block_ms must be >= 0")
        _require(
            self.max_in_flight_requests_per_connection >= 1,
            "max_in_flight_requests_per_connection must be >= 1",
        )
        if self.enable_idempotence or self.transactional_id is not None:
            _require(
                self.required_acks() is Acks.ALL,
                "acks must be 'all' for the idempotent producer (enable_idempotence)",
            )
            _require(self.retries > 0, "retries must be > 0 for the idempotent producer")
            _require(
                self.max_in_flight_requests_per_connection <= MAX_IDEMPOTENT_IN_FLIGHT,
                f"max_in_flight_requests_per_connection must be <= {MAX_IDEMPOTENT_IN_FLIGHT} "
                f"for the idempotent producer",
            )
        _require(
            self.delivery_timeout_ms >= self.linger_ms + self.request_timeout_ms,
            "delivery_timeout_ms must be >= linger_ms + request_timeout_ms",
        )

    @property
    def idempotent(self) -> bool:
        """Whether the producer is idempotent: ``enable_idempotence``, or by default (None, as
        Kafka's default true) unless acks, retries or the in-flight limit rule it out."""
        if self.enable_idempotence is not None:
            return self.enable_idempotence
        if self.transactional_id is not None:
            return True
        return (
            self.required_acks() is Acks.ALL
            and self.retries > 0
            and self.max_in_flight_requests_per_connection <= MAX_IDEMPOTENT_IN_FLIGHT
        )

    def required_acks(self) -> Acks:
        """``acks`` as the wire value: "all"/-1, 0 or 1."""
        acks = _ACKS_BY_NAME.get(str(self.acks).lower())
        _require(acks is not None, f"acks must be 'all', -1, 0 or 1, not {self.acks!r}")
        return acks

    def compression(self) -> CompressionType:
        """``compression_type`` as a codec; UnsupportedCompressionTypeError for other names."""
        return CompressionType.for_name(self.compression_type)


@dataclass(frozen=True, kw_only=True)
class ConsumerConfig(ClientConfig):
    """Kafka's consumer settings. ``isolation_level`` is Kafka's: ``read_uncommitted`` (the
    default) or ``read_committed`` (only committed transactions' records, up to the last
    stable offset); ``isolation`` is how far a read_uncommitted consumer reads:
    ``high_watermark`` (the default) or ``log_end``."""

    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_partition_fetch_bytes: int = 1024 * 1024
    max_poll_records: int = 500
    auto_offset_reset: str = "latest"
    isolation: str = "high_watermark"
    isolation_level: str = "read_uncommitted"
    check_crcs: bool = True
    group_id: str | None = None
    group_instance_id: str | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    partition_assignment_strategy: str | tuple[str, ...] = ("range", "roundrobin")
    metadata_max_age_ms: int = 300000

    def __post_init__(self) -> None:
        super().__post_init__()
        self.fetch_isolation()
        self.assignors()
        _require(self.auto_commit_interval_ms > 0, "auto_commit_interval_ms must be > 0")
        _require(self.session_timeout_ms > 0, "session_timeout_ms must be > 0")
        _require(
            0 < self.heartbeat_interval_ms < self.session_timeout_ms,
            "heartbeat_interval_ms must be > 0 and below session_timeout_ms",
        )
        _require(self.max_poll_interval_ms > 0, "max_poll_interval_ms must be > 0")
        _require(self.metadata_max_age_ms > 0, "metadata_max_age_ms must be > 0")
        _require(
            self.group_id is not None or self.group_instance_id is None,
            "group_instance_id needs a group_id",
        )
        _require(self.fetch_max_wait_ms >= 0, "fetch_max_wait_ms must be >= 0")
        _require(self.fetch_min_bytes >= 0, "fetch_min_bytes must be >= 0")
        _require(self.fetch_max_bytes > 0, "fetch_max_bytes must be > 0")
        _require(self.max_partition_fetch_bytes > 0, "max_partition_fetch_bytes must be > 0")
        _require(self.max_poll_records > 0, "max_poll_records must be > 0")
        _require(
            self.auto_offset_reset in _OFFSET_RESETS,
            f"auto_offset_reset must be one of {', '.join(_OFFSET_RESETS)}",
        )

    def assignors(self) -> tuple[str, ...]:
        """``partition_assignment_strategy`` as assignor names in preference order: ``range``
        and ``roundrobin`` (comma-separated, or a tuple)."""
        strategy = self.partition_assignment_strategy
        names = strategy.split(",") if isinstance(strategy, str) else list(strategy)
        names = [name.strip() for name in names if name.strip()]
        unknown = [name for name in names if name not in ASSIGNOR_NAMES]
        _require(
            bool(names) and not unknown,
            f"partition_assignment_strategy must name some of {', '.join(ASSIGNOR_NAMES)}",
        )
        return tuple(names)

    def fetch_isolation(self) -> IsolationLevel:
        """``isolation_level`` and ``isolation`` as the Fetch request's ``isolation``."""
        _require(
            self.isolation_level in _ISOLATION_LEVELS,
            f"isolation_level must be 'read_uncommitted' or 'read_committed', "
            f"not {self.isolation_level!r}",
        )
        if self.isolation_level == "read_committed":
            _require(
                self.isolation in ("high_watermark", "txn_committed"),
                f"isolation_level 'read_committed' reads up to the last stable offset; "
                f"isolation {self.isolation!r} says otherwise",
            )
            return IsolationLevel.TXN_COMMITTED
        try:
            return IsolationLevel(self.isolation)
        except ValueError:
            raise InvalidConfigError(
                f"isolation must be 'high_watermark' or 'log_end', not {self.isolation!r}"
            ) from None
