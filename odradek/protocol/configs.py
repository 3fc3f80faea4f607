"""DescribeConfigs (key 32) and AlterConfigs (key 33, incremental) for topic configs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.topics import TopicResult
from odradek.protocol.values.wire_types import ErrorCode


class ConfigSource(StrEnum):
    """Where a config's value comes from, under Kafka's ``ConfigSource`` names."""

    DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
    STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
    DEFAULT_CONFIG = "DEFAULT_CONFIG"


@dataclass(frozen=True)
class ConfigEntry:
    """One topic-level config (Kafka's name, e.g. ``retention.ms``) and its effective value."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool


@dataclass(frozen=True)
class DescribeConfigsRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_CONFIGS
    topics: tuple[str, ...]


@dataclass(frozen=True)
class TopicConfigs:
    """Every topic-level config of one topic."""

    name: str
    error: ErrorCode = 0
    message: str | None = None
    entries: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True)
class DescribeConfigsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_CONFIGS
    topics: tuple[TopicConfigs, ...]


@dataclass(frozen=True)
class AlterableTopicConfigs:
    """Overrides to set on one topic; a None value removes the override (back to the default)."""

    name: str
    configs: Mapping[str, str | None]


@dataclass(frozen=True)
class AlterConfigsRequest(Message):
    """Change the named overrides only, leaving the others (Kafka's IncrementalAlterConfigs)."""

    api_key: ClassVar[ApiKey] = ApiKey.ALTER_CONFIGS
    topics: tuple[AlterableTopicConfigs, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class AlterConfigsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.ALTER_CONFIGS
    topics: tuple[TopicResult, ...]
