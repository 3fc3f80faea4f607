"""DeleteGroups (key 42): delete empty groups and their committed offsets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode


@dataclass(frozen=True)
class DeleteGroupsRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_GROUPS
    groups: tuple[str, ...]


@dataclass(frozen=True)
class DeletedGroup:
    group_id: str
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class DeleteGroupsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_GROUPS
    results: tuple[DeletedGroup, ...]
