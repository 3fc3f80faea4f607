"""DescribeGroups (key 15): groups' state, protocol and members with their assignments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode


@dataclass(frozen=True)
class DescribeGroupsRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_GROUPS
    groups: tuple[str, ...]


@dataclass(frozen=True)
class DescribedGroupMember:
    """Metadata and assignment are the clients' own bytes (empty unless the group is Stable)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroupEntry:
    """An unknown group is described with state Dead and no members."""

    group_id: str
    error: ErrorCode = 0
    message: str | None = None
    group_state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedGroupMember, ...] = ()


@dataclass(frozen=True)
class DescribeGroupsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_GROUPS
    groups: tuple[DescribedGroupEntry, ...]
