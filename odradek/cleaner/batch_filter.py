"""BatchFilter: which records of a batch a cleaned segment keeps (Kafka's ``shouldRetainRecord``
applied through ``MemoryRecords.filterTo``)."""

from __future__ import annotations

from odradek.cleaner.batch_keys import BatchKeys
from odradek.cleaner.cleaner_stats import CleanerStats
from odradek.cleaner.skimpy_offset_map import SkimpyOffsetMap
from odradek.storage.record_batch import RecordBatch
from odradek.storage.record_batch_builder import build_batch


class BatchFilter:
    """Filters the batches of one source segment against the offset map.

    A record is kept when its offset is past the map's last offset, or when it has a key, its
    offset is at least the map's offset for that key, and it is not a tombstone that may be
    dropped (``retain_deletes`` is False once the segment is past the delete horizon).
    """

    def __init__(
        self, offset_map: SkimpyOffsetMap, retain_deletes: bool, stats: CleanerStats
    ) -> None:
        self._offset_map = offset_map
        self._retain_deletes = retain_deletes
        self._stats = stats

    def filter(self, batch: RecordBatch) -> bytes:
        """The batch as the cleaned segment holds it: as it was when every record stays,
        rebuilt around the kept records (same base offset, codec, timestamps, producer fields)
        when some go, and ``b""`` when none stays. CorruptRecordError for a corrupt batch."""
        batch.ensure_valid()
        count = batch.records_count
        self._stats.read_records(batch.size_in_bytes, count)
        if batch.base_offset > self._offset_map.latest_offset:
            kept_bytes = batch.to_bytes()
            self._stats.recopy_records(len(kept_bytes), count)
            return kept_bytes
        keys = BatchKeys.read(batch)
        kept = self._kept_indexes(keys)
        if not kept:
            return b""
        kept_bytes = batch.to_bytes() if len(kept) == count else _rebuild(keys, kept)
        self._stats.recopy_records(len(kept_bytes), len(kept))
        return kept_bytes

    def _kept_indexes(self, keys: BatchKeys) -> list[int]:
        latest = self._offset_map.latest_offset
        offset_of = self._offset_map.get
        retain_deletes = self._retain_deletes
        kept = []
        keyless = 0
        for index, (offset, key, tombstone) in enumerate(
            zip(keys.offsets, keys.keys, keys.tombstones, strict=True)
        ):
            if offset > latest:
                kept.append(index)
            elif key is None:
                keyless += 1
            elif offset >= offset_of(key) and (retain_deletes or not tombstone):
                kept.append(index)
        if keyless:
            self._stats.invalid_records(keyless)
        return kept


def _rebuild(keys: BatchKeys, kept: list[int]) -> bytes:
    batch = keys.batch
    return build_batch(
        keys.records(kept),
        compression=batch.compression_type,
        base_offset=batch.base_offset,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        partition_leader_epoch=batch.partition_leader_epoch,
        is_transactional=batch.is_transactional,
    )
