"""Broker-level settings: Kafka's defaults, synonyms and their precedence, consistency, describe."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from odradek.config.broker_config import BrokerConfig
from odradek.config.broker_configs import BROKER_CONFIG_DEF, TOPIC_CONFIG_SYNONYMS
from odradek.config.config_source import ConfigSource
from odradek.config.log_config import LogConfig
from odradek.config.setting import Setting
from odradek.config.topic_configs import TOPIC_CONFIG_DEF
from odradek.errors import InvalidConfigError
from odradek.int_limits import INT64_MAX

# Kafka 3.x's broker defaults (KafkaConfig / ServerLogConfigs / CleanerConfig); None = unset.
KAFKA_BROKER_DEFAULTS = {
    "advertised.listeners": None,
    "listener.security.protocol.map": (
        "PLAINTEXT:PLAINTEXT",
        "SSL:SSL",
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "SASL_SSL:SASL_SSL",
    ),
    "log.dirs": None,
    "log.segment.bytes": 1073741824,
    "log.roll.ms": None,
    "log.roll.hours": 168,
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": 0,
    "log.index.size.max.bytes": 10485760,
    "log.index.interval.bytes": 4096,
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": 168,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000,
    "log.initial.task.delay.ms": 30000,
    "log.cleanup.policy": ("delete",),
    "log.cleaner.enable": True,
    "log.cleaner.threads": 1,
    "log.cleaner.dedupe.buffer.size": 134217728,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.io.buffer.size": 524288,
    "log.cleaner.backoff.ms": 15000,
    "log.cleaner.io.max.bytes.per.second": 1.7976931348623157e308,
    "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.delete.retention.ms": 86400000,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": INT64_MAX,
    "log.flush.interval.messages": INT64_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": INT64_MAX,
    "log.flush.offset.checkpoint.interval.ms": 60000,
    "log.flush.start.offset.checkpoint.interval.ms": 60000,
    "replica.high.watermark.checkpoint.interval.ms": 5000,
    "producer.id.expiration.ms": 86400000,
    "producer.id.expiration.check.interval.ms": 600000,
    "message.max.bytes": 1048588,
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": INT64_MAX,
    "log.message.timestamp.after.max.ms": 3_600_000,
    "compression.type": "producer",
    "log.segment.delete.delay.ms": 60000,
    "log.preallocate": False,
    "num.recovery.threads.per.data.dir": 1,
    "num.partitions": 1,
    "auto.create.topics.enable": True,
    "socket.request.max.bytes": 104857600,
    "connections.max.idle.ms": 600000,
    "delete.topic.enable": True,
    "offsets.topic.num.partitions": 50,
    "offsets.topic.segment.bytes": 104857600,
    "offsets.load.buffer.size": 5242880,
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600000,
    "offsets.commit.timeout.ms": 5000,
    "transaction.max.timeout.ms": 900000,
    "transactional.id.expiration.ms": 604800000,
    "transaction.state.log.num.partitions": 50,
    "transaction.state.log.segment.bytes": 104857600,
    "transaction.state.log.load.buffer.size": 5242880,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000,
    "transaction.partition.verification.enable": True,
    "offset.metadata.max.bytes": 4096,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "group.max.size": 2147483647,
    "ssl.keystore.location": None,
    "ssl.keystore.key": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.key.password": None,
    "ssl.truststore.location": None,
    "ssl.truststore.certificates": None,
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": ("TLSv1.2", "TLSv1.3"),
    "ssl.cipher.suites": None,
    "sasl.server.max.receive.size": 524288,
    "connection.failed.authentication.delay.ms": 100,
    "authorizer.class.name": None,
    "super.users": None,
    "allow.everyone.if.no.acl.found": False,
    "quota.window.num": 11,
    "quota.window.size.seconds": 1,
}
# odradek's own keys, and the ones whose default differs from Kafka's on purpose.
ODRADEK_DEFAULTS = {
    "broker.id": 0,
    "cluster.id": None,
    "log.dir": "/tmp/odradek-logs",
    "host": "127.0.0.1",
    "port": 9092,
    # Kafka's is PLAINTEXT://:9092 (every interface); odradek's comes from host and port,
    # loopback by default.
    "listeners": None,
    "metrics.host": "127.0.0.1",
    "metrics.port": 9644,
    # How long an fsync for acks=all answers waits for requests still coming (docs/durability.md).
    "log.flush.commit.linger.ms": 2,
    "max.connections": 10000,
    "queued.max.request.bytes": 512 * 1024 * 1024,
    "socket.request.timeout.ms": 30000,
    "log.message.decompression.max.ratio": 32,
    "log.level": "INFO",
    "log.format": "text",
    "create.topics.max.partitions.per.request": 10000,  # Kafka's controller: the same bound
    "auto.create.topics.max.per.request": 100,
    "auto.create.topics.max.per.second": 100.0,
    # Security: PEM only (Kafka's default store type is JKS); SASL offers the mechanisms
    # odradek serves (Kafka's default is GSSAPI); a SASL client has a bounded time to log in.
    "ssl.keystore.type": "PEM",
    "ssl.truststore.type": "PEM",
    "sasl.enabled.mechanisms": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
    "sasl.server.authentication.timeout.ms": 30000,
    "ssl.handshake.timeout.ms": 10000,
}


def _config(**props: object) -> BrokerConfig:
    """A config from broker keys given with underscores, as an operator would set them."""
    return BrokerConfig.from_settings(
        Setting(name.replace("_", "."), value, "test") for name, value in props.items()
    )


def test_defaults_are_kafkas_and_odradeks() -> None:
    config = BrokerConfig()
    expected = KAFKA_BROKER_DEFAULTS | ODRADEK_DEFAULTS
    actual = {key.name: getattr(config, key.attribute) for key in BROKER_CONFIG_DEF}
    assert actual == expected


def test_every_key_is_a_field_and_every_field_a_key() -> None:
    attributes = {field.name for field in fields(BrokerConfig)} - {"static_keys"}
    assert attributes == {key.attribute for key in BROKER_CONFIG_DEF}


def test_every_topic_key_has_broker_synonyms_that_exist() -> None:
    assert set(TOPIC_CONFIG_SYNONYMS) == {key.name for key in TOPIC_CONFIG_DEF}
    for synonyms in TOPIC_CONFIG_SYNONYMS.values():
        assert all(synonym.name in BROKER_CONFIG_DEF for synonym in synonyms)
        assert BROKER_CONFIG_DEF.default(synonyms[-1].name) is not None


def test_broker_defaults_give_kafkas_topic_defaults() -> None:
    assert BrokerConfig().log_config() == LogConfig()


def test_log_config_maps_every_log_key_to_its_topic_key() -> None:
    config = _config(
        log_segment_bytes="2097152",
        log_index_size_max_bytes="4096",
        log_index_interval_bytes="100",
        log_retention_bytes="1000000",
        log_cleanup_policy="compact",
        message_max_bytes="500",
        log_message_timestamp_type="LogAppendTime",
        log_flush_interval_messages="10",
        log_segment_delete_delay_ms="5",
        log_preallocate="true",
        log_cleaner_delete_retention_ms="6",
        log_cleaner_min_compaction_lag_ms="7",
        log_cleaner_max_compaction_lag_ms="8",
        log_cleaner_min_cleanable_ratio="0.25",
        compression_type="zstd",
        log_message_timestamp_before_max_ms="11",
        log_message_timestamp_after_max_ms="12",
    )
    assert config.log_config() == LogConfig(
        segment_bytes=2097152,
        segment_index_bytes=4096,
        index_interval_bytes=100,
        retention_bytes=1000000,
        cleanup_policy=("compact",),
        max_message_bytes=500,
        message_timestamp_type="LogAppendTime",
        message_timestamp_before_max_ms=11,
        message_timestamp_after_max_ms=12,
        flush_messages=10,
        file_delete_delay_ms=5,
        preallocate=True,
        delete_retention_ms=6,
        min_compaction_lag_ms=7,
        max_compaction_lag_ms=8,
        min_cleanable_dirty_ratio=0.25,
        compression_type="zstd",
    )


@pytest.mark.parametrize(
    ("props", "retention_ms"),
    [
        ({}, 168 * 3600000),
        ({"log_retention_hours": "1"}, 3600000),
        ({"log_retention_hours": "1", "log_retention_minutes": "5"}, 300000),
        ({"log_retention_hours": "1", "log_retention_minutes": "5", "log_retention_ms": "7"}, 7),
        ({"log_retention_minutes": "5", "log_retention_ms": "42"}, 42),
        ({"log_retention_hours": "-1"}, -1),
        ({"log_retention_minutes": "-1"}, -1),
        ({"log_retention_ms": "-1", "log_retention_hours": "2"}, -1),
    ],
)
def test_retention_ms_beats_minutes_beats_hours(props: dict, retention_ms: int) -> None:
    assert _config(**props).log_config().retention_ms == retention_ms


@pytest.mark.parametrize(
    ("props", "segment_ms", "jitter_ms"),
    [
        ({}, 604800000, 0),
        ({"log_roll_hours": "2", "log_roll_jitter_hours": "1"}, 7200000, 3600000),
        ({"log_roll_hours": "2", "log_roll_ms": "1000"}, 1000, 0),
        ({"log_roll_jitter_hours": "1", "log_roll_jitter_ms": "10"}, 604800000, 10),
    ],
)
def test_roll_ms_beats_roll_hours(props: dict, segment_ms: int, jitter_ms: int) -> None:
    log_config = _config(**props).log_config()
    assert (log_config.segment_ms, log_config.segment_jitter_ms) == (segment_ms, jitter_ms)


def test_flush_interval_ms_falls_back_to_the_scheduler_interval() -> None:
    assert _config().log_config().flush_ms == INT64_MAX
    assert _config(log_flush_scheduler_interval_ms="3000").log_config().flush_ms == 3000
    both = _config(log_flush_scheduler_interval_ms="3000", log_flush_interval_ms="0")
    assert both.log_config().flush_ms == 0


def test_log_dirs_wins_over_log_dir() -> None:
    assert BrokerConfig().log_dir_paths == (Path("/tmp/odradek-logs"),)
    assert _config(log_dir="./data").log_dir_paths == (Path("data"),)
    config = _config(log_dir="./data", log_dirs="/a, /b")
    assert config.log_dirs == ("/a", "/b")
    assert config.log_dir_paths == (Path("/a"), Path("/b"))


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("broker.id", "-1", "at least 0"),
        ("cluster.id", "my cluster", "matching [A-Za-z0-9_-]+"),
        ("port", "65536", "at least 0 and at most 65535"),
        ("metrics.port", "-1", "at least 0 and at most 65535"),
        ("log.dirs", "/a,,/b", "any"),
        ("log.roll.hours", "0", "at least 1"),
        ("log.roll.jitter.hours", "-1", "at least 0"),
        ("log.retention.hours", "-2", "at least -1"),
        ("log.retention.minutes", "-2", "at least -1"),
        ("log.retention.check.interval.ms", "0", "at least 1"),
        ("log.flush.scheduler.interval.ms", "0", "at least 1"),
        ("log.flush.offset.checkpoint.interval.ms", "0", "at least 1"),
        ("log.flush.start.offset.checkpoint.interval.ms", "0", "at least 1"),
        ("replica.high.watermark.checkpoint.interval.ms", "0", "at least 1"),
        ("log.cleaner.threads", "-1", "at least 0"),
        ("log.cleaner.dedupe.buffer.size", "-1", "at least 0"),
        ("log.cleaner.io.buffer.size", "0", "at least 1"),
        ("log.cleaner.io.buffer.load.factor", "0", "greater than 0 and at most 1"),
        ("log.cleaner.io.max.bytes.per.second", "0", "greater than 0"),
        ("log.cleaner.backoff.ms", "-1", "at least 0"),
        ("log.cleaner.enable", "maybe", "true, false"),
        ("num.recovery.threads.per.data.dir", "0", "at least 1"),
        ("num.partitions", "0", "at least 1"),
        ("socket.request.max.bytes", "0", "at least 1"),
        ("max.connections", "-1", "at least 0"),
        ("connections.max.idle.ms", "0", "at least 1"),
        ("queued.max.request.bytes", "-2", "at least -1"),
        ("socket.request.timeout.ms", "0", "at least 1"),
        ("log.level", "VERBOSE", "one of: DEBUG, INFO, WARNING, ERROR, CRITICAL"),
        ("log.format", "xml", "one of: text, json"),
        ("log.segment.bytes", "1048575", "at least 1048576"),
        ("offsets.topic.segment.bytes", "4096", "at least 1048576"),
        ("log.roll.ms", "0", "at least 1"),
        ("log.retention.ms", "-2", "at least -1"),
        ("log.flush.interval.ms", "-1", "at least 0"),
        ("log.cleaner.min.cleanable.ratio", "2", "at least 0 and at most 1"),
    ],
)
def test_broker_validators_reject_with_a_clear_message(name: str, value: str, allowed: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_settings([Setting(name, value, "--set")])
    assert f"invalid value {value!r} for {name} (from --set)" in str(caught.value)
    assert f"allowed: {allowed}" in str(caught.value)


@pytest.mark.parametrize("props", [{"log_retention_ms": "0"}, {"log_retention_hours": "0"}])
def test_zero_retention_is_refused(props: dict) -> None:
    with pytest.raises(InvalidConfigError, match="must be -1 \\(unlimited\\) or at least 1 ms"):
        _config(**props)


def test_dedupe_buffer_needs_a_mebibyte_per_cleaner_thread() -> None:
    message = "at least 1 MiB per cleaner thread \\(4 threads\\)"
    with pytest.raises(InvalidConfigError, match=message):
        _config(log_cleaner_dedupe_buffer_size=str(4 * 1024 * 1024 - 1), log_cleaner_threads="4")
    assert _config(log_cleaner_dedupe_buffer_size=str(4 * 1024 * 1024), log_cleaner_threads="4")
    assert _config(log_cleaner_dedupe_buffer_size="0", log_cleaner_enable="false")
    assert _config(log_cleaner_dedupe_buffer_size="0", log_cleaner_threads="0")


def test_compaction_lags_are_checked_at_broker_level_too() -> None:
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms"):
        _config(log_cleaner_min_compaction_lag_ms="10", log_cleaner_max_compaction_lag_ms="5")


def test_queued_request_memory_must_hold_a_request_of_the_largest_size() -> None:
    with pytest.raises(InvalidConfigError, match="queued.max.request.bytes \\(999\\) must be -1"):
        _config(queued_max_request_bytes="999", socket_request_max_bytes="1000")
    assert _config(queued_max_request_bytes="1000", socket_request_max_bytes="1000")
    assert _config(queued_max_request_bytes="-1")


def test_listener_and_metrics_must_not_share_a_port() -> None:
    with pytest.raises(InvalidConfigError, match="metrics.port are both on 127.0.0.1:9644"):
        _config(port="9644")
    assert _config(port="0", metrics_port="0")
    assert _config(port="9644", metrics_port="9644", metrics_host="0.0.0.0")


def test_static_keys_are_the_keys_set() -> None:
    config = _config(port="0", log_retention_hours="1")
    assert config.static_keys == {"port", "log.retention.hours"}
    assert config.static_topic_keys() == {"retention.ms"}
    assert BrokerConfig().static_topic_keys() == frozenset()


def test_describe_topic_reports_broker_set_defaults_as_static() -> None:
    broker = _config(log_roll_hours="1", message_max_bytes="2000")
    entries = {
        entry.name: entry
        for entry in LogConfig.describe(
            {"max.message.bytes": "3000"}, broker.log_config(), broker.static_topic_keys()
        )
    }
    assert (entries["segment.ms"].value, entries["segment.ms"].source) == (
        "3600000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert (entries["max.message.bytes"].value, entries["max.message.bytes"].source) == (
        "3000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert entries["retention.ms"].source is ConfigSource.DEFAULT_CONFIG


def test_describe_broker() -> None:
    config = _config(port="0", log_cleanup_policy="compact")
    entries = {entry.name: entry for entry in config.describe()}
    assert list(entries) == [key.name for key in BROKER_CONFIG_DEF]
    assert entries["port"].value == "0"
    assert entries["port"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["log.cleanup.policy"].value == "compact"
    assert entries["log.roll.ms"].value is None and entries["log.roll.ms"].is_default
    assert entries["host"].value == "127.0.0.1" and entries["host"].is_default


def test_direct_construction_for_tests() -> None:
    config = BrokerConfig(port=0, log_dirs=("/x",), log_retention_ms=5)
    assert config.port == 0 and config.log_config().retention_ms == 5
    assert config.static_keys == frozenset()


def test_listeners_default_to_host_and_port_and_may_be_advertised_elsewhere() -> None:
    default = BrokerConfig()
    assert str(default.listener()) == "PLAINTEXT://127.0.0.1:9092"
    assert default.advertised_listener() == default.listener()

    container = _named(
        {
            "listeners": "PLAINTEXT://0.0.0.0:9092",
            "advertised.listeners": "PLAINTEXT://localhost:19092",
        }
    )
    assert (container.listener().host, container.listener().port) == ("0.0.0.0", 9092)
    advertised = container.advertised_listener()
    assert (advertised.host, advertised.port) == ("localhost", 19092)

    named = _named(
        {
            "listeners": "CLIENTS://:9093",
            "listener.security.protocol.map": "CLIENTS:PLAINTEXT",
        }
    )
    assert (named.listener().listener_name, named.listener().host) == ("CLIENTS", "")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:9092", "port": "9093"}, "not both"),
        ({"listeners": "SSL://127.0.0.1:9093"}, "needs the broker.s key and certificate"),
        ({"listeners": "PLAINTEXT://:1,SSL://:1", "ssl.keystore.location": "k"}, "share a port"),
        ({"listeners": "127.0.0.1:9092"}, "NAME://host:port"),
        ({"listeners": "OTHER://127.0.0.1:9092"}, "not in listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "twice"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "cannot be advertised"),
    ],
)
def test_bad_listeners_are_refused_at_start(settings: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        _named(settings)


def _named(settings: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.from_settings(Setting(k, v, "test") for k, v in settings.items())
