"""LeaveGroup (key 13): members leave a group, several at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode


@dataclass(frozen=True)
class LeavingMember:
    """A member by id, or a static member by ``group_instance_id`` (``member_id`` "")."""

    member_id: str = ""
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.LEAVE_GROUP
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True)
class LeavingMemberResponse:
    member_id: str
    group_instance_id: str | None = None
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class LeaveGroupResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.LEAVE_GROUP
    error_code: ErrorCode = 0
    error_message: str | None = None
    members: tuple[LeavingMemberResponse, ...] = ()
