"""SyncGroup (key 14): the leader hands in the assignment, every member gets its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32


@dataclass(frozen=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True)
class SyncGroupRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.SYNC_GROUP
    group_id: str
    generation_id: Int32
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupAssignment, ...] = ()


@dataclass(frozen=True)
class SyncGroupResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.SYNC_GROUP
    error_code: ErrorCode = 0
    error_message: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
