"""A partition's data in a Fetch and its result: what both protocols' fetch handlers give the
ReplicaManager and get back (Kafka's FetchPartition and PartitionData)."""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.protocol.values.wire_types import (
    OMITTED_AT_DEFAULT,
    ErrorCode,
    Int64,
    NonNegativeInt32,
    Records,
    stored_at_once,
)

DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024


@stored_at_once
@dataclass(frozen=True)
class FetchPartition:
    """Read one partition from ``fetch_offset``, at most ``partition_max_bytes`` of it."""

    topic: str
    partition: NonNegativeInt32
    fetch_offset: Int64
    partition_max_bytes: NonNegativeInt32 = DEFAULT_PARTITION_MAX_BYTES


@stored_at_once
@dataclass(frozen=True)
class AbortedTransaction:
    """A transaction aborted in the fetched range (Kafka's FetchResponse AbortedTransaction):
    a read_committed reader drops its producer's records from ``first_offset`` up to the
    producer's ABORT marker."""

    producer_id: Int64
    first_offset: Int64


@stored_at_once
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
    aborted_transactions: tuple[AbortedTransaction, ...] = field(
        default=(), metadata={OMITTED_AT_DEFAULT: True}
    )
    """For a ``txn_committed`` read, the aborted transactions overlapping the records."""
