"""Topic-level settings: Kafka's defaults, overrides, validation, round trip and describe."""

from __future__ import annotations

import logging
from dataclasses import fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.config.config_source import ConfigSource
from odradek.config.log_config import LogConfig
from odradek.config.topic_configs import MIN_SEGMENT_BYTES, TOPIC_CONFIG_DEF
from odradek.errors import InvalidConfigError
from odradek.int_limits import INT64_MAX

# The defaults of Kafka 3.x's topic-level configs (TopicConfig / LogConfig).
KAFKA_TOPIC_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "3600000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "file.delete.delay.ms": "60000",
    "preallocate": "false",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
    "compression.type": "producer",
}
# odradek's own topic keys.
ODRADEK_TOPIC_DEFAULTS = {
    "message.decompression.max.ratio": "32",
}


def test_defaults_are_kafkas() -> None:
    assert LogConfig().to_props() == KAFKA_TOPIC_DEFAULTS | ODRADEK_TOPIC_DEFAULTS


def test_decompressed_records_are_bounded_by_max_message_bytes_times_the_ratio() -> None:
    assert LogConfig().max_decompressed_bytes == 1048588 * 32
    config = LogConfig.from_props(
        {"max.message.bytes": "1000", "message.decompression.max.ratio": "3"}
    )
    assert config.max_decompressed_bytes == 3000


def test_every_key_is_a_field_and_every_field_a_key() -> None:
    attributes = [key.attribute for key in TOPIC_CONFIG_DEF]
    settings = [field.name for field in fields(LogConfig) if field.init]
    derived = [field.name for field in fields(LogConfig) if not field.init]
    assert settings == attributes
    assert derived == ["compact", "delete", "log_append_time", "max_decompressed_bytes"]


def test_direct_construction_keeps_working() -> None:
    config = LogConfig(segment_bytes=1024, cleanup_policy=("compact",))
    assert config.segment_bytes == 1024 and config.retention_ms == 604800000
    assert config.compact and not config.delete and not config.log_append_time
    assert LogConfig(message_timestamp_type="LogAppendTime").log_append_time
    assert LogConfig().delete and not LogConfig().compact


def test_from_props_parses_text_and_typed_values() -> None:
    config = LogConfig.from_props(
        {
            "segment.bytes": "1048576",
            "retention.ms": -1,
            "cleanup.policy": "compact, delete",
            "preallocate": "true",
            "min.cleanable.dirty.ratio": 0.2,
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert config == LogConfig(
        segment_bytes=1048576,
        retention_ms=-1,
        cleanup_policy=("compact", "delete"),
        preallocate=True,
        min_cleanable_dirty_ratio=0.2,
        message_timestamp_type="LogAppendTime",
    )
    assert config.compact and config.delete and config.log_append_time


def test_overrides_apply_on_top_of_the_broker_defaults() -> None:
    broker_defaults = LogConfig(retention_ms=1000, segment_bytes=4096)
    config = LogConfig.from_props({"segment.bytes": "8388608"}, broker_defaults)
    assert config.segment_bytes == 8388608
    assert config.retention_ms == 1000
    assert LogConfig.from_props({}, broker_defaults) == broker_defaults


REJECTED = [
    ("segment.bytes", "1048575", "at least 1048576"),
    ("segment.ms", "0", "at least 1"),
    ("segment.jitter.ms", "-1", "at least 0"),
    ("segment.index.bytes", "1023", "at least 1024"),
    ("index.interval.bytes", "-1", "at least 0"),
    ("retention.ms", "-2", "at least -1"),
    ("retention.bytes", "-2", "at least -1"),
    ("cleanup.policy", "delete,archive", "each one of: delete, compact"),
    ("cleanup.policy", "", "each one of: delete, compact"),
    ("max.message.bytes", "-1", "at least 0"),
    ("message.decompression.max.ratio", "0", "at least 1"),
    ("message.timestamp.type", "createtime", "one of: CreateTime, LogAppendTime"),
    ("message.timestamp.before.max.ms", "-1", "at least 0"),
    ("message.timestamp.after.max.ms", "-1", "at least 0"),
    ("flush.messages", "0", "at least 1"),
    ("flush.ms", "-1", "at least 0"),
    ("file.delete.delay.ms", "-1", "at least 0"),
    ("preallocate", "yes", "true, false"),
    ("delete.retention.ms", "-1", "at least 0"),
    ("min.compaction.lag.ms", "-1", "at least 0"),
    ("max.compaction.lag.ms", "0", "at least 1"),
    ("min.cleanable.dirty.ratio", "1.5", "at least 0 and at most 1"),
    ("min.cleanable.dirty.ratio", "-0.1", "at least 0 and at most 1"),
    ("compression.type", "brotli", "one of: producer, uncompressed, gzip, snappy, lz4, zstd"),
    ("segment.bytes", "2147483648", "at least 1048576"),
]


@pytest.mark.parametrize(("name", "value", "allowed"), REJECTED)
def test_every_validator_rejects_with_a_clear_message(name: str, value: str, allowed: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_props({name: value})
    message = str(caught.value)
    assert f"invalid value {value!r} for {name} (from topic config)" in message
    assert f"allowed: {allowed}" in message


def test_every_key_has_a_rejecting_case_above() -> None:
    assert {name for name, _, _ in REJECTED} == {key.name for key in TOPIC_CONFIG_DEF}


def test_unknown_topic_key_is_refused_with_a_suggestion() -> None:
    with pytest.raises(InvalidConfigError, match="unknown config 'retention.msec'.*retention.ms"):
        LogConfig.from_props({"retention.msec": "1000"})


def test_a_broker_key_is_not_a_topic_key() -> None:
    with pytest.raises(InvalidConfigError, match="unknown config 'log.retention.ms'"):
        LogConfig.from_props({"log.retention.ms": "1000"})


def test_min_compaction_lag_above_max_is_refused() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        LogConfig.from_props({"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"})
    assert "min.compaction.lag.ms (5000)" in str(caught.value)
    assert "max.compaction.lag.ms (1000)" in str(caught.value)


def test_compaction_lags_are_checked_against_the_defaults_they_land_on() -> None:
    defaults = LogConfig(max_compaction_lag_ms=1000)
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms"):
        LogConfig.from_props({"min.compaction.lag.ms": "2000"}, defaults)
    config = LogConfig.from_props({"min.compaction.lag.ms": "1000"}, defaults)
    assert config.min_compaction_lag_ms == 1000


def test_to_props_is_all_text_and_round_trips() -> None:
    config = LogConfig(
        segment_bytes=2 * 1024 * 1024,
        cleanup_policy=("compact", "delete"),
        preallocate=True,
        min_cleanable_dirty_ratio=0.1,
        flush_ms=0,
        max_compaction_lag_ms=INT64_MAX,
    )
    props = config.to_props()
    assert all(isinstance(value, str) for value in props.values())
    assert props["cleanup.policy"] == "compact,delete" and props["preallocate"] == "true"
    assert LogConfig.from_props(props) == config


@given(
    segment_bytes=st.integers(min_value=MIN_SEGMENT_BYTES, max_value=2**31 - 1),
    retention_ms=st.integers(min_value=-1, max_value=INT64_MAX),
    ratio=st.floats(min_value=0, max_value=1),
    policy=st.sampled_from([("delete",), ("compact",), ("compact", "delete")]),
)
def test_round_trip_for_any_valid_config(
    segment_bytes: int, retention_ms: int, ratio: float, policy: tuple[str, ...]
) -> None:
    config = LogConfig(
        segment_bytes=segment_bytes,
        retention_ms=retention_ms,
        min_cleanable_dirty_ratio=ratio,
        cleanup_policy=policy,
    )
    assert LogConfig.from_props(config.to_props()) == config


def test_describe_reports_where_each_value_comes_from() -> None:
    broker_defaults = LogConfig(retention_ms=3600000, segment_bytes=2048)
    entries = {
        entry.name: entry
        for entry in LogConfig.describe(
            {"segment.bytes": "4194304"},
            broker_defaults,
            static_keys={"retention.ms", "segment.bytes"},
        )
    }
    assert list(entries) == [key.name for key in TOPIC_CONFIG_DEF]
    assert entries["segment.bytes"].value == "4194304"
    assert entries["segment.bytes"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["flush.ms"].value == str(INT64_MAX)
    assert entries["flush.ms"].source is ConfigSource.DEFAULT_CONFIG
    assert entries["flush.ms"].is_default and not entries["retention.ms"].is_default
    assert entries["cleanup.policy"].doc == TOPIC_CONFIG_DEF["cleanup.policy"].doc


def test_describe_without_broker_information_is_overrides_and_defaults() -> None:
    entries = LogConfig.describe({"cleanup.policy": "compact"})
    sources = {entry.name: entry.source for entry in entries}
    assert sources.pop("cleanup.policy") is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert set(sources.values()) == {ConfigSource.DEFAULT_CONFIG}


def test_describe_refuses_invalid_overrides() -> None:
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        LogConfig.describe({"segment.bytes": "lots"})


def test_segment_bytes_has_kafkas_floor_of_one_mebibyte() -> None:
    assert MIN_SEGMENT_BYTES == 1024 * 1024
    with pytest.raises(InvalidConfigError, match="segment.bytes.*at least 1048576"):
        LogConfig.from_props({"segment.bytes": "100"})
    assert LogConfig.from_props({"segment.bytes": "1048576"}).segment_bytes == MIN_SEGMENT_BYTES


def test_segment_index_bytes_leaves_room_for_entries() -> None:
    """Below one entry an index is full at once and every append rolls a segment."""
    with pytest.raises(InvalidConfigError, match="segment.index.bytes.*at least 1024"):
        LogConfig.from_props({"segment.index.bytes": "4"})
    assert LogConfig.from_props({"segment.index.bytes": "1024"}).segment_index_bytes == 1024


def test_a_stored_segment_size_below_the_floor_is_raised_to_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An override an earlier version accepted still loads, at the floor, with a warning."""
    with caplog.at_level(logging.WARNING):
        config = LogConfig.from_stored(
            {"segment.bytes": "100", "segment.index.bytes": "4", "retention.ms": "5"}
        )
    assert (config.segment_bytes, config.segment_index_bytes) == (MIN_SEGMENT_BYTES, 1024)
    assert config.retention_ms == 5
    assert "segment.bytes=100" in caplog.text and "segment.index.bytes=4" in caplog.text
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        LogConfig.from_stored({"segment.bytes": "100", "retention.ms": "-5"})


def test_config_source_values_are_describe_configs_wire_ids() -> None:
    assert ConfigSource.DYNAMIC_TOPIC_CONFIG == 1
    assert ConfigSource.STATIC_BROKER_CONFIG == 4
    assert ConfigSource.DEFAULT_CONFIG == 5


def test_derived_values_follow_replace_and_stay_out_of_equality() -> None:
    compacted = replace(LogConfig(), cleanup_policy=("compact", "delete"))
    assert compacted.compact and compacted.delete
    assert replace(compacted, cleanup_policy=("delete",)).compact is False
    assert LogConfig() == LogConfig() and " compact=" not in repr(LogConfig())
