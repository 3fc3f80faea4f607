"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32


@dataclass(frozen=True)
class TopicResult:
    """The outcome for one topic of a request about several."""

    name: str
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class CreatableTopic:
    """A topic to create; ``num_partitions`` -1 takes the broker's ``num.partitions``."""

    name: str
    num_partitions: Int32 = -1
    configs: Mapping[str, str] = field(default_factory=dict)


DEFAULT_CREATE_TOPICS_TIMEOUT_MS = 30000
"""How long the broker may take before answering REQUEST_TIMED_OUT: the clients' default
request timeout, so that the answer comes before the client gives up."""


@dataclass(frozen=True)
class CreateTopicsRequest(Message):
    """Create topics, or with ``validate_only`` just check that they could be created.

    A creation that outlives ``timeout_ms`` is answered REQUEST_TIMED_OUT and goes on (as in
    Kafka); the topic then appears whole, or not at all."""

    api_key: ClassVar[ApiKey] = ApiKey.CREATE_TOPICS
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False
    timeout_ms: Int32 = DEFAULT_CREATE_TOPICS_TIMEOUT_MS


@dataclass(frozen=True)
class CreatableTopicResult:
    """The outcome for one topic and, on success, how many partitions it has."""

    name: str
    error: ErrorCode = 0
    message: str | None = None
    num_partitions: Int32 = -1


@dataclass(frozen=True)
class CreateTopicsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.CREATE_TOPICS
    topics: tuple[CreatableTopicResult, ...]


@dataclass(frozen=True)
class CreatePartitionsTopic:
    """A topic to grow to ``count`` partitions in all."""

    name: str
    count: Int32


@dataclass(frozen=True)
class CreatePartitionsRequest(Message):
    """Add partitions to existing topics, or with ``validate_only`` just check that they could
    be added. ``timeout_ms`` as in CreateTopicsRequest."""

    api_key: ClassVar[ApiKey] = ApiKey.CREATE_PARTITIONS
    topics: tuple[CreatePartitionsTopic, ...]
    validate_only: bool = False
    timeout_ms: Int32 = DEFAULT_CREATE_TOPICS_TIMEOUT_MS


@dataclass(frozen=True)
class CreatePartitionsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.CREATE_PARTITIONS
    topics: tuple[TopicResult, ...]


@dataclass(frozen=True)
class DeleteTopicsRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_TOPICS
    topics: tuple[str, ...]


@dataclass(frozen=True)
class DeleteTopicsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_TOPICS
    topics: tuple[TopicResult, ...]
