"""OffsetDelete (key 47): delete a group's committed offsets of topics it no longer reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.offset_fetch import GroupPartition
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32


@dataclass(frozen=True)
class OffsetDeleteRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_DELETE
    group_id: str
    partitions: tuple[GroupPartition, ...]


@dataclass(frozen=True)
class OffsetDeletePartitionResponse:
    topic: str
    partition: Int32
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class OffsetDeleteResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.OFFSET_DELETE
    error_code: ErrorCode = 0
    error_message: str | None = None
    partitions: tuple[OffsetDeletePartitionResponse, ...] = ()
