"""A record as a consumer returns it."""

from __future__ import annotations

from typing import NamedTuple

from odradek.record.record_batch import TimestampType


class ConsumerRecord(NamedTuple):
    """One record with where it came from; ``timestamp_type`` says who set the timestamp.

    A NamedTuple rather than a dataclass: one is made per record consumed, and tuples are
    several times cheaper to create.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
