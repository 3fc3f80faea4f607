"""Heartbeat (key 12): a member is alive; the answer says whether to rejoin."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32


@dataclass(frozen=True)
class HeartbeatRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.HEARTBEAT
    group_id: str
    generation_id: Int32
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.HEARTBEAT
    error_code: ErrorCode = 0
    error_message: str | None = None
