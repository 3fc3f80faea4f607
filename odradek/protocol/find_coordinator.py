"""FindCoordinator (key 10): which broker coordinates a group (odradek: always itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int32, IntRange

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
KeyType = Annotated[int, IntRange(0, 1, "0 (group) or 1 (transaction)")]


@dataclass(frozen=True)
class FindCoordinatorRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    coordinator_keys: tuple[str, ...]
    key_type: KeyType = GROUP_KEY_TYPE


@dataclass(frozen=True)
class Coordinator:
    """The broker coordinating ``key``; node_id -1 with an error when there is none."""

    key: str
    node_id: Int32 = -1
    host: str = ""
    port: Int32 = -1
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class FindCoordinatorResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    coordinators: tuple[Coordinator, ...]
