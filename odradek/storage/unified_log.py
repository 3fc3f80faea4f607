"""UnifiedLog: one partition's log (Kafka's ``UnifiedLog``; design §1, 4, 6, 7, 9, 10).

The offsets clients see (log start offset, high watermark, last stable offset), the producer
state, and the append and read entry points the server calls, over the partition's segments on
disk (``LocalLog``: the segment map, the log end, rolls, reads, truncation, deletion and
flushes of segments). The append path's one fast-path decision is made in
``append``: the active segment's append state, or ``LogAppender`` (LogValidator, producer
state, LogSegment). Its concepts have modules of their own: ``HighWatermark``,
``LogTransactions`` (markers, last stable offset, read_committed reads), ``LogLeaderEpochs``,
``ProducerSnapshots``, ``LogRoll``, ``LogTruncation``, ``LogRetention`` (with DeleteRecords),
``offset_by_timestamp`` (ListOffsets); opening a log is ``LogLoader``'s.

One writer at a time (the log lock serialises appends, rolls, truncation and retention); any
number of reader threads read without the lock from immutable snapshots (the segment map and the
offset metadata are replaced, never mutated).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config.log_config import LogConfig
from odradek.storage.active_producer import ActiveProducer
from odradek.storage.fetch_data_info import FetchDataInfo, FetchIsolation
from odradek.storage.file_records import TimestampAndOffset
from odradek.storage.high_watermark import HighWatermark
from odradek.storage.leader_epoch_file_cache import EpochEntry, LeaderEpochFileCache
from odradek.storage.local_log import LocalLog
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.log_appender import LogAppender
from odradek.storage.log_leader_epochs import LogLeaderEpochs
from odradek.storage.log_loader import LoadedLogOffsets, load_log
from odradek.storage.log_offset_metadata import UNKNOWN_OFFSET, LogOffsetMetadata
from odradek.storage.log_retention import LogRetention
from odradek.storage.log_roll import LogRoll
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_segments import LogSegments
from odradek.storage.log_transactions import LogTransactions
from odradek.storage.log_truncation import LogTruncation
from odradek.storage.log_validator import append_rules
from odradek.storage.offset_by_timestamp import fetch_offset_by_timestamp, max_timestamp_record
from odradek.storage.producer_snapshots import ProducerSnapshots
from odradek.storage.producer_state_manager import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
)
from odradek.storage.scheduler import Scheduler

logger = logging.getLogger(__name__)

_LOG_END = FetchIsolation.LOG_END
_TXN_COMMITTED = FetchIsolation.TXN_COMMITTED

IoErrorHandler = Callable[["UnifiedLog", OSError], None]


class UnifiedLog:
    """A partition's log: append, read, its offsets, producer state, flush, retention."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: LogSegments,
        offsets: LoadedLogOffsets,
        scheduler: Scheduler,
        clock: Clock = SYSTEM_CLOCK,
        high_watermark: int | None = None,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        local = self._local = LocalLog(
            directory,
            config,
            segments,
            offsets.recovery_point,
            offsets.next_offset_metadata,
            scheduler,
            clock,
        )
        self.dir = directory
        self.log_dir = local.log_dir
        self.topic_partition = local.topic_partition
        self._config = config
        self._append_rules = append_rules(config)
        self._segments = segments  # the local log's, held at hand for the append path
        self._clock = clock
        self._lock = threading.RLock()
        self._log_start_offset = offsets.log_start_offset
        self._load_summary = offsets
        self._high_watermark = HighWatermark(LogOffsetMetadata(self._log_start_offset), local)
        # What a read at its bound returns (see read), kept for the last bound asked.
        self._nothing_new = FetchDataInfo(self._high_watermark.metadata, None)
        self._io_error_handler: IoErrorHandler | None = None
        self.producer_state = producer_state or ProducerStateManager(directory, directory.name)
        self._producer_table = self.producer_state.table  # the append path's, held at hand
        self._producer_snapshots = ProducerSnapshots(self.producer_state, local, self._lock, clock)
        self._appender = LogAppender(self, local, clock)
        self._transactions = LogTransactions(
            self, self._appender, local, self._high_watermark, self._lock, clock
        )
        self.leader_epoch_cache = LeaderEpochFileCache(directory, str(self.topic_partition))
        self.leader_epochs = LogLeaderEpochs(self.leader_epoch_cache, local, scheduler)
        self._retention = LogRetention(self, self._lock, self._set_log_start_offset, clock)
        self._roll = LogRoll(
            local,
            self._high_watermark,
            self.producer_state,
            self._producer_snapshots,
            scheduler,
            self._lock,
        )
        self._truncation = LogTruncation(
            self,
            local,
            self._high_watermark,
            self._transactions,
            self._producer_snapshots,
            self._lock,
            self._set_log_start_offset,
        )
        self.update_high_watermark(
            offsets.next_offset_metadata.message_offset
            if high_watermark is None
            else high_watermark
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        scheduler: Scheduler,
        *,
        clock: Clock = SYSTEM_CLOCK,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = False,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> UnifiedLog:
        """Open the log in ``directory`` (creating it if needed), recovering it as design §8
        says (LogLoader's load_log: segments, producer state), then its leader epochs.

        ``high_watermark`` is the checkpointed value; None means "up to the log end".
        """
        segments, offsets, producer_state = load_log(
            directory,
            config,
            clock=clock,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
            producer_id_expiration_ms=producer_id_expiration_ms,
        )
        log = cls(
            directory, config, segments, offsets, scheduler, clock, high_watermark, producer_state
        )
        log.leader_epochs.recover(
            segments, log.log_end_offset, None if had_clean_shutdown else recovery_point
        )
        return log

    @classmethod
    def create(
        cls,
        directory: Path,
        config: LogConfig,
        scheduler: Scheduler,
        *,
        clock: Clock = SYSTEM_CLOCK,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> UnifiedLog:
        """A new, empty log in the empty ``directory``: one segment at offset 0 whose indexes
        are created by the first append, so a new partition holds one descriptor (its log
        file) and creating thousands reads nothing back."""
        segments = LogSegments()
        offsets = LoadedLogOffsets(
            log_start_offset=0, recovery_point=0, next_offset_metadata=LogOffsetMetadata(0, 0, 0)
        )
        producer_state = ProducerStateManager(directory, directory.name, producer_id_expiration_ms)
        log = cls(
            directory, config, segments, offsets, scheduler, clock, producer_state=producer_state
        )
        segments.add(log._local.open_segment(0))
        return log

    # --- state -------------------------------------------------------------------------------

    @property
    def load_summary(self) -> LoadedLogOffsets:
        """What opening the log found and did: recovered segments and bytes, bytes truncated."""
        return self._load_summary

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply new topic settings; they take effect from the next append, roll or check."""
        with self._lock:
            self._config = config
            self._local.config = config
            self._append_rules = append_rules(config)

    @property
    def segments(self) -> LogSegments:
        return self._segments

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def local_log(self) -> LocalLog:
        """The partition's segments on disk."""
        return self._local

    @property
    def log_end_offset(self) -> int:
        return self._local.next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._local.next_offset_metadata

    @property
    def last_read_bound(self) -> LogOffsetMetadata:
        """Where the last read that reached its bound stopped: a read from its offset starts
        at its position (see read)."""
        return self._local.last_read_bound

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.metadata.message_offset

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    def recovery_point_to_checkpoint(self) -> int:
        """The recovery point for the recovery-point checkpoint, once the leader epochs it
        passed are written (LogLeaderEpochs.recovery_point_to_checkpoint)."""
        return self.leader_epochs.recovery_point_to_checkpoint(self._log_start_offset)

    @property
    def unflushed_messages(self) -> int:
        return self._local.unflushed_messages

    @property
    def last_flush_time(self) -> int:
        return self._local.last_flush_ms

    @property
    def io_error_handler(self) -> IoErrorHandler | None:
        """Told of an I/O error that takes the log directory offline (the log manager's)."""
        return self._io_error_handler

    @io_error_handler.setter
    def io_error_handler(self, handler: IoErrorHandler | None) -> None:
        self._io_error_handler = handler
        self._local.io_error_handler = None if handler is None else lambda e: handler(self, e)

    @property
    def size_in_bytes(self) -> int:
        return self._segments.size_in_bytes

    @property
    def number_of_segments(self) -> int:
        return self._segments.number_of_segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.active_segment

    def __repr__(self) -> str:
        return f"UnifiedLog({self.topic_partition}, dir={self.dir})"

    # --- append ------------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int = 0,
        *,
        commit: bool = False,
    ) -> LogAppendInfo:
        """Validate ``records``, give them offsets from the log end and write them (design §4).

        A request is written whole or not at all: every check runs before the first byte is
        written, and a failed write is cut back by the segment. With ``commit`` the high
        watermark then moves up to the new log end, as ``maybe_increment_high_watermark``
        would move it, in the same step: what a single replica does after an acks 0 or 1
        append (acks=all commits once the records are flushed).
        """
        # The locks are taken with acquire and release, not ``with``: on this path a with
        # statement costs twice as much (its __enter__ and __exit__ are looked up each time).
        lock = self._lock
        lock.acquire()
        try:
            # The append path's one fast-path decision, made here only. The common request,
            # one batch that fits the active segment, of no producer or of one going on at its
            # next sequence (the producer table's try_next, asked by the call once the batch
            # has its offsets), is validated, given its offsets and written by one call on the
            # segment's append state, which builds the two tuples the append returns and sets
            # (and reads the system clock itself: None). Its checks are the validator's: the
            # C type runs LogValidator's C checks (_native/batch_validation.h, which
            # _record_scan.validate_batches runs), its Python twin validate_and_assign_offsets.
            # It declines (writing nothing, noting nothing) anything else, which the general
            # path (LogAppender: LogValidator, producer state, LogSegment) then takes.
            # A segment lends its state at its first append (the general path's), so a
            # declined request leaves the files as they were.
            segment = self._segments.last  # (a log always has its active segment)
            state = segment.append_state
            appended = None
            if state is not None and (rules := self._append_rules) is not None:
                try:
                    appended = state.append_batch(
                        records,
                        rules,
                        None if self._clock is SYSTEM_CLOCK else self._clock.milliseconds(),
                        self._local.next_offset_metadata.message_offset,
                        leader_epoch,
                        self._log_start_offset,
                        LogAppendInfo,
                        LogOffsetMetadata,
                        self._producer_table,
                    )
                except OSError as error:
                    raise self._local.storage_error("append", error) from error
            if appended is None:
                appended = self._appender.validate_and_write(records, leader_epoch)
            info, end_metadata = appended
            if end_metadata is None:  # a retried batch, written before: nothing was
                if commit:
                    self.maybe_increment_high_watermark(self._local.next_offset_metadata)
                return info
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epochs.assign(leader_epoch, info.first_offset)
            end = end_metadata.message_offset
            high_watermark = self._high_watermark
            if high_watermark.metadata.message_offset < end:
                # The end moves up past the HW, which stays: the new end is all there is to
                # set (_update_log_end_offset's common case, made without its call).
                local = self._local
                local.next_offset_metadata = end_metadata
                if end - local.recovery_point >= self._config.flush_messages:
                    self.flush(end)
                if commit:
                    # Up from below the new end to it: maybe_increment_high_watermark's
                    # common case, under the same lock, without its checks (they hold).
                    high_watermark_lock = high_watermark.lock
                    high_watermark_lock.acquire()
                    try:
                        high_watermark.metadata = end_metadata
                    finally:
                        high_watermark_lock.release()
            else:
                self._update_log_end_offset(end)
                if end - self._local.recovery_point >= self._config.flush_messages:
                    self.flush(end)
                if commit:
                    self.maybe_increment_high_watermark(self._local.next_offset_metadata)
            return info
        finally:
            lock.release()

    def append_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        leader_epoch: int = 0,
    ) -> LogAppendInfo:
        """Append the COMMIT or ABORT marker the transaction coordinator writes for
        ``producer_id`` (LogTransactions.append_end_txn_marker)."""
        return self._transactions.append_end_txn_marker(
            producer_id, producer_epoch, coordinator_epoch, committed, leader_epoch
        )

    # --- transactions: the last stable offset and the aborted transactions ------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open, or ended by a marker the
        high watermark has not passed (not below the log start offset); None when none is."""
        return self._transactions.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to (Kafka's ``lastStableOffset``)."""
        return self._transactions.last_stable_offset()

    def active_producers(self) -> list[ActiveProducer]:
        """The partition's producers, as DescribeProducers lists them."""
        with self._lock:
            return self.producer_state.active_producers()

    # --- producer state and leader epochs ----------------------------------------------------

    def remove_expired_producers(self) -> int:
        """Forget producers idle for producer.id.expiration.ms (periodic task)."""
        with self._lock:
            return self.producer_state.remove_expired_producers(self._clock.milliseconds())

    def last_data_offsets_of_producers(self) -> dict[int, int]:
        """Each live producer's last written offset: the cleaner keeps the headers of the
        batches ending there (cleaner.py)."""
        with self._lock:
            return self.producer_state.last_data_offsets()

    def end_offset_for_epoch(self, requested_epoch: int, current_epoch: int) -> EpochEntry:
        """OffsetForLeaderEpoch: the largest epoch <= ``requested_epoch`` and its end offset."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(
                requested_epoch, current_epoch, self.log_end_offset
            )

    def take_producer_snapshot(self) -> None:
        """Write the producer state at the log end (clean shutdown; ProducerSnapshots)."""
        self._producer_snapshots.write_at_log_end(self._log_start_offset)

    def _update_log_end_offset(self, offset: int) -> None:
        """Move the log end to ``offset`` in the active segment, and the HW down with it when
        it was above."""
        local = self._local
        previous_end = local.next_offset_metadata.message_offset
        local.update_log_end_offset(offset)
        # An append (the end moves up) leaves a HW below the old end where it is: nothing can
        # raise it past the new end. Anything else may lower it.
        if offset < previous_end or self._high_watermark.metadata.message_offset >= offset:
            self._high_watermark.lower_to_log_end()

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (LogRoll)."""
        return self._roll.roll()

    # --- read --------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_length: int,
        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Records from the batch holding ``start_offset`` as a file slice (design §6).

        A read at its bound (the HW, or the log end), a consumer polling for records not yet
        written, is a few attribute reads: the answer for that bound is made once and shared.
        A read_committed read (TXN_COMMITTED) stops at the last stable offset and answers the
        aborted transactions overlapping what it found.
        """
        end_metadata = self._local.next_offset_metadata
        if isolation is _LOG_END:
            max_metadata = end_metadata
        elif isolation is _TXN_COMMITTED:
            return self._transactions.read_committed(start_offset, max_length, min_one_message)
        else:
            max_metadata = self._high_watermark.metadata
        if (
            start_offset == max_metadata.message_offset
            and max_metadata.segment_base_offset != UNKNOWN_OFFSET
            and start_offset >= self._log_start_offset
        ):
            nothing_new = self._nothing_new
            if nothing_new.fetch_offset_metadata is not max_metadata:
                nothing_new = self._nothing_new = FetchDataInfo(max_metadata, None)
            return nothing_new
        if isolation is not _LOG_END and max_metadata.message_offset_only:
            max_metadata = self._high_watermark.metadata_with_position(
                self._lock, self._position_of
            )
        segment = self._local.segment_holding(
            start_offset, self._log_start_offset, end_metadata.message_offset
        )
        if start_offset == max_metadata.message_offset:
            return FetchDataInfo(max_metadata, None)
        if start_offset > max_metadata.message_offset:
            return FetchDataInfo(LogOffsetMetadata(start_offset), None)
        return self._local.read(segment, start_offset, max_length, max_metadata, min_one_message)

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """The on-disk position of ``offset`` (OFFSET_OUT_OF_RANGE outside the log)."""
        return self.read(offset, 1, FetchIsolation.LOG_END, False).fetch_offset_metadata

    def fetch_offset_by_timestamp(
        self, target_timestamp: int, isolation: FetchIsolation = FetchIsolation.LOG_END
    ) -> TimestampAndOffset | None:
        """ListOffsets' earliest (-2), latest (-1) or first offset at or after a timestamp
        (offset_by_timestamp)."""
        return fetch_offset_by_timestamp(self, target_timestamp, isolation)

    def max_timestamp_record(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP (-3): the first record holding the log's largest
        timestamp (offset_by_timestamp); None for a log without records."""
        return max_timestamp_record(self._segments)

    # --- high watermark and log start offset (design §7) ----------------------------------------

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the HW, clamped into [log start offset, LEO]; return the value set."""
        with self._lock:
            return self._high_watermark.update(high_watermark, self._log_start_offset)

    def maybe_increment_high_watermark(
        self, new_high_watermark: LogOffsetMetadata
    ) -> LogOffsetMetadata | None:
        """Move the HW forward (never back); return the old value when it moved. Does not
        wait for an append in progress (HighWatermark's lock is its own)."""
        return self._high_watermark.maybe_increment(new_high_watermark)

    def _position_of(self, offset: int) -> LogOffsetMetadata:
        """Where ``offset`` lies on disk (the HW's position, found once)."""
        if offset == self.log_end_offset:
            return self._local.next_offset_metadata
        return self.convert_to_offset_metadata(offset)

    def delete_records(self, offset: int) -> int:
        """Make every record below ``offset`` invisible (DeleteRecords); return the new low
        watermark (LogRetention.delete_records)."""
        return self._retention.delete_records(offset)

    # --- flush (design §9) ----------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments up to ``offset`` (the log end when None) and move the recovery
        point there (LocalLog.flush: blocking, never under the log's lock)."""
        self._local.flush(offset)

    def write_leader_epochs(self) -> None:
        """Write the leader-epoch-checkpoint if an assigned epoch may be missing from it
        (blocking; LogLeaderEpochs.write)."""
        self.leader_epochs.write()

    # --- retention (design §10) -----------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Apply the retention rules of the topic's cleanup.policy (LogRetention); return
        segments deleted."""
        return self._retention.delete_old_segments()

    def replace_segments(self, new_segment: LogSegment, old_segments: Sequence[LogSegment]) -> None:
        """Put the cleaner's ``new_segment`` in place of ``old_segments`` (LocalLog's
        replace_segments, under the log's lock)."""
        with self._lock:
            self._local.replace_segments(new_segment, old_segments)
            self._transactions.positions_moved()

    # --- truncation --------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every record at or above ``target_offset``; True when anything was removed
        (LogTruncation)."""
        return self._truncation.truncate_to(target_offset)

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset`` (LogTruncation)."""
        self._truncation.truncate_fully_and_start_at(new_offset)

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Write the producer snapshot at the log end and close every segment (trimming the
        indexes). Flush first for durability.

        Closing trims the active segment's files and adds its last time index entry; those
        are fsynced here, since the clean-shutdown marker written after a close claims them.
        """
        with self._lock:
            try:
                if not self._local.closed:  # not after stop_flushes: the files moved
                    self.take_producer_snapshot()
            except OSError as error:
                logger.error(
                    "[%s] producer snapshot at close failed: %s; the next start-up rebuilds "
                    "the producer state from the log",
                    self.topic_partition,
                    error,
                )
            self._local.close()

    def stop_flushes(self) -> None:
        """The partition directory was renamed for deletion: flushes stop (a scheduled one
        would look for its files under the old names and take the log directory offline);
        reads in flight go on through the open files."""
        self._local.closed = True

    def close_handlers(self) -> None:
        """Close file descriptors without trimming (the log is about to be deleted)."""
        with self._lock:
            self._local.close_handlers()
