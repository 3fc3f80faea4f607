"""CompletedTxn: a transaction a marker ended in one partition (Kafka's ``CompletedTxn``)."""

from __future__ import annotations

from typing import NamedTuple


class CompletedTxn(NamedTuple):
    """One producer's transaction in one partition, from its first record to its marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    """The offset of the COMMIT or ABORT marker."""
    is_aborted: bool
