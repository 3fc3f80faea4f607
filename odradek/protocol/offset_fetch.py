"""OffsetFetch (key 9): the committed offsets of one or more groups."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32, Int64


@dataclass(frozen=True)
class GroupPartition:
    topic: str
    partition: Int32


@dataclass(frozen=True)
class OffsetFetchGroup:
    """A group and the partitions wanted (nil: every partition it has an offset for)."""

    group_id: str
    partitions: tuple[GroupPartition, ...] | None = None


@dataclass(frozen=True)
class OffsetFetchRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_FETCH
    groups: tuple[OffsetFetchGroup, ...]
    require_stable: bool = False


@dataclass(frozen=True)
class OffsetFetchPartitionResponse:
    """``committed_offset`` -1 when the group has none for the partition."""

    topic: str
    partition: Int32
    committed_offset: Int64 = -1
    committed_leader_epoch: Int32 = -1
    metadata: str | None = ""
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class OffsetFetchGroupResponse:
    group_id: str
    error: ErrorCode = 0
    message: str | None = None
    partitions: tuple[OffsetFetchPartitionResponse, ...] = ()


@dataclass(frozen=True)
class OffsetFetchResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_FETCH
    groups: tuple[OffsetFetchGroupResponse, ...]
