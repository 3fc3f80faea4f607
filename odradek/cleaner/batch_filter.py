"""BatchFilter: which records of a batch a cleaned segment keeps (Kafka's ``shouldRetainRecord``
applied through ``MemoryRecords.filterTo``), one batch at a time.

The cleaner's second pass hands whole chunks to the offset map's ``filter_batches``, which
decides uncompressed batches that keep all of their records or none; the rest (compressed
batches, batches that keep some records, and any it finds fault with) come here, and so do the
batches whose header stays even when none of their records does (Kafka's
``BatchRetention.RETAIN_EMPTY``: see cleaner.py).

Transactions go as Kafka's cleaner treats them (cleaned_transaction_metadata.py): a batch of an
aborted transaction loses all of its records; a COMMIT or ABORT marker stays until no batch of
its transaction is left before it, is then rewritten with a delete horizon as a tombstone's
batch is, and goes at or past that horizon.

Tombstones go as Kafka (2.8 on, KIP-534) removes them: a cleaning that keeps a tombstone in a
batch without a delete horizon rewrites the batch with one (attribute bit 6; its base timestamp
is then the horizon, the cleaning's time plus ``delete.retention.ms``, and its records'
timestamp deltas are relative to it, so they keep their timestamps); a later cleaning at or
past that horizon drops the batch's tombstones. A batch that already has a horizon keeps it,
whatever ``delete.retention.ms`` says now; an empty batch (a header kept alone) has none.
"""

from __future__ import annotations

from odradek.cleaner.batch_keys import records_section
from odradek.cleaner.batch_scan import retains_deletes
from odradek.cleaner.cleaned_transaction_metadata import CleanedTransactionMetadata
from odradek.cleaner.cleaner_stats import CleanerStats
from odradek.cleaner.offset_map import OffsetMap
from odradek.errors import CorruptRecordError
from odradek.record.record import Record
from odradek.record.record_batch import RecordBatch
from odradek.record.record_batch_builder import build_batch, build_empty_batch


class BatchFilter:
    """Filters the batches of one source segment against the offset map.

    A record is kept when its offset is past the map's last offset, or when it has a key, its
    offset is at least the map's offset for that key, and it is not a tombstone of a batch
    whose delete horizon is at or before ``current_time_ms`` (the time the cleaning started).
    """

    def __init__(
        self,
        offset_map: OffsetMap,
        current_time_ms: int,
        delete_retention_ms: int,
        stats: CleanerStats,
        transactions: CleanedTransactionMetadata | None = None,
    ) -> None:
        self.offset_map = offset_map
        self.current_time_ms = current_time_ms
        self.delete_retention_ms = delete_retention_ms
        self._stats = stats
        self.transactions = transactions or CleanedTransactionMetadata()

    def filter(self, batch: RecordBatch, retain_empty: bool = False) -> bytes:
        """The batch as the cleaned segment holds it: as it was when every record stays (and
        it has a delete horizon or keeps no tombstone), else rebuilt around the kept records
        (same base offset, last offset, codec, producer fields; the batch's delete horizon, or
        a new one when it keeps a tombstone); when none stays ``b""``, or with
        ``retain_empty`` its header alone (no records). CorruptRecordError for a corrupt
        batch."""
        batch.ensure_valid()
        count = batch.records_count
        self._stats.read_records(batch.size_in_bytes, count)
        if batch.is_control:
            return self._filter_marker(batch, retain_empty)
        if batch.is_transactional and self.transactions.on_batch_read(batch):
            return self._discarded(batch, retain_empty)  # an aborted transaction's
        horizon = batch.delete_horizon_ms
        if batch.base_offset > self.offset_map.latest_offset and horizon is not None:
            kept_bytes = batch.to_bytes()
            self._stats.recopy_records(len(kept_bytes), count)
            return kept_bytes
        data, position = records_section(batch)
        retained = self.offset_map.retain_records(
            data,
            position,
            len(data),
            count,
            batch.base_offset,
            retains_deletes(horizon, self.current_time_ms),
        )
        if retained is None:
            raise CorruptRecordError(f"{batch}: its records do not frame")
        mask, keyless = retained
        if keyless:
            self._stats.invalid_records(keyless)
        kept = sum(mask)
        if not kept:
            return self._discarded(batch, retain_empty)
        if kept == count and horizon is not None:
            kept_bytes = batch.to_bytes()
        else:
            records = [record for record, keep in zip(batch.records(), mask, strict=True) if keep]
            if horizon is None and any(record.value is None for record in records):
                horizon = self.current_time_ms + self.delete_retention_ms
            elif kept == count:  # no tombstone kept and no horizon: as it was
                records = []
            kept_bytes = _rebuild(batch, records, horizon) if records else batch.to_bytes()
        self._stats.recopy_records(len(kept_bytes), kept)
        return kept_bytes

    def _filter_marker(self, batch: RecordBatch, retain_empty: bool) -> bytes:
        """A COMMIT or ABORT marker (Kafka's ``checkBatchRetention`` for a control batch): it
        stays while its transaction has batches before it; once it has none it is given a
        delete horizon, and goes at or past it."""
        may_go = self.transactions.on_control_batch_read(batch)
        horizon = batch.delete_horizon_ms
        if may_go and horizon is not None and horizon <= self.current_time_ms:
            return self._discarded(batch, retain_empty)
        if not batch.records_count:
            return self._discarded(batch, retain_empty)
        if may_go and horizon is None:
            horizon = self.current_time_ms + self.delete_retention_ms
            kept_bytes = _rebuild(batch, list(batch.records()), horizon)
        else:
            kept_bytes = batch.to_bytes()
        self._stats.recopy_records(len(kept_bytes), batch.records_count)
        return kept_bytes

    def _discarded(self, batch: RecordBatch, retain_empty: bool) -> bytes:
        """None of the batch's records stays: nothing, or with ``retain_empty`` its header."""
        if not retain_empty:
            return b""
        empty = _empty(batch)
        self._stats.recopy_records(len(empty), 0)
        return empty


def _rebuild(batch: RecordBatch, records: list[Record], delete_horizon_ms: int | None) -> bytes:
    """The batch around ``records``, with ``delete_horizon_ms`` (None: none); its last offset
    stays, so its producer's last sequence does (a retry of it is still recognised)."""
    return build_batch(
        records,
        delete_horizon_ms=delete_horizon_ms,
        compression=batch.compression_type,
        base_offset=batch.base_offset,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        partition_leader_epoch=batch.partition_leader_epoch,
        is_transactional=batch.is_transactional,
        last_offset=batch.last_offset,
        is_control=batch.is_control,
    )


def _empty(batch: RecordBatch) -> bytes:
    """The batch's header with no records (Kafka's ``writeEmptyHeader``)."""
    return build_empty_batch(
        base_offset=batch.base_offset,
        last_offset=batch.last_offset,
        timestamp_type=batch.timestamp_type,
        max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        partition_leader_epoch=batch.partition_leader_epoch,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
    )
