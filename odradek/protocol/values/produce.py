"""A partition's data in a Produce and its result: what both protocols' produce handlers give
the ReplicaManager and get back (Kafka's PartitionProduceData and PartitionProduceResponse)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from odradek.errors import RecordError
from odradek.protocol.values.wire_types import (
    ErrorCode,
    Int64,
    NonNegativeInt32,
    Records,
    stored_at_once,
)


class Acks(IntEnum):
    """When the broker answers: after the append is durable, never, or after the append."""

    ALL = -1
    NONE = 0
    LEADER = 1


@stored_at_once
@dataclass(frozen=True)
class ProducePartitionData:
    """Record batches for one partition; ``records`` may hold several batches back to back."""

    topic: str
    partition: NonNegativeInt32
    records: Records


@stored_at_once
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


@stored_at_once
@dataclass(frozen=True)
class ProducePartitionRefusal(ProducePartitionResponse):
    """A partition's append refused for records named by their index in their batch (Kafka's
    record_errors, KIP-467): the Kafka protocol answers them at Produce v8+; odradek's protocol
    has no such field and answers the error and message alone."""

    record_errors: tuple[RecordError, ...] = ()
