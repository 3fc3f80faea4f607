"""ListGroups (key 16): the groups of the broker, optionally only those in given states."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode


@dataclass(frozen=True)
class ListGroupsRequest(Message):
    """``states_filter``: state names (Empty, Stable, ...; any case); empty lists every group."""

    api_key: ClassVar[ApiKey] = ApiKey.LIST_GROUPS
    states_filter: tuple[str, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str


@dataclass(frozen=True)
class ListGroupsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.LIST_GROUPS
    error_code: ErrorCode = 0
    error_message: str | None = None
    groups: tuple[ListedGroup, ...] = ()
