"""LogSegment: one ``.log`` file with its offset, time and transaction indexes (design §4, 5,
6, 8). The ``.txnindex`` (aborted transactions whose ABORT marker the segment holds) is created
by its first entry, as Kafka's; it is renamed, truncated and deleted with the segment."""

from __future__ import annotations

import logging
import os
import random
import threading
from pathlib import Path

from odradek.clock import Clock
from odradek.config.log_config import LogConfig
from odradek.errors import CorruptIndexError, LogSegmentOffsetOverflowError
from odradek.int_limits import INT32_MAX
from odradek.record.batch_header import BatchHeader
from odradek.record.record_batch import LOG_OVERHEAD, MAGIC
from odradek.storage import log_file_names as names
from odradek.storage import segment_append_state
from odradek.storage.fetch_data_info import FetchDataInfo
from odradek.storage.file_records import (
    FileRecords,
    LogOffsetPosition,
    TimestampAndOffset,
)
from odradek.storage.lazy_index import LazyIndex
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.segment_append_state import AppendState
from odradek.storage.time_index import TimeIndex
from odradek.storage.transaction_index import TransactionIndex
from odradek.storage.writeback import MAX_WRITE_BYTES

logger = logging.getLogger(__name__)


class LogSegment:
    """A segment of a partition's log: the records from ``base_offset`` up to the next segment.

    Appends go to the end of the ``.log`` file; every ``index_interval_bytes`` an entry is added
    to each index so reads can find a position without scanning the whole file.
    """

    def __init__(
        self,
        log: FileRecords,
        offset_index: LazyIndex[OffsetIndex],
        time_index: LazyIndex[TimeIndex],
        base_offset: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        clock: Clock,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self.log = log
        self.txn_index = txn_index or TransactionIndex(
            base_offset, names.transaction_index_file(log.path.parent, base_offset)
        )
        """The segment's aborted transactions (its file appears with the first one)."""
        self._offset_index = offset_index
        self._time_index = time_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._clock = clock
        self._created_ms = clock.milliseconds()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        # The largest batch timestamp so far and its offset, replaced whole so readers never
        # see half of a change; None until first needed (then read from the time index). A
        # plain tuple, not a TimestampAndOffset: most appends make one.
        self._max_timestamp_and_offset: tuple[int, int] | None = None
        # The pair (that very tuple) last given to the time index since its entries last
        # changed otherwise: giving it again would add nothing, so an index entry due while
        # the max timestamp stands still (appends within one millisecond) skips that call.
        self._time_indexed: tuple[int, int] | None = None
        self._checked_indexes: tuple[OffsetIndex, TimeIndex] | None = None
        self._index_check_lock = threading.Lock()
        self.append_state: AppendState | None = None
        """While the segment takes appends: the state that owns what they change (see
        ``lend_append_state``), lent on the first append and taken back before anything else
        changes the files. Read, never set, outside the segment: UnifiedLog.append calls it."""
        self._closed = False
        self._close_lock = threading.Lock()  # a background flush never meets a half-closed file

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        clock: Clock,
        *,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (or create) the three files of the segment at ``base_offset`` in ``directory``."""
        log = FileRecords.open(
            names.log_file(directory, base_offset, file_suffix),
            file_already_exists=file_already_exists,
            init_file_size=init_file_size,
            preallocate=preallocate,
        )
        max_index_size = config.segment_index_bytes
        offset_index = LazyIndex.for_offset(
            names.offset_index_file(directory, base_offset, file_suffix),
            base_offset,
            max_index_size,
        )
        time_index = LazyIndex.for_time(
            names.time_index_file(directory, base_offset, file_suffix), base_offset, max_index_size
        )
        jitter = random.randrange(config.segment_jitter_ms) if config.segment_jitter_ms > 0 else 0
        txn_index = TransactionIndex(
            base_offset, names.transaction_index_file(directory, base_offset, file_suffix)
        )
        return cls(
            log,
            offset_index,
            time_index,
            base_offset,
            config.index_interval_bytes,
            jitter,
            clock,
            txn_index,
        )

    # --- accessors ---------------------------------------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        return (self._checked_indexes or self._check_indexes())[0]

    @property
    def time_index(self) -> TimeIndex:
        return (self._checked_indexes or self._check_indexes())[1]

    def _check_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """Open and sanity-check both indexes the first time either is used (design §5); rebuild
        them from the ``.log`` when either is corrupt. Lazy so opening thousands of segments
        stays fast; afterwards the pair is one attribute read away."""
        with self._index_check_lock:
            if self._checked_indexes is None:
                indexes = (self._offset_index.get(), self._time_index.get())
                self._checked_indexes = indexes  # before recover(), which uses them
                try:
                    for index in indexes:
                        index.sanity_check()
                except CorruptIndexError as error:
                    logger.warning("%s: %s; rebuilding the indexes", self.log.path, error)
                    self.recover()
            return self._checked_indexes

    @property
    def offset_index_path(self) -> Path:
        return self._offset_index.path

    @property
    def time_index_path(self) -> Path:
        return self._time_index.path

    @property
    def size(self) -> int:
        return self.log.size_in_bytes

    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampAndOffset:
        """The largest batch timestamp in the segment and the offset it came with."""
        return TimestampAndOffset(*self._max_timestamp_and_offset_pair())

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset_pair()[0]

    def _max_timestamp_and_offset_pair(self) -> tuple[int, int]:
        state = self.append_state
        if state is not None:
            return state.max_timestamp_and_offset
        latest = self._max_timestamp_and_offset
        if latest is None:
            last = self.time_index.last_entry
            latest = self._max_timestamp_and_offset = (last.timestamp, last.offset)
        return latest

    @property
    def largest_timestamp(self) -> int:
        """The segment's age for retention: its max timestamp, else the file's mtime."""
        max_timestamp = self.max_timestamp_so_far
        return max_timestamp if max_timestamp >= 0 else self.last_modified

    @property
    def last_modified(self) -> int:
        return os.stat(self.log.path).st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        os.utime(self.log.path, ns=(ms * 1_000_000, ms * 1_000_000))

    # --- append ------------------------------------------------------------------------------

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(
        self,
        largest_offset: int,
        records: bytes | bytearray | memoryview,
        *,
        write_through: bool = False,
    ) -> None:
        """Write whole, validated batches at the end of the file and add sparse index entries
        (``write_through``: see ``FileRecords.append``)."""
        if not records:
            return
        if not self.can_convert_to_relative_offset(largest_offset):
            raise LogSegmentOffsetOverflowError(
                f"offset {largest_offset} does not fit segment {self.base_offset} ({self.log.path})"
            )
        self._write(records, write_through)

    def _write(self, records: bytes | bytearray | memoryview, write_through: bool) -> None:
        """``append`` once its checks passed: the write at the end of the file and the index
        entries due, by the segment's append state."""
        (self.append_state or self.lend_append_state()).append(records, write_through)

    # --- the append state --------------------------------------------------------------------

    def lend_append_state(self) -> AppendState:
        """Hand the facts an append reads and changes to a ``SegmentAppendState`` (the C type
        when it is built), which owns them until ``_take_back_append_state``: the file's size,
        both indexes' entry counts and last entries, and the segment's counters. The file and
        the indexes read them through it meanwhile."""
        offset_index, time_index = self._checked_indexes or self._check_indexes()
        log = self.log
        if log.fd < 0:
            log.start_writing()
        size = log.size_in_bytes
        if self._rolling_based_timestamp is None and size > 0:
            first = next(log.batch_headers(0), None)
            if first is not None:
                self._rolling_based_timestamp = first[1].max_timestamp
        max_timestamp, offset_of_max_timestamp = self._max_timestamp_and_offset_pair()
        state = segment_append_state.SegmentAppendState(
            fd=log.fd,
            size=size,
            base_offset=self.base_offset,
            index_interval_bytes=self.index_interval_bytes,
            bytes_since_last_index_entry=self._bytes_since_last_index_entry,
            max_timestamp=max_timestamp,
            offset_of_max_timestamp=offset_of_max_timestamp,
            offset_entries=offset_index.entries,
            offset_max_entries=offset_index.max_entries,
            offset_last=offset_index.last_fields(),
            time_entries=time_index.entries,
            time_max_entries=time_index.max_entries,
            time_last=time_index.last_fields(),
            rolling_based_timestamp=self._rolling_based_timestamp,
            created_ms=self._created_ms,
            roll_jitter_ms=self.roll_jitter_ms,
            max_write_bytes=MAX_WRITE_BYTES,
            map_indexes=lambda: (offset_index.writable_map(), time_index.writable_map()),
        )
        log.lend_to(state)
        offset_index.lend_to(state)
        time_index.lend_to(state)
        self.append_state = state
        return state

    def _take_back_append_state(self) -> None:
        """Own the append state's facts again and let it give back its buffers on the index
        maps: before anything but an append changes the files (roll, truncation, recovery,
        resize, close)."""
        state = self.append_state
        if state is None:
            return
        self._bytes_since_last_index_entry = state.bytes_since_last_index_entry
        self._max_timestamp_and_offset = state.max_timestamp_and_offset
        self._rolling_based_timestamp = state.rolling_based_timestamp
        self._time_indexed = None
        self.log.take_back()
        if self._checked_indexes is not None:
            for index in self._checked_indexes:
                index.take_back()
        self.append_state = None
        state.release()

    @property
    def bytes_since_last_index_entry(self) -> int:
        state = self.append_state
        if state is None:
            return self._bytes_since_last_index_entry
        return state.bytes_since_last_index_entry

    @property
    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp, which the roll check ages the segment by (None
        until known)."""
        state = self.append_state
        return self._rolling_based_timestamp if state is None else state.rolling_based_timestamp

    def _observe_batch(self, max_timestamp: int, last_offset: int) -> None:
        """Take a batch's max timestamp into the segment's."""
        if max_timestamp > self._max_timestamp_and_offset_pair()[0]:
            self._max_timestamp_and_offset = (max_timestamp, last_offset)

    # --- roll --------------------------------------------------------------------------------

    def try_append(
        self,
        config: LogConfig,
        largest_offset: int,
        largest_timestamp: int,
        records: bytes | bytearray,
        now_ms: int,
    ) -> bool:
        """``append`` unless the segment must roll first: whether it did (the UnifiedLog's append).

        The roll check is design §4 step 4, before an append of ``records`` up to offset
        ``largest_offset`` and timestamp ``largest_timestamp`` at ``now_ms``: size
        (segment.bytes), age (segment.ms less the jitter; record time from the first batch's
        max timestamp on, as Kafka's ``LogSegment.timeWaitedForRoll``), a full index,
        or a relative offset overflow. Kafka passes these in a RollParams; they come as
        arguments here, and check and write are one call, because this runs on every append.
        """
        state = self.append_state or self.lend_append_state()
        return state.try_append(
            records,
            largest_offset,
            largest_timestamp,
            now_ms,
            config.segment_bytes,
            config.segment_ms,
        )

    def on_become_inactive_segment(self) -> None:
        """The segment stopped taking writes: add the final time index entry, trim the files,
        and let its descriptor become an idle one (closed when little used, see
        ``IdleFileCache``)."""
        self._take_back_append_state()
        latest = self.max_timestamp_and_offset_so_far
        if latest.timestamp >= 0:
            self.time_index.maybe_append(latest.timestamp, latest.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()
        self.log.stop_writing()

    def resize_indexes(self, max_index_size: int) -> None:
        """Give the indexes room again (the segment became the active one)."""
        self._take_back_append_state()
        self.offset_index.resize(max_index_size)
        self.time_index.resize(max_index_size)

    # --- read --------------------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (or the first after it): index lookup, then a scan."""
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(
            offset, max(mapping.position, starting_position)
        )

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
        start_position: int | None = None,
    ) -> FetchDataInfo | None:
        """A slice from the batch holding ``start_offset``, at most ``max_size`` bytes (or the
        whole first batch with ``min_one_message``) and never past byte ``max_position``.
        ``start_position``: where a batch starting at ``start_offset`` is believed to begin
        (checked with one header read; the index lookup and scan otherwise)."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read of segment {self.log.path}")
        if max_position is None:
            max_position = self.size
        start = None
        if start_position is not None:
            start = self.log.batch_starting_at(start_position, start_offset)
        if start is None:
            start = self.translate_offset(start_offset)
        if start is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start.position)
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        fetch_size = max(0, min(max_position - start.position, adjusted_max_size))
        return FetchDataInfo(
            metadata,
            self.log.slice(start.position, fetch_size),
            first_entry_incomplete=adjusted_max_size < start.size,
        )

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with timestamp >= ``timestamp``."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def read_next_offset(self) -> int:
        """The offset after the last batch in the segment (its base offset when empty)."""
        start = self.offset_index.lookup(self.offset_index.last_offset).position
        next_offset = self.base_offset
        for _, header in self.log.batch_headers(start):
            next_offset = header.next_offset
        return next_offset

    # --- recovery and truncation -------------------------------------------------------------

    def recover(self) -> int:
        """Rebuild both indexes from the ``.log`` (trimmed to their entries, as Kafka's) and cut
        it at the first invalid batch.

        Returns the number of bytes truncated. A batch is valid when it is whole, has magic 2, a
        matching CRC, and offsets that follow the previous batch and fit this segment.
        """
        self._take_back_append_state()
        offset_index, time_index = self._checked_indexes or self._unchecked_indexes()
        offset_index.reset()
        time_index.reset()
        self._max_timestamp_and_offset = (-1, -1)
        self._time_indexed = None
        self._bytes_since_last_index_entry = 0
        valid_bytes = 0
        next_offset = self.base_offset
        offset_entries: list[tuple[int, int]] = []  # written in one go at the end
        time_entries: list[tuple[int, int]] = []
        for position, header, crc_matches in self.log.checked_batch_headers():
            problem = self._batch_problem(header, crc_matches, next_offset)
            if problem:
                logger.warning(
                    "%s: invalid batch at position %d: %s", self.log.path, position, problem
                )
                break
            size = header.batch_length + LOG_OVERHEAD
            last_offset = header.base_offset + header.last_offset_delta
            self._observe_batch(header.max_timestamp, last_offset)
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                offset_entries.append((last_offset, position))
                time_entries.append(self._max_timestamp_and_offset)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += size
            valid_bytes = position + size
            next_offset = last_offset + 1
        offset_index.append_all(offset_entries)
        time_index.maybe_append_all(time_entries)
        self.txn_index.truncate_to(next_offset)  # the markers recovery cut (producer state's
        # replay rebuilds the entries of the markers above its snapshot)
        truncated = self.log.size_in_bytes - valid_bytes
        if truncated > 0:
            logger.warning(
                "%s: truncating %d invalid bytes at position %d",
                self.log.path,
                truncated,
                valid_bytes,
            )
            self.log.truncate_to(valid_bytes)
        latest = self.max_timestamp_and_offset_so_far
        if latest.timestamp >= 0:
            time_index.maybe_append(latest.timestamp, latest.offset, skip_full_check=True)
        offset_index.trim_to_valid_size()  # as a closed segment's; the loader resizes the
        time_index.trim_to_valid_size()  # active one's again
        self._rolling_based_timestamp = None
        return truncated

    def _unchecked_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """Both indexes opened without their sanity check, for recover(), which rebuilds them
        whatever they hold: after a crash the active segment's are preallocated zeros, which
        the check would report as corrupt, and recover them a second time."""
        with self._index_check_lock:
            if self._checked_indexes is None:
                self._checked_indexes = (self._offset_index.get(), self._time_index.get())
            return self._checked_indexes

    def _batch_problem(self, header: BatchHeader, crc_matches: bool, min_offset: int) -> str:
        """Why the batch of ``header`` cannot be trusted during recovery, or '' when it can."""
        last_offset = header.base_offset + header.last_offset_delta
        if header.magic != MAGIC:
            return f"magic {header.magic}, expected {MAGIC}"
        if header.base_offset < min_offset:
            return f"base offset {header.base_offset} below the expected {min_offset}"
        if header.last_offset_delta < 0 or not self.can_convert_to_relative_offset(last_offset):
            return f"offsets {header.base_offset}..{last_offset} do not fit the segment"
        if not crc_matches:
            return f"CRC mismatch (stored {header.crc:#010x})"
        return ""

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``; return the bytes removed."""
        self._take_back_append_state()
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self._time_indexed = None
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        self.txn_index.truncate_to(offset)
        if mapping is None:
            return 0
        removed = self.log.truncate_to(mapping.position)
        if self.log.size_in_bytes == 0:
            self._created_ms = self._clock.milliseconds()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if self._max_timestamp_and_offset_pair()[1] >= offset:
            self._max_timestamp_and_offset = None  # read again from the truncated time index
        return removed

    # --- files -------------------------------------------------------------------------------

    def flush(self, include_indexes: bool = True) -> None:
        """fsync the log and (unless told not to) the loaded indexes; a segment closed or
        deleted meanwhile is skipped."""
        with self._close_lock:
            if self._closed:
                return
            self.log.flush()
            self.txn_index.flush()  # (nothing to do unless an entry came since the last one)
            if not include_indexes:
                return
            for index in (self._offset_index, self._time_index):
                if index.is_loaded:
                    index.get().flush()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the files, e.g. ``.log`` to ``.log.deleted``, ``.log.swap`` to ``.log`` (the
        ``.txnindex`` when it exists)."""
        self.log.rename_to(_with_suffix(self.log.path, old_suffix, new_suffix))
        self._offset_index.rename_to(_with_suffix(self._offset_index.path, old_suffix, new_suffix))
        self._time_index.rename_to(_with_suffix(self._time_index.path, old_suffix, new_suffix))
        self.txn_index.rename_to(_with_suffix(self.txn_index.path, old_suffix, new_suffix))

    def rename_for_deletion(self) -> None:
        """Rename the files ``.deleted`` until their delayed delete (design §10). Reads in flight
        go on through the open files; flushes stop, since the names may be gone before a
        scheduled one runs: a later segment of the same base offset, deleted in its turn,
        takes the same ones, and this segment's delete then unlinks them."""
        with self._close_lock:
            self._take_back_append_state()
            self._closed = True
            self.change_file_suffixes("", names.DELETED_FILE_SUFFIX)

    def close(self) -> None:
        """Add the final time index entry, trim and close every file."""
        with self._close_lock:
            self._take_back_append_state()
            if self._closed:
                return
            latest = self._max_timestamp_and_offset
            if latest is not None and latest[0] >= 0:
                self._append_final_time_index_entry(*latest)
            self._closed = True
            self._offset_index.close()
            self._time_index.close()
            self.log.close()

    def _append_final_time_index_entry(self, timestamp: int, offset: int) -> None:
        """The segment's largest timestamp, indexed at close. A time index left without any
        room (its file could not be sized: the process ran out of descriptors at the roll)
        goes without it: lookups by time then scan further, and the close goes on."""
        try:
            self.time_index.maybe_append(timestamp, offset, skip_full_check=True)
        except ValueError as error:
            if not self.time_index.is_full:
                raise
            logger.warning("%s: no final time index entry at close: %s", self.log.path, error)

    def close_handlers(self) -> None:
        """Close the file descriptors without trimming anything (before a deletion)."""
        with self._close_lock:
            self._take_back_append_state()
            self._closed = True
            self._offset_index.close_handler()
            self._time_index.close_handler()
            self.log.close_handler()

    def delete_if_exists(self) -> None:
        """Close and unlink the three files; missing files are fine."""
        with self._close_lock:
            self._take_back_append_state()
            self._closed = True
        self.log.delete_if_exists()
        self._offset_index.delete_if_exists()
        self._time_index.delete_if_exists()
        self.txn_index.delete_if_exists()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path})"


def _with_suffix(path: Path, old_suffix: str, new_suffix: str) -> Path:
    name = path.name
    if old_suffix:
        name = names.strip_suffix(path, old_suffix).name
    return path.with_name(name + new_suffix)
