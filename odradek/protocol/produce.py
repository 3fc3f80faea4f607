"""Produce (key 0): append record batches to partitions."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import ErrorCode, Int64, Message, NonNegativeInt32, Records


class Acks(IntEnum):
    """When the broker answers: after the append is durable, never, or after the append."""

    ALL = -1
    NONE = 0
    LEADER = 1


@dataclass(frozen=True)
class ProducePartitionData:
    """Record batches for one partition; ``records`` may hold several batches back to back."""

    topic: str
    partition: NonNegativeInt32
    records: Records


@dataclass(frozen=True)
class ProduceRequest(Message):
    """Batches for one or more partitions. With ``acks`` NONE the broker sends no response."""

    api_key: ClassVar[ApiKey] = ApiKey.PRODUCE
    partitions: tuple[ProducePartitionData, ...]
    acks: Acks = Acks.ALL
    timeout_ms: NonNegativeInt32 = 30000


@dataclass(frozen=True)
class ProducePartitionResponse:
    """Where one partition's batches landed: the offset given to the first record."""

    topic: str
    partition: NonNegativeInt32
    error: ErrorCode = 0
    message: str | None = None
    base_offset: Int64 = -1
    log_append_time_ms: Int64 = -1
    log_start_offset: Int64 = -1


@dataclass(frozen=True)
class ProduceResponse(Message):
    """One entry per partition of the request, in the request's order; ``throttle_time_ms``:
    how long a client over its quota must wait (its connection is muted that long)."""

    api_key: ClassVar[ApiKey] = ApiKey.PRODUCE
    partitions: tuple[ProducePartitionResponse, ...]
    throttle_time_ms: NonNegativeInt32 = 0
