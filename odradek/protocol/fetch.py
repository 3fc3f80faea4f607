"""Fetch (key 1): read record batches from partitions, waiting up to ``max_wait_ms`` for data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.schema import ErrorCode, Int64, Message, NonNegativeInt32, Records

DEFAULT_MAX_WAIT_MS = 500
DEFAULT_MIN_BYTES = 1
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class FetchPartition:
    """Read one partition from ``fetch_offset``, at most ``partition_max_bytes`` of it."""

    topic: str
    partition: NonNegativeInt32
    fetch_offset: Int64
    partition_max_bytes: NonNegativeInt32 = DEFAULT_PARTITION_MAX_BYTES


@dataclass(frozen=True)
class FetchRequest(Message):
    """Answer when ``min_bytes`` are available or ``max_wait_ms`` have passed."""

    api_key: ClassVar[ApiKey] = ApiKey.FETCH
    partitions: tuple[FetchPartition, ...]
    max_wait_ms: NonNegativeInt32 = DEFAULT_MAX_WAIT_MS
    min_bytes: NonNegativeInt32 = DEFAULT_MIN_BYTES
    max_bytes: NonNegativeInt32 = DEFAULT_MAX_BYTES
    isolation: IsolationLevel = IsolationLevel.HIGH_WATERMARK


@dataclass(frozen=True)
class FetchPartitionResponse:
    """One partition's data: whole batches from the one holding ``fetch_offset``.

    The bytes may start below ``fetch_offset`` (a batch is sent whole) and may end in the middle
    of a batch (the size limit cuts anywhere); readers skip both.
    """

    topic: str
    partition: NonNegativeInt32
    error: ErrorCode = 0
    message: str | None = None
    high_watermark: Int64 = -1
    log_start_offset: Int64 = -1
    last_stable_offset: Int64 = -1
    records: Records = b""


@dataclass(frozen=True)
class FetchResponse(Message):
    """One entry per partition of the request, in the request's order; ``throttle_time_ms``:
    how long a client over its quota must wait (its connection is muted that long)."""

    api_key: ClassVar[ApiKey] = ApiKey.FETCH
    partitions: tuple[FetchPartitionResponse, ...]
    throttle_time_ms: NonNegativeInt32 = 0
