"""CreatePartitions (key 37): grow topics to a larger partition count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Int32, Message
from odradek.protocol.topics import TopicResult


@dataclass(frozen=True)
class NewPartitionCount:
    """Grow topic ``name`` to ``count`` partitions in all (more than it has)."""

    name: str
    count: Int32


@dataclass(frozen=True)
class CreatePartitionsRequest(Message):
    """Add partitions, or with ``validate_only`` just check that they could be added."""

    api_key: ClassVar[ApiKey] = ApiKey.CREATE_PARTITIONS
    topics: tuple[NewPartitionCount, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class CreatePartitionsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.CREATE_PARTITIONS
    topics: tuple[TopicResult, ...]
