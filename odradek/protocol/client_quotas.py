"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49): the client quotas of the
broker, by entity (a user and/or a client id; a name of None is the default one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int16


@dataclass(frozen=True)
class QuotaEntityPart:
    """``entity_type``: ``user`` or ``client-id``; ``entity_name`` None: the default."""

    entity_type: str
    entity_name: str | None = None


@dataclass(frozen=True)
class QuotaFilterComponent:
    """``match_type``: 0 the name ``match`` exactly, 1 the default, 2 any."""

    entity_type: str
    match_type: Int16 = 0
    match: str | None = None


@dataclass(frozen=True)
class DescribeClientQuotasRequest(Message):
    """``strict``: only entities of exactly the components' types; else others may add
    types. No components and not strict: every entity."""

    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_CLIENT_QUOTAS
    components: tuple[QuotaFilterComponent, ...] = ()
    strict: bool = False


@dataclass(frozen=True)
class QuotaValue:
    key: str
    value: float


@dataclass(frozen=True)
class ClientQuotaEntry:
    entity: tuple[QuotaEntityPart, ...]
    values: tuple[QuotaValue, ...]


@dataclass(frozen=True)
class DescribeClientQuotasResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DESCRIBE_CLIENT_QUOTAS
    error_code: ErrorCode = 0
    error_message: str | None = None
    entries: tuple[ClientQuotaEntry, ...] = ()


@dataclass(frozen=True)
class QuotaOp:
    """Set ``key`` to ``value``, or remove it."""

    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True)
class AlterClientQuotasEntry:
    entity: tuple[QuotaEntityPart, ...]
    ops: tuple[QuotaOp, ...]


@dataclass(frozen=True)
class AlterClientQuotasRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.ALTER_CLIENT_QUOTAS
    entries: tuple[AlterClientQuotasEntry, ...]
    validate_only: bool = False


@dataclass(frozen=True)
class AlteredClientQuotas:
    entity: tuple[QuotaEntityPart, ...]
    error: ErrorCode = 0
    message: str | None = None


@dataclass(frozen=True)
class AlterClientQuotasResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.ALTER_CLIENT_QUOTAS
    entries: tuple[AlteredClientQuotas, ...]
