"""ListOffsets (key 2): the offset for a timestamp, or a partition's earliest or latest offset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from odradek.int_limits import INT64_MAX
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.schema import Message
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP
from odradek.protocol.values.wire_types import ErrorCode, Int64, IntRange, NonNegativeInt32

TargetTimestamp = Annotated[int, IntRange(EARLIEST_TIMESTAMP, INT64_MAX, "an int64 >= -2")]


@dataclass(frozen=True)
class ListOffsetsPartition:
    """Find the first offset of one partition whose record timestamp is >= ``timestamp``."""

    topic: str
    partition: NonNegativeInt32
    timestamp: TargetTimestamp


@dataclass(frozen=True)
class ListOffsetsRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    partitions: tuple[ListOffsetsPartition, ...]
    isolation: IsolationLevel = IsolationLevel.HIGH_WATERMARK


@dataclass(frozen=True)
class ListOffsetsPartitionResponse:
    """The offset found and its record's timestamp; offset -1 when no record is that recent."""

    topic: str
    partition: NonNegativeInt32
    error: ErrorCode = 0
    message: str | None = None
    offset: Int64 = -1
    timestamp: Int64 = -1


@dataclass(frozen=True)
class ListOffsetsResponse(Message):
    """One entry per partition of the request, in the request's order."""

    api_key: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    partitions: tuple[ListOffsetsPartitionResponse, ...]
