"""DescribeTopicPartitions (key 75): each partition's offsets and storage, and topic configs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.configs import ConfigEntry
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int64, NonNegativeInt32


@dataclass(frozen=True)
class DescribeTopicPartitionsRequest(Message):
    """Describe ``topics`` (None: every topic)."""

    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    topics: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PartitionDescription:
    """One partition's key offsets, its size on disk and the log directory holding it."""

    partition: NonNegativeInt32
    error: ErrorCode = 0
    message: str | None = None
    log_start_offset: Int64 = -1
    high_watermark: Int64 = -1
    log_end_offset: Int64 = -1
    size_bytes: Int64 = -1
    segment_count: Int64 = -1
    log_dir: str | None = None


@dataclass(frozen=True)
class TopicDescription:
    """A topic's partitions and its configs with their sources."""

    name: str
    error: ErrorCode = 0
    message: str | None = None
    partitions: tuple[PartitionDescription, ...] = ()
    configs: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True)
class DescribeTopicPartitionsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    topics: tuple[TopicDescription, ...]
