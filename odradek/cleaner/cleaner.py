"""Cleaner: compacts one log, in the cleaning process (Kafka's ``Cleaner.doClean``).

Two passes. The first maps every key of the dirty section to its latest offset, as far as
the offset map holds. The second rewrites every segment below the map's end, group by group,
each group into one ``<base>.log.cleaned`` segment that is flushed and renamed ``.swap``;
the broker then swaps the ``.swap`` segments into the live log (``Log.replace_segments``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from odradek.cleaner.batch_filter import BatchFilter
from odradek.cleaner.batch_keys import BatchKeys
from odradek.cleaner.cleaner_stats import CleanerStats
from odradek.cleaner.cleaning_result import CleaningResult
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import LogCleaningAbortedError, LogCleaningError
from odradek.cleaner.segment_groups import group_segments_by_size
from odradek.cleaner.segment_snapshot import SegmentSnapshot
from odradek.cleaner.skimpy_offset_map import BYTES_PER_ENTRY, SkimpyOffsetMap
from odradek.cleaner.throttler import Throttler
from odradek.storage import log_file_names as names
from odradek.storage.atomic_file import fsync_directory
from odradek.storage.clock import SYSTEM_CLOCK
from odradek.storage.file_records import FileRecords
from odradek.storage.log_segment import LogSegment


class Cleaner:
    """Carries out one :class:`CleaningTask`."""

    def __init__(self, task: CleaningTask, throttler: Throttler | None = None) -> None:
        self.task = task
        self.throttler = throttler or Throttler(task.io_bytes_per_second)
        self.stats = CleanerStats()

    def clean(self) -> CleaningResult:
        """Map, then rewrite; the ``.swap`` segments are on disk (and durable) on return."""
        offset_map = SkimpyOffsetMap(self._map_memory(), self.task.load_factor)
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
        self.stats.throttled_s = self.throttler.slept_s
        self.stats.all_done()
        return CleaningResult(
            end_offset, tuple(tuple(s.base_offset for s in group) for group in groups), self.stats
        )

    def _map_memory(self) -> int:
        """The dedupe buffer, or less when the dirty section has fewer offsets: room for all
        of them at a load of one half, where a lookup takes little more than one probe (each
        run is a fresh process, so nothing is gained by allocating more)."""
        dirty_offsets = self.task.first_uncleanable_offset - self.task.first_dirty_offset
        roomy = (2 * dirty_offsets + 3) * BYTES_PER_ENTRY
        return min(self.task.dedupe_buffer_size, roomy)

    # --- pass 1: the offset map --------------------------------------------------------------

    def _build_offset_map(self, offset_map: SkimpyOffsetMap) -> int:
        """Map the dirty section's keys; return the offset the map covers up to (exclusive)."""
        start = self.task.first_dirty_offset
        for segment, upper_bound in zip(self.task.segments, self.task.upper_bounds(), strict=True):
            if upper_bound <= start:
                continue
            if self._map_segment(segment, offset_map, start):
                break
            offset_map.update_latest_offset(upper_bound - 1)
        end_offset = offset_map.latest_offset + 1
        if end_offset <= start:
            raise LogCleaningError(
                f"[{self.task.topic_partition}] the offset map ({offset_map.max_entries} keys) "
                f"cannot hold the first batch at offset {start}; raise "
                f"log.cleaner.dedupe.buffer.size"
            )
        return end_offset

    def _map_segment(
        self, segment: SegmentSnapshot, offset_map: SkimpyOffsetMap, start: int
    ) -> bool:
        """Add the segment's keys from ``start`` on; True when the map filled up first."""
        records = self._open(segment)
        try:
            for _, batch in records.batches():
                size = batch.size_in_bytes
                self.throttler.maybe_throttle(size)
                self.stats.index_bytes_read(size, batch.records_count)
                if batch.last_offset < start:
                    continue
                keys = BatchKeys.read(batch)
                for offset, key in zip(keys.offsets, keys.keys, strict=True):
                    if key is not None and offset >= start:
                        if offset_map.is_full:
                            return True
                        offset_map.put(key, offset)
                offset_map.update_latest_offset(batch.last_offset)
        finally:
            records.close_handler()
        return False

    # --- pass 2: the cleaned segments --------------------------------------------------------

    def _clean_segments(
        self, group: Sequence[SegmentSnapshot], offset_map: SkimpyOffsetMap
    ) -> None:
        """Write ``group`` as one ``.cleaned`` segment, make it durable, rename it ``.swap``."""
        cleaned = self._create_cleaned_segment(group[0].base_offset)
        try:
            for source in group:
                retain_deletes = source.last_modified_ms > self.task.delete_horizon_ms
                self._clean_into(
                    source, cleaned, BatchFilter(offset_map, retain_deletes, self.stats)
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

    def _clean_into(self, source: SegmentSnapshot, cleaned: LogSegment, keep: BatchFilter) -> None:
        records = self._open(source)
        pending = bytearray()
        last_offset = -1
        try:
            for _, batch in records.batches():
                self.throttler.maybe_throttle(batch.size_in_bytes)
                kept = keep.filter(batch)
                if kept:
                    pending += kept
                    last_offset = batch.last_offset
                if len(pending) >= self.task.io_buffer_size:
                    self._write(cleaned, last_offset, pending)
                    pending = bytearray()
            self._write(cleaned, last_offset, pending)
        finally:
            records.close_handler()

    def _write(self, cleaned: LogSegment, last_offset: int, data: bytearray) -> None:
        if data:
            cleaned.append(last_offset, data)
            self.throttler.maybe_throttle(len(data))

    def _create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """A new, empty ``.cleaned`` segment (any left by an earlier failed run goes first)."""
        directory, suffix = self.task.directory, names.CLEANED_FILE_SUFFIX
        for path in (
            names.log_file(directory, base_offset, suffix),
            names.offset_index_file(directory, base_offset, suffix),
            names.time_index_file(directory, base_offset, suffix),
        ):
            path.unlink(missing_ok=True)
        return LogSegment.open(
            directory, base_offset, self.task.log_config, SYSTEM_CLOCK, file_suffix=suffix
        )

    def _open(self, segment: SegmentSnapshot) -> FileRecords:
        """The segment's ``.log``, read-only and as long as it was when the run was planned."""
        path = names.log_file(self.task.directory, segment.base_offset)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise LogCleaningAbortedError(
                f"[{self.task.topic_partition}] segment {segment.base_offset} was deleted "
                f"while the log was being cleaned"
            ) from None
        return FileRecords(path, fd, segment.size)
