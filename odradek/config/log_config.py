"""Per-topic log settings: Kafka's topic-level config names and defaults (design §14)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace

from odradek.config.config_entry import ConfigEntry
from odradek.config.config_source import ConfigSource
from odradek.config.setting import Setting
from odradek.config.topic_configs import RAISED_FLOORS, TOPIC_CONFIG_DEF
from odradek.errors import InvalidConfigError

__all__ = ["LogConfig"]

logger = logging.getLogger(__name__)

_default = TOPIC_CONFIG_DEF.default
TOPIC_ORIGIN = "topic config"


@dataclass(frozen=True)
class LogConfig:
    """The settings one partition's UnifiedLog runs with (topic-level names, dots as underscores).

    Direct construction trusts its caller (code and tests); settings from outside (topic
    overrides, broker defaults) go through :meth:`from_props`, which validates them.
    """

    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    cleanup_policy: tuple[str, ...] = _default("cleanup.policy")
    max_message_bytes: int = _default("max.message.bytes")
    message_decompression_max_ratio: int = _default("message.decompression.max.ratio")
    message_timestamp_type: str = _default("message.timestamp.type")
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    flush_messages: int = _default("flush.messages")
    flush_ms: int = _default("flush.ms")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    preallocate: bool = _default("preallocate")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    compression_type: str = _default("compression.type")

    # Derived once: the append path reads these on every request. Set as plain attributes
    # (not fields: equality, repr and replace() ignore them) so that reading any attribute of
    # the config stays a fast instance-slot read, which a cached_property's __dict__ spoils.
    compact: bool = field(init=False, repr=False, compare=False)
    delete: bool = field(init=False, repr=False, compare=False)
    log_append_time: bool = field(init=False, repr=False, compare=False)
    max_decompressed_bytes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        derived = {
            "compact": "compact" in self.cleanup_policy,
            "delete": "delete" in self.cleanup_policy,
            "log_append_time": self.message_timestamp_type == "LogAppendTime",
            "max_decompressed_bytes": self.max_message_bytes * self.message_decompression_max_ratio,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # the dataclass is frozen

    @classmethod
    def from_props(
        cls, props: Mapping[str, object], defaults: LogConfig | None = None
    ) -> LogConfig:
        """``defaults`` (the broker's topic defaults) with the topic overrides ``props`` applied.

        Values may be text (as stored or sent on the wire) or typed. Raises InvalidConfigError
        for an unknown key, an invalid value, or an inconsistent combination.
        """
        settings = (Setting(name, value, TOPIC_ORIGIN) for name, value in props.items())
        values = TOPIC_CONFIG_DEF.parse(settings)
        config = replace(
            defaults or cls(),
            **{TOPIC_CONFIG_DEF[name].attribute: value for name, value in values.items()},
        )
        config.check_consistency()
        return config

    @classmethod
    def from_stored(
        cls, props: Mapping[str, object], defaults: LogConfig | None = None
    ) -> LogConfig:
        """``from_props`` for overrides recorded by an earlier version, under looser rules: a
        ``segment.bytes`` or ``segment.index.bytes`` below today's floor (``RAISED_FLOORS``)
        is raised to the floor, with a warning, rather than keeping the broker from loading
        the topic."""
        raised = dict(props)
        for name, floor in RAISED_FLOORS.items():
            value = props.get(name)
            try:
                too_small = value is not None and int(str(value)) < floor
            except ValueError:
                too_small = False  # from_props says what is wrong with it
            if too_small:
                logger.warning(
                    "%s=%s of a stored topic config is below the minimum %d; using %d",
                    name,
                    value,
                    floor,
                    floor,
                )
                raised[name] = floor
        return cls.from_props(raised, defaults)

    def to_props(self) -> dict[str, str]:
        """Every topic key with its value as text; ``from_props(to_props())`` gives this back."""
        return {key.name: key.type.render(getattr(self, key.attribute)) for key in TOPIC_CONFIG_DEF}

    def check_consistency(self) -> None:
        """Raise InvalidConfigError when settings contradict each other (Kafka's rules)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) must not be greater than "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )

    @classmethod
    def describe(
        cls,
        overrides: Mapping[str, object],
        defaults: LogConfig | None = None,
        static_keys: Collection[str] = frozenset(),
    ) -> list[ConfigEntry]:
        """Every topic key's effective value and source, for DescribeConfigs on a topic.

        ``overrides`` are the topic's own settings (DYNAMIC_TOPIC_CONFIG); ``defaults`` and
        ``static_keys`` come from the broker (``BrokerConfig.log_config()`` and
        ``BrokerConfig.static_topic_keys()``): topic keys whose default the broker's static
        config set (STATIC_BROKER_CONFIG). The rest are DEFAULT_CONFIG.
        """
        values = cls.from_stored(overrides, defaults).to_props()
        return [
            ConfigEntry(
                name=key.name,
                value=values[key.name],
                source=_source(key.name, overrides, static_keys),
                doc=key.doc,
            )
            for key in TOPIC_CONFIG_DEF
        ]


def _source(
    name: str, overrides: Mapping[str, object], static_keys: Collection[str]
) -> ConfigSource:
    if name in overrides:
        return ConfigSource.DYNAMIC_TOPIC_CONFIG
    if name in static_keys:
        return ConfigSource.STATIC_BROKER_CONFIG
    return ConfigSource.DEFAULT_CONFIG
