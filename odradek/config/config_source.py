"""Where a described config value came from (Kafka's ``ConfigEntry.ConfigSource``)."""

from __future__ import annotations

from enum import IntEnum


class ConfigSource(IntEnum):
    """Kafka's source names; the values are the DescribeConfigs wire ids (version 1 and later)."""

    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
