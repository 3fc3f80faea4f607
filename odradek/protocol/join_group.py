"""JoinGroup (key 11): become (or stay) a member of a group; answered when the rebalance's join
phase ends, the leader with every member's metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32


@dataclass(frozen=True)
class JoinGroupProtocol:
    """A protocol the member supports (in preference order) and its metadata for it."""

    name: str
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.JOIN_GROUP
    group_id: str
    session_timeout_ms: Int32
    protocol_type: str
    protocols: tuple[JoinGroupProtocol, ...]
    rebalance_timeout_ms: Int32 = -1
    member_id: str = ""
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class JoinGroupMemberEntry:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse(Message):
    """``error_code`` MEMBER_ID_REQUIRED comes with the ``member_id`` to join again with."""

    api_key: ClassVar[ApiKey] = ApiKey.JOIN_GROUP
    error_code: ErrorCode = 0
    error_message: str | None = None
    generation_id: Int32 = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMemberEntry, ...] = ()
