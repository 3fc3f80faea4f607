"""CleanedTransactionMetadata: the transactions a cleaning run walks through (Kafka's
``CleanedTransactionMetadata`` of its LogCleaner).

The cleaner reads a log's batches in offset order and tells this which transactional and
control batches it meets. From the aborted transactions of the range (the segments'
``.txnindex``) it answers whether a transactional batch belongs to an aborted transaction (its
records go: a consumer never sees them), and whether a COMMIT or ABORT marker may go: only once
no batch of its transaction is left before it (a COMMIT whose transaction's batches the run did
not meet, an ABORT whose aborted batches are all gone), and then only past the marker batch's
delete horizon (KIP-534, batch_filter.py). An ABORT marker that stays keeps its aborted
transaction in the cleaned segment's ``.txnindex``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from odradek.record.control_record import ControlRecordType
from odradek.record.record_batch import RecordBatch
from odradek.storage.transaction_index import AbortedTxn, TransactionIndex


class _AbortedTransaction:
    """An aborted transaction the run is inside: the last offset of its batches met so far."""

    __slots__ = ("aborted", "last_observed_batch_offset")

    def __init__(self, aborted: AbortedTxn) -> None:
        self.aborted = aborted
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """The transactions open at the point a cleaning run has reached, carried across the
    segments (and groups of segments) of one run."""

    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedTransaction] = {}
        self._aborted: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._added = 0
        self.cleaned_index: TransactionIndex | None = None
        """Where the aborted transactions whose ABORT marker stays are written: the
        ``.txnindex`` of the cleaned segment being written."""

    def add_aborted_transactions(self, aborted: Iterable[AbortedTxn]) -> None:
        for transaction in aborted:
            heapq.heappush(self._aborted, (transaction.first_offset, self._added, transaction))
            self._added += 1

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, _, transaction = heapq.heappop(self._aborted)
            self._ongoing_aborted.setdefault(
                transaction.producer_id, _AbortedTransaction(transaction)
            )

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """A data batch met: True when it belongs to an aborted transaction (its records go)."""
        self._consume_aborted_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(batch.producer_id)
        if ongoing is not None:
            ongoing.last_observed_batch_offset = batch.last_offset
            return True
        self._ongoing_committed.add(batch.producer_id)
        return False

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """A control batch met: True when no batch of its transaction is left before it, so
        the marker may go (once its delete horizon passes)."""
        self._consume_aborted_up_to(batch.last_offset)
        record = next(iter(batch.records()), None)
        if record is None:
            return True  # a marker emptied by an earlier cleaning
        control_type = ControlRecordType.of_key(record.key)
        producer_id = batch.producer_id
        if control_type is ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing.aborted)
                return False
            return True
        if control_type is ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False
