"""ProducerAppendInfo: the producer state an append would leave, checked against Kafka's rules
before anything is written (Kafka's ``ProducerAppendInfo`` and
``UnifiedLog.analyzeAndValidateProducerState``).

For a client's append, per batch with a producer id, in order:

- a batch the partition already holds (same producer, epoch and sequence range, among the
  producer's last five) is a retry: the append is answered with that batch's offsets and
  nothing is written;
- an epoch below the producer's current one is INVALID_PRODUCER_EPOCH (what Kafka 2.7+
  answers an idempotent producer, rather than the fatal PRODUCER_FENCED);
- a new epoch must start at sequence 0, the same epoch must go on at the last sequence + 1
  (wrapping after 2^31 - 1): OUT_OF_ORDER_SEQUENCE_NUMBER otherwise;
- a producer the partition does not know (new, or expired) is accepted at any sequence, as
  Kafka does since 2.5 (KIP-360), rather than UNKNOWN_PRODUCER_ID;
- a transactional batch of a producer with no open transaction in the partition opens one at
  its first offset; a non-transactional batch while one is open is INVALID_TXN_STATE.

A COMMIT or ABORT marker, appended by the transaction coordinator only, is checked by
:func:`analyze_end_txn_marker` (Kafka's ``appendEndTxnMarker``).

Replaying the log (start-up, truncation) applies the same updates without the checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from odradek.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from odradek.int_limits import INT32_MAX
from odradek.record.control_record import EndTransactionMarker
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    TRANSACTIONAL_FLAG_MASK,
)
from odradek.storage.batch_metadata import BatchMetadata, increase_sequence
from odradek.storage.completed_txn import CompletedTxn
from odradek.storage.producer_state_entry import NO_TXN_FIRST_OFFSET, ProducerStateEntry
from odradek.storage.producer_table import BATCH_PRODUCER_FIELDS, ProducerTableType

ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1
"""Where a batch's transactional and control flags are (the low byte of its attributes)."""


class ProducerAppendInfo(NamedTuple):
    """The producers an append updates (new entries, applied once it is written), or the
    batch it duplicates (then nothing is written)."""

    updated: dict[int, ProducerStateEntry]
    duplicate: BatchMetadata | None = None


def analyze_producer_state(
    lookup: Callable[[int], ProducerStateEntry | None],
    records: bytes | bytearray | memoryview,
    where: str,
) -> ProducerAppendInfo:
    """Check the batches of ``records`` (offsets already assigned) against the producers
    ``lookup`` finds (a copy of each one's entry, or None).

    ``where`` names the partition in errors. Raises InvalidProducerEpochError or
    OutOfOrderSequenceNumberError; the entries ``lookup`` gives are the answer's to change.
    """
    end = len(records)
    updated: dict[int, ProducerStateEntry] = {}
    position = 0
    while position < end:
        (
            base_offset,
            batch_length,
            last_offset_delta,
            max_timestamp,
            producer_id,
            epoch,
            first_seq,
        ) = BATCH_PRODUCER_FIELDS.unpack_from(records, position)
        transactional = records[position + ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_FLAG_MASK
        position += batch_length + LOG_OVERHEAD
        if producer_id < 0:
            continue
        last_seq = increase_sequence(first_seq, last_offset_delta)
        entry = updated.get(producer_id)
        if entry is None:
            entry = lookup(producer_id)
            if entry is None:
                entry = ProducerStateEntry(producer_id)
            else:
                duplicate = entry.find_duplicate_batch(epoch, first_seq, last_seq)
                if duplicate is not None:
                    return ProducerAppendInfo({}, duplicate)
            updated[producer_id] = entry
        last_offset = base_offset + last_offset_delta
        _check_epoch(entry, epoch, last_offset, where)
        _check_sequence(entry, epoch, first_seq, last_offset, where)
        entry.add_batch(epoch, last_seq, last_offset, last_offset_delta, max_timestamp)
        if entry.current_txn_first_offset != NO_TXN_FIRST_OFFSET:
            if not transactional:
                raise InvalidTxnStateError(
                    f"expected a transactional write from producer {producer_id} at offset "
                    f"{base_offset} in {where}: its transaction opened at offset "
                    f"{entry.current_txn_first_offset} is not ended"
                )
        elif transactional:
            entry.current_txn_first_offset = base_offset
    return ProducerAppendInfo(updated)


def analyze_end_txn_marker(
    entry: ProducerStateEntry,
    marker: EndTransactionMarker,
    producer_epoch: int,
    offset: int,
    timestamp: int,
    where: str,
    *,
    checked: bool = True,
) -> CompletedTxn | None:
    """Check a marker the coordinator writes at ``offset`` against the producer's ``entry``
    and apply it there (Kafka's ``appendEndTxnMarker``): the transaction it ends, or None when
    the producer had written nothing of one in this partition (such a marker touches neither
    the last stable offset nor the transaction index).

    Raises InvalidProducerEpochError for an epoch older than the producer's and
    TransactionCoordinatorFencedError for a coordinator epoch older than the last marker's;
    unless not ``checked``: a marker read back from the log, which holds what was accepted
    (Kafka's origin REPLICATION)."""
    if checked:
        _check_marker_epochs(entry, marker, producer_epoch, offset, where)
    completed = None
    if entry.current_txn_first_offset != NO_TXN_FIRST_OFFSET:
        completed = CompletedTxn(
            entry.producer_id, entry.current_txn_first_offset, offset, not marker.committed
        )
    if producer_epoch != entry.producer_epoch:  # a new epoch (TV2 bumps it at each end)
        entry.batches.clear()
        entry.producer_epoch = producer_epoch
    entry.coordinator_epoch = marker.coordinator_epoch
    entry.current_txn_first_offset = NO_TXN_FIRST_OFFSET
    entry.last_timestamp = timestamp
    return completed


def _check_marker_epochs(
    entry: ProducerStateEntry,
    marker: EndTransactionMarker,
    producer_epoch: int,
    offset: int,
    where: str,
) -> None:
    if producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"epoch of producer {entry.producer_id} at offset {offset} in {where} is "
            f"{producer_epoch}, which is smaller than the last seen epoch {entry.producer_epoch}"
        )
    if entry.coordinator_epoch > marker.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"invalid coordinator epoch for producer {entry.producer_id} at offset {offset} in "
            f"{where}: {marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)"
        )


def _check_epoch(entry: ProducerStateEntry, epoch: int, offset: int, where: str) -> None:
    if epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"epoch of producer {entry.producer_id} at offset {offset} in {where} is {epoch}, "
            f"which is smaller than the last seen epoch {entry.producer_epoch}"
        )


def _check_sequence(
    entry: ProducerStateEntry, epoch: int, first_seq: int, offset: int, where: str
) -> None:
    if epoch != entry.producer_epoch:
        if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise OutOfOrderSequenceNumberError(
                f"invalid sequence number for new epoch {epoch} of producer "
                f"{entry.producer_id} at offset {offset} in {where}: {first_seq} (expected 0; "
                f"current epoch {entry.producer_epoch})"
            )
        return
    last_seq = entry.last_seq
    if entry.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(last_seq, first_seq):
        raise OutOfOrderSequenceNumberError(
            f"out of order sequence number for producer {entry.producer_id} at offset {offset} "
            f"in {where}: {first_seq} (incoming sequence), {last_seq} (last written sequence)"
        )


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def replay_batch(
    table: ProducerTableType,
    producer_id: int,
    epoch: int,
    first_seq: int,
    base_offset: int,
    last_offset_delta: int,
    max_timestamp: int,
) -> None:
    """Apply one batch read back from the log to ``table``, unchecked (recovery)."""
    table.add_batch(
        producer_id,
        epoch,
        increase_sequence(first_seq, last_offset_delta),
        base_offset + last_offset_delta,
        last_offset_delta,
        max_timestamp,
    )
