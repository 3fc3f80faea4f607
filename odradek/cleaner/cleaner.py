"""Cleaner: compacts one log, in the cleaning process (Kafka's ``Cleaner.doClean``).

Two passes. The first maps every key of the dirty section to its latest offset, as far as
the offset map holds. The second rewrites every segment below the map's end, group by group,
each group into one ``<base>.log.cleaned`` segment that is flushed and renamed ``.swap``;
the broker then swaps the ``.swap`` segments into the live log (``UnifiedLog.replace_segments``).

Both passes read a segment in chunks of whole batches (segment_chunks.py) and hand each chunk
to the offset map (offset_map.py), which in its C form walks every uncompressed batch of it
without returning to Python; this module handles the batches it hands back one at a time.
The first pass checks the CRC of every batch it maps; the C map also notes which records of
the dirty section it settled and which a later record superseded (``track_records``), so the
second pass decides those batches from their headers without reading them again.

Kafka's batch retention: a batch whose records all go goes too, except two whose header stays,
with the records of theirs that stay or none (``BatchRetention.RETAIN_EMPTY``): a live idempotent
producer's last batch, which carries the producer's epoch and last sequence (after a restart its
state is rebuilt from it, so a retry of that batch is still answered as a duplicate), and the
batch that ends at the high watermark (its next offset is the high watermark, Kafka 4.4's rule),
so the log's last offsets are not lost with its records.

Tombstones go as Kafka 4 removes them (KIP-534): the first cleaning that keeps one stamps its
batch with a delete horizon, a later one at or past that horizon drops it (batch_filter.py).

Transactions as Kafka's cleaner: the bulk walks leave transactional and control batches to
this module, which follows the run's transactions (cleaned_transaction_metadata.py). Pass 1
maps no control batch and no batch of an aborted transaction; pass 2 drops the records of
aborted transactions, keeps a marker while its transaction has batches before it and then
until its delete horizon, and writes the aborted transactions whose ABORT marker stays into
the cleaned segment's ``.txnindex``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from odradek.cleaner import batch_scan
from odradek.cleaner.batch_filter import BatchFilter
from odradek.cleaner.batch_keys import Buffer, records_section
from odradek.cleaner.batch_scan import FilterProgress
from odradek.cleaner.cleaned_transaction_metadata import CleanedTransactionMetadata
from odradek.cleaner.cleaned_writer import CleanedWriter
from odradek.cleaner.cleaner_stats import CleanerStats
from odradek.cleaner.cleaning_task import CleaningResult, CleaningTask
from odradek.cleaner.errors import LogCleaningAbortedError, LogCleaningError
from odradek.cleaner.offset_map import OffsetMap, create_offset_map
from odradek.cleaner.segment_chunks import SegmentShrankError, chunk_end, map_log
from odradek.cleaner.segment_snapshot import SegmentSnapshot
from odradek.cleaner.skimpy_offset_map import BYTES_PER_ENTRY
from odradek.cleaner.throttler import Throttler
from odradek.clock import SYSTEM_CLOCK
from odradek.errors import CorruptRecordError
from odradek.int_limits import INT32_MAX
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RecordBatch,
)
from odradek.storage import log_file_names as names
from odradek.storage.atomic_file import fsync_directory
from odradek.storage.log_segment import LogSegment

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")


class Cleaner:
    """Carries out one :class:`CleaningTask`."""

    def __init__(self, task: CleaningTask, throttler: Throttler | None = None) -> None:
        self.task = task
        self.throttler = throttler or Throttler(task.io_bytes_per_second)
        self.stats = CleanerStats()
        self._maps: dict[int, Buffer] = {}  # base offset -> the segment's mapped .log
        self._map_transactions = CleanedTransactionMetadata()  # pass 1's
        self._map_transactions.add_aborted_transactions(
            t for t in task.aborted_transactions if t.last_offset >= task.first_dirty_offset
        )
        self._transactions = CleanedTransactionMetadata()  # pass 2's, across its groups
        self._transactions.add_aborted_transactions(task.aborted_transactions)

    def clean(self) -> CleaningResult:
        """Map, then rewrite; the ``.swap`` segments are on disk (and durable) on return."""
        try:
            return self._clean()
        finally:
            self._maps.clear()  # unmapped as their last views go

    def _clean(self) -> CleaningResult:
        slept_before_s = self.throttler.slept_s  # a worker's throttler outlives its runs
        offset_map = create_offset_map(self._map_memory(), self.task.load_factor)
        offset_map.track_records(self.task.first_dirty_offset, self._tracked_offsets())
        end_offset = self._build_offset_map(offset_map)
        self.stats.index_done()
        self.stats.buffer_utilization = (
            offset_map.size * BYTES_PER_ENTRY / self.task.dedupe_buffer_size
        )
        to_clean = [s for s in self.task.segments if s.base_offset < end_offset]
        config = self.task.log_config
        groups = group_segments_by_size(
            to_clean,
            config.segment_bytes,
            config.segment_index_bytes,
            self.task.first_uncleanable_offset,
        )
        for group in groups:
            self._clean_segments(group, offset_map)
        self.stats.throttled_s = self.throttler.slept_s - slept_before_s
        self.stats.all_done()
        return CleaningResult(
            end_offset, tuple(tuple(s.base_offset for s in group) for group in groups), self.stats
        )

    def _map_memory(self) -> int:
        """The dedupe buffer, or less when the dirty section has fewer offsets: room for all
        of them at a load of one half, where a lookup takes little more than one probe (the map
        is made for one run and freed after it, so nothing is gained by allocating more)."""
        dirty_offsets = self.task.first_uncleanable_offset - self.task.first_dirty_offset
        roomy = (2 * dirty_offsets + 3) * BYTES_PER_ENTRY
        return min(self.task.dedupe_buffer_size, roomy)

    def _tracked_offsets(self) -> int:
        """How many offsets from the first dirty one the C map notes what pass 1 learns of, so
        that pass 2 need not read their batches again: 2 bits each (_offset_map.c), for the
        whole dirty section up to 1/32 of the dedupe buffer."""
        dirty_offsets = self.task.first_uncleanable_offset - self.task.first_dirty_offset
        return min(dirty_offsets, self.task.dedupe_buffer_size // 8)

    # --- pass 1: the offset map --------------------------------------------------------------

    def _build_offset_map(self, offset_map: OffsetMap) -> int:
        """Map the dirty section's keys; return the offset the map covers up to (exclusive)."""
        start = self.task.first_dirty_offset
        for segment, upper_bound in zip(self.task.segments, self.task.upper_bounds(), strict=True):
            if upper_bound <= start:
                continue
            if self._map_segment(segment, offset_map, start):
                break
            offset_map.latest_offset = upper_bound - 1
        end_offset = offset_map.latest_offset + 1
        if end_offset <= start:
            raise LogCleaningError(
                f"[{self.task.topic_partition}] the offset map ({offset_map.max_entries} keys) "
                f"cannot hold the first batch at offset {start}; raise "
                f"log.cleaner.dedupe.buffer.size"
            )
        return end_offset

    def _map_segment(self, segment: SegmentSnapshot, offset_map: OffsetMap, start: int) -> bool:
        """Add the segment's keys from ``start`` on; True when the map filled up first."""
        data = self._mapped(segment)
        position = 0
        while (end := chunk_end(data, position)) is not None:
            position, status = self._map_chunk(data, position, end, offset_map, start)
            if status == batch_scan.FULL:
                return True
            if status == batch_scan.BAD_LENGTH:
                break
        return False

    def _map_chunk(
        self, data: Buffer, position: int, end: int, offset_map: OffsetMap, start: int
    ) -> tuple[int, int]:
        """Map the whole batches of ``data[position:end]``: the C map takes uncompressed
        batches in bulk, this loop the others one by one. Where it stopped, and why."""
        while True:
            position, status, records, size = offset_map.map_batches(data, position, end, start)
            self.stats.index_bytes_read(size, records)
            self.throttler.maybe_throttle(size)
            if status != batch_scan.OTHER:
                return position, status
            batch = RecordBatch(data, position)
            if not self._map_batch(batch, offset_map, start):
                return position, batch_scan.FULL
            position += batch.size_in_bytes

    def _map_batch(self, batch: RecordBatch, offset_map: OffsetMap, start: int) -> bool:
        """Map one batch (compressed, or one the bulk walk refused); False when the map filled
        up first. CorruptRecordError when it is corrupt or its records do not frame."""
        size = batch.size_in_bytes
        self.throttler.maybe_throttle(size)
        self.stats.index_bytes_read(size, batch.records_count)
        last_offset = batch.last_offset
        if batch.is_control:
            self._map_transactions.on_control_batch_read(batch)
            skipped = True
        else:
            skipped = batch.is_transactional and self._map_transactions.on_batch_read(batch)
        if last_offset < start:
            return True
        if skipped:  # a marker, or a batch of an aborted transaction: no key of theirs counts
            offset_map.latest_offset = last_offset
            return True
        batch.ensure_valid()
        data, position = records_section(batch)
        status = offset_map.map_records(
            data, position, len(data), batch.records_count, batch.base_offset, start
        )
        if status == batch_scan.CORRUPT:
            raise CorruptRecordError(
                f"[{self.task.topic_partition}] {batch}: its records do not frame"
            )
        if status == batch_scan.FULL:
            return False
        offset_map.latest_offset = last_offset
        return True

    # --- pass 2: the cleaned segments --------------------------------------------------------

    def _clean_segments(self, group: Sequence[SegmentSnapshot], offset_map: OffsetMap) -> None:
        """Write ``group`` as one ``.cleaned`` segment, make it durable, rename it ``.swap``."""
        cleaned = self._create_cleaned_segment(group[0].base_offset)
        self._transactions.cleaned_index = cleaned.txn_index
        upper_bounds = dict(
            zip((s.base_offset for s in self.task.segments), self.task.upper_bounds(), strict=True)
        )
        try:
            keep = BatchFilter(
                offset_map,
                self.task.current_time_ms,
                self.task.log_config.delete_retention_ms,
                self.stats,
                self._transactions,
            )
            for source in group:
                # Only the segment holding the offset before the high watermark can hold the
                # batch ending there.
                before_hw = self.task.high_watermark - 1
                holds_last = source.base_offset <= before_hw < upper_bounds[source.base_offset]
                self._clean_into(
                    source,
                    cleaned,
                    keep,
                    _HeaderKeeper(self.task, holds_last),
                )
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.close()
            cleaned.set_last_modified(group[-1].last_modified_ms)
            cleaned.change_file_suffixes(names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)
            fsync_directory(self.task.directory)
        except BaseException:
            cleaned.delete_if_exists()
            raise

    def _clean_into(
        self,
        source: SegmentSnapshot,
        cleaned: LogSegment,
        keep: BatchFilter,
        headers: _HeaderKeeper,
    ) -> None:
        data = self._mapped(source)
        writer = CleanedWriter(cleaned, self.task.io_buffer_size, self.throttler)
        position = 0
        while (end := chunk_end(data, position)) is not None:
            position, status = self._filter_chunk(data, position, end, keep, writer, headers)
            if status == batch_scan.BAD_LENGTH:
                break
        writer.flush()
        del self._maps[source.base_offset]  # its last view is gone: this unmaps it

    def _filter_chunk(
        self,
        data: Buffer,
        position: int,
        end: int,
        keep: BatchFilter,
        writer: CleanedWriter,
        headers: _HeaderKeeper,
    ) -> tuple[int, int]:
        """Filter the whole batches of ``data[position:end]`` into ``writer``: the C map decides
        batches that keep all of their records or none in bulk, ``keep`` the others one by
        one, and the batches whose header stays (``headers``). Where it stopped, and why."""
        view = memoryview(data)
        protected = headers.next_kept(data, position, end)
        while True:
            limit = end if protected is None else protected
            progress = FilterProgress._make(
                keep.offset_map.filter_batches(data, position, limit, keep.current_time_ms)
            )
            self.throttler.maybe_throttle(progress.bytes_read)
            self.stats.read_records(progress.bytes_read, progress.records_read)
            self.stats.invalid_records(progress.keyless)
            self.stats.recopy_records(progress.bytes_kept, progress.records_kept)
            for start, stop in progress.kept_spans:
                writer.add(view[start:stop], progress.last_kept_offset)
            position = progress.position
            at_protected = position == protected
            if progress.status != batch_scan.OTHER and not at_protected:
                return position, progress.status
            batch = RecordBatch(data, position)
            size = batch.size_in_bytes
            self.throttler.maybe_throttle(size)
            if at_protected:
                writer.add(keep.filter(batch, retain_empty=True), batch.last_offset)
                protected = headers.next_kept(data, position + size, end)
            elif kept := keep.filter(batch):
                writer.add(kept, batch.last_offset)
            position += size

    def _create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A new, empty ``.cleaned`` segment (any left by an earlier failed run goes first)."""
        directory, suffix = self.task.directory, names.CLEANED_FILE_SUFFIX
        for path in (
            names.log_file(directory, base_offset, suffix),
            names.offset_index_file(directory, base_offset, suffix),
            names.time_index_file(directory, base_offset, suffix),
            names.transaction_index_file(directory, base_offset, suffix),
        ):
            path.unlink(missing_ok=True)
        return LogSegment.open(
            directory, base_offset, self.task.log_config, SYSTEM_CLOCK, file_suffix=suffix
        )

    def _mapped(self, segment: SegmentSnapshot) -> Buffer:
        """The segment's ``.log``, as long as it was when the run was planned, mapped once a
        run (segment_chunks.py): pass 1 maps it, pass 2 reads the same map and drops it."""
        data = self._maps.get(segment.base_offset)
        if data is not None:
            return data
        path = names.log_file(self.task.directory, segment.base_offset)
        try:
            data = map_log(path, segment.size)
        except FileNotFoundError:
            raise LogCleaningAbortedError(
                f"[{self.task.topic_partition}] segment {segment.base_offset} was deleted "
                f"while the log was being cleaned"
            ) from None
        except SegmentShrankError as error:
            raise LogCleaningAbortedError(
                f"[{self.task.topic_partition}] segment {segment.base_offset} shrank while the "
                f"log was being cleaned: {error}"
            ) from None
        self._maps[segment.base_offset] = data
        return data


class _HeaderKeeper:
    """Finds, in one source segment, the batches whose header a cleaned segment keeps even when
    none of their records stays (Kafka's ``checkBatchRetention`` answering ``RETAIN_EMPTY``): a
    live producer's last batch (its last offset is the producer's last data offset), or its
    marker of its current epoch when a marker is its last record, and, in the segment holding
    it, the batch ending at the high watermark."""

    def __init__(self, task: CleaningTask, holds_last: bool) -> None:
        self._producer_last_offsets = task.producer_last_offsets
        self._marker_epochs = task.producer_marker_epochs
        self._round_last_offset = task.high_watermark - 1 if holds_last else None

    def next_kept(self, data: Buffer, position: int, end: int) -> int | None:
        """Where the next such batch in ``data[position:end]`` starts; None when there is none.
        Only logs with idempotent producers, and the segment a round ends in, pay for this
        header walk."""
        last_offsets, round_last = self._producer_last_offsets, self._round_last_offset
        marker_epochs = self._marker_epochs
        if not last_offsets and round_last is None and not marker_epochs:
            return None
        while position + HEADER_SIZE <= end:
            base_offset, length = _OFFSET_AND_LENGTH.unpack_from(data, position)
            delta = _INT32.unpack_from(data, position + LAST_OFFSET_DELTA_OFFSET)[0]
            last_offset = base_offset + delta
            if last_offset == round_last or last_offset in last_offsets:
                return position
            if marker_epochs and _is_marker_of(data, position, marker_epochs):
                return position
            position += length + LOG_OVERHEAD
        return None


def _is_marker_of(data: Buffer, position: int, marker_epochs: frozenset[tuple[int, int]]) -> bool:
    """Whether the batch at ``position`` is a control batch of one of these (producer id,
    epoch) pairs."""
    attributes = _INT16.unpack_from(data, position + ATTRIBUTES_OFFSET)[0]
    if not attributes & CONTROL_FLAG_MASK:
        return False
    producer_id = _INT64.unpack_from(data, position + PRODUCER_ID_OFFSET)[0]
    epoch = _INT16.unpack_from(data, position + PRODUCER_EPOCH_OFFSET)[0]
    return (producer_id, epoch) in marker_epochs


def group_segments_by_size(
    segments: Sequence[SegmentSnapshot],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[SegmentSnapshot]]:
    """Consecutive runs of ``segments`` whose data fits ``max_size`` bytes, whose indexes fit
    ``max_index_size`` bytes each and whose offsets fit one segment's int32 relative offsets
    (Kafka's ``Cleaner.groupSegmentsBySize``). Cleaning only shrinks a segment, so a group's
    output fits wherever its input did."""
    groups: list[list[SegmentSnapshot]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        offset_index_size = group[0].offset_index_bytes
        time_index_size = group[0].time_index_bytes
        while (
            rest
            and log_size + rest[0].size <= max_size
            and offset_index_size + rest[0].offset_index_bytes <= max_index_size
            and time_index_size + rest[0].time_index_bytes <= max_index_size
            and (
                rest[0].size == 0
                or _last_offset_bound(rest, first_uncleanable_offset) - group[0].base_offset
                <= INT32_MAX
            )
        ):
            segment = rest.pop(0)
            group.append(segment)
            log_size += segment.size
            offset_index_size += segment.offset_index_bytes
            time_index_size += segment.time_index_bytes
        groups.append(group)
    return groups


def _last_offset_bound(rest: list[SegmentSnapshot], first_uncleanable_offset: int) -> int:
    """The highest offset the first of ``rest`` may hold: below the next segment's base."""
    return (rest[1].base_offset if len(rest) > 1 else first_uncleanable_offset) - 1
