"""OffsetCommit (key 8): store a group's consumed positions, answered once durable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32, Int64


@dataclass(frozen=True)
class OffsetCommitPartition:
    topic: str
    partition: Int32
    committed_offset: Int64
    committed_leader_epoch: Int32 = -1
    committed_metadata: str | None = None


@dataclass(frozen=True)
class OffsetCommitRequest(Message):
    """Generation -1 and member id "" commit outside group management (the group must be
    empty)."""

    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_COMMIT
    group_id: str
    partitions: tuple[OffsetCommitPartition, ...]
    generation_id: Int32 = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class OffsetCommitPartitionResponse:
    topic: str
    partition: Int32
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class OffsetCommitResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_COMMIT
    partitions: tuple[OffsetCommitPartitionResponse, ...]
