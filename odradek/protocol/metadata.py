"""Metadata (key 3): the broker, the cluster id, and topics with their partitions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.broker_metadata import BrokerMetadata
from odradek.protocol.values.wire_types import ErrorCode, Int32, NonNegativeInt32


@dataclass(frozen=True)
class MetadataRequest(Message):
    """Describe ``topics`` (None: every topic), creating missing ones if allowed and enabled."""

    api_key: ClassVar[ApiKey] = ApiKey.METADATA
    topics: tuple[str, ...] | None = None
    allow_auto_topic_creation: bool = True


@dataclass(frozen=True)
class PartitionMetadata:
    """``leader`` is the broker's node id, or -1 while the partition is offline."""

    partition: NonNegativeInt32
    error: ErrorCode = 0
    message: str | None = None
    leader: Int32 = -1


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error: ErrorCode = 0
    message: str | None = None
    partitions: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True)
class MetadataResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.METADATA
    broker: BrokerMetadata
    cluster_id: str
    topics: tuple[TopicMetadata, ...]
