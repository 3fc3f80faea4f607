"""DeleteRecords (key 21): raise partitions' log start offsets, making older records unreadable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import ErrorCode, Int64, NonNegativeInt32


@dataclass(frozen=True)
class DeleteRecordsPartition:
    """Delete the records of one partition below ``offset`` (-1: the high watermark)."""

    topic: str
    partition: NonNegativeInt32
    offset: Int64


@dataclass(frozen=True)
class DeleteRecordsRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_RECORDS
    partitions: tuple[DeleteRecordsPartition, ...]


@dataclass(frozen=True)
class DeleteRecordsPartitionResponse:
    """The partition's log start offset after the deletion."""

    topic: str
    partition: NonNegativeInt32
    error: ErrorCode = 0
    message: str | None = None
    low_watermark: Int64 = -1


@dataclass(frozen=True)
class DeleteRecordsResponse(Message):
    api_key: ClassVar[ApiKey] = ApiKey.DELETE_RECORDS
    partitions: tuple[DeleteRecordsPartitionResponse, ...]
