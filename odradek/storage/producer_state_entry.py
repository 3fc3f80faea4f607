"""ProducerStateEntry: one producer id's state in one partition (Kafka's ``ProducerStateEntry``):
its epoch, the metadata of its last five batches, the epoch of the transaction coordinator
that last wrote a marker for it, and the first offset of its open transaction."""

from __future__ import annotations

from collections import deque

from odradek.record.record_batch import NO_PRODUCER_EPOCH
from odradek.storage.batch_metadata import BatchMetadata

NO_COORDINATOR_EPOCH = -1
NO_TXN_FIRST_OFFSET = -1

NUM_BATCHES_TO_RETAIN = 5
"""Kafka's ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``: as many as a producer may have in
flight (max.in.flight.requests.per.connection <= 5 with idempotence), so any retry of a batch
not yet acknowledged is recognised."""


class ProducerStateEntry:
    """The epoch, last batches and last timestamp of one producer: a working copy of its
    row in the partition's ProducerTable, which ProducerAppendInfo's rules read and change
    before the table takes it back (mutable: a request's batches are added in place).

    ``batches`` holds each batch's fields as a plain tuple in ``BatchMetadata``'s order (one is
    made per idempotent append, at a tenth of a named tuple's cost); ``find_duplicate_batch``
    answers a ``BatchMetadata``.
    """

    __slots__ = (
        "producer_id",
        "producer_epoch",
        "batches",
        "last_timestamp",
        "coordinator_epoch",
        "current_txn_first_offset",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        batches: deque[tuple[int, int, int, int]] | None = None,
        last_timestamp: int = -1,
        coordinator_epoch: int = NO_COORDINATOR_EPOCH,
        current_txn_first_offset: int = NO_TXN_FIRST_OFFSET,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[tuple[int, int, int, int]] = (
            deque(maxlen=NUM_BATCHES_TO_RETAIN) if batches is None else batches
        )
        self.last_timestamp = last_timestamp
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = current_txn_first_offset

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def last_seq(self) -> int:
        return self.batches[-1][0] if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1][2] if self.batches else 0

    def add_batch(
        self,
        producer_epoch: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        """Remember a written batch; a new epoch forgets the batches of the old one."""
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch
        self.batches.append((last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate_batch(
        self, producer_epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """The written batch with this epoch and exactly this sequence range, if remembered."""
        if producer_epoch != self.producer_epoch:
            return None
        for fields in self.batches:
            batch = BatchMetadata._make(fields)
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, "
            f"coordinator_epoch={self.coordinator_epoch}, "
            f"current_txn_first_offset={self.current_txn_first_offset}, "
            f"batches={[BatchMetadata._make(fields) for fields in self.batches]})"
        )
