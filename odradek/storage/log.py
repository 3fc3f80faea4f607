"""Log: one partition's append-only, segmented log (Kafka's ``UnifiedLog``; design §1, 4,
6, 7, 9, 10).

One writer at a time (the log lock serialises appends, rolls, truncation and retention); any
number of reader threads read without the lock from immutable snapshots (the segment map and the
offset metadata are replaced, never mutated).
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config.log_config import LogConfig
from odradek.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from odradek.record.record_batch import PRODUCER_ID_OFFSET
from odradek.storage import log_file_names as names
from odradek.storage.atomic_file import fsync_directory, fsync_file_if_exists, write_atomically
from odradek.storage.fetch_data_info import FetchDataInfo, FetchIsolation
from odradek.storage.file_records import TimestampAndOffset
from odradek.storage.leader_epoch_file_cache import EpochEntry, LeaderEpochFileCache
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.log_dir_failure_channel import is_descriptor_exhaustion
from odradek.storage.log_loader import LoadedLogOffsets, LogLoader
from odradek.storage.log_offset_metadata import UNKNOWN_OFFSET, LogOffsetMetadata
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_segments import LogSegments
from odradek.storage.log_stats import (
    LOG_FLUSH_SECONDS,
    RETENTION_DELETED_BYTES,
    RETENTION_DELETED_SEGMENTS,
    RETENTION_LOG_START_OFFSET,
    RETENTION_SIZE,
    RETENTION_TIME,
)
from odradek.storage.log_validator import append_rules, validate_and_assign_offsets
from odradek.storage.precreated_segment import (
    precreate_segment_file,
    take_precreated_segment_file,
)
from odradek.storage.producer_append_info import ProducerAppendInfo
from odradek.storage.producer_snapshot_file import snapshot_file
from odradek.storage.producer_state_manager import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateManager,
)
from odradek.storage.scheduler import Scheduler
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

_new_tuple = tuple.__new__
"""Makes a named tuple from a tuple of its fields without its Python ``__new__``: the append
path's two per call (LogOffsetMetadata, LogAppendInfo), at half the cost."""

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

_LOG_END = FetchIsolation.LOG_END

SegmentPredicate = Callable[[LogSegment, "LogSegment | None"], bool]
IoErrorHandler = Callable[["Log", OSError], None]


class Log:
    """A partition's log: append, read, high watermark, flush, retention, truncation."""

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
        self.dir = directory
        self.log_dir = directory.parent  # the log directory holding it (never moves)
        self.topic_partition = TopicPartition.from_dir_name(directory.name)
        self._config = config
        self._append_rules = append_rules(config)
        self._segments = segments
        self._scheduler = scheduler
        self._clock = clock
        self._lock = threading.RLock()
        self._log_start_offset = offsets.log_start_offset
        self._recovery_point = offsets.recovery_point
        # Flushes move the recovery point under this lock, not the log's (see flush); each
        # truncation counts itself here, so a flush knows if the records it synced went.
        self._recovery_point_lock = threading.Lock()
        self._truncations = 0
        self._next_offset_metadata = offsets.next_offset_metadata
        self._load_summary = offsets
        self._high_watermark = LogOffsetMetadata(self._log_start_offset)
        # What a read at its bound returns (see read), kept for the last bound asked.
        self._nothing_new = FetchDataInfo(self._high_watermark, None)
        # The bound the last read that reached it stopped at: where a consumer keeping up
        # reads from next. A read from its offset starts at its position (checked with one
        # header read) instead of an index lookup and a scan of up to index.interval.bytes of
        # headers, a read each.
        self._last_read_bound = self._high_watermark
        # The HW moves under its own lock, so the event loop raising it after an append does
        # not wait for the next append (or a roll) holding the log's. Whoever holds both takes
        # the log's first. A raise checks the log end under this lock, and whatever lowers the
        # log end (under the log's lock) lowers the HW under this one after moving the end:
        # the HW never ends above the log end.
        self._high_watermark_lock = threading.Lock()
        self._last_flush_ms = clock.milliseconds()
        # Durability point: changes to ``dir``'s entries (the files loading created, a roll's
        # new segment, ``.deleted`` renames) are counted, and the count the last completed
        # fsync of ``dir`` covered is kept. A flush fsyncs the directory if they differ before
        # it moves the recovery point, so an acks=all append into a new segment is answered
        # only once the segment's name is durable, inside the group commit it already waits
        # for; the flush a roll schedules usually does it first.
        self._directory_changes = 1
        self._directory_synced = 0
        self._directory_sync_lock = threading.Lock()
        self.io_error_handler: IoErrorHandler | None = None
        self._closed = False
        self.producer_state = producer_state or ProducerStateManager(directory, directory.name)
        self._producer_table = self.producer_state.table  # the append path's, held at hand
        self.leader_epoch_cache = LeaderEpochFileCache(directory, str(self.topic_partition))
        # A roll's snapshot is written by its background flush, the close's by the closer;
        # both at the log end, so they may name the same file.
        self._snapshot_write_lock = threading.Lock()
        # The next segment's log file, created ahead of the roll (precreated_segment): ready
        # once a directory fsync covers it; taken (renamed) by a roll, whose rename the next
        # directory fsync (the roll's background task, or closing) covers.
        self._precreate_lock = threading.Lock()
        self._precreated_ready = False
        self._precreated_taken = False
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
    ) -> Log:
        """Open the log in ``directory`` (creating it if needed), recovering it as design §8
        says, then its producer state (ProducerStateManager.load).

        ``high_watermark`` is the checkpointed value; None means "up to the log end".
        """
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            # Durability point: the partition directory's entry in its log directory.
            fsync_directory(directory.parent)
        segments = LogSegments()
        offsets = LogLoader(
            directory,
            config,
            segments,
            clock=clock,
            log_start_offset_checkpoint=log_start_offset,
            recovery_point_checkpoint=recovery_point,
            had_clean_shutdown=had_clean_shutdown,
        ).load()
        producer_state = ProducerStateManager(directory, directory.name, producer_id_expiration_ms)
        _load_producer_state(
            producer_state, segments, offsets, recovery_point, had_clean_shutdown, clock
        )
        log = cls(
            directory, config, segments, offsets, scheduler, clock, high_watermark, producer_state
        )
        log._recover_leader_epochs(None if had_clean_shutdown else recovery_point)
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
    ) -> Log:
        """A new, empty log in the empty ``directory``: one segment at offset 0 whose indexes
        are created by the first append, so a new partition holds one descriptor (its log
        file) and creating thousands reads nothing back."""
        segments = LogSegments()
        segments.add(
            LogSegment.open(
                directory,
                0,
                config,
                clock,
                init_file_size=config.segment_bytes,
                preallocate=config.preallocate,
            )
        )
        offsets = LoadedLogOffsets(
            log_start_offset=0, recovery_point=0, next_offset_metadata=LogOffsetMetadata(0, 0, 0)
        )
        producer_state = ProducerStateManager(directory, directory.name, producer_id_expiration_ms)
        return cls(
            directory, config, segments, offsets, scheduler, clock, producer_state=producer_state
        )

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
            self._append_rules = append_rules(config)

    @property
    def segments(self) -> LogSegments:
        return self._segments

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def last_read_bound(self) -> LogOffsetMetadata:
        """Where the last read that reached its bound stopped: a read from its offset starts
        at its position (see read)."""
        return self._last_read_bound

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.message_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def recovery_point_to_checkpoint(self) -> int:
        """The recovery point for the recovery-point checkpoint, once every leader epoch it
        passed is in the leader-epoch-checkpoint: a start after a crash recovers only above
        it, so it assigns no epoch below it again. Kafka writes the cache before that
        checkpoint too; a flush (acks=all) then waits for one fdatasync, not three more
        fsyncs when an epoch starts. Blocking: the checkpoint writer's thread. Should the
        epochs not be written, the log start offset: the next start then recovers it all."""
        recovery_point = self._recovery_point  # before the write: it covers every epoch below
        try:
            self.write_leader_epochs()
        except KafkaStorageError as error:
            logger.warning(
                "[%s] %s: recovery point %d checkpointed as the log start offset",
                self.topic_partition,
                error,
                recovery_point,
            )
            return self._log_start_offset
        return recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self._recovery_point

    @property
    def last_flush_time(self) -> int:
        return self._last_flush_ms

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
        return f"Log({self.topic_partition}, dir={self.dir})"

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
            # The common request, one batch that fits the active segment, of no producer or
            # of one going on at its next sequence (the producer table's try_next, asked by
            # the call once the batch has its offsets), is validated, given its offsets and
            # written by one call on the segment's append state, which builds the two tuples
            # the append returns and sets (and reads the system clock itself: None); it
            # declines (writing nothing, noting nothing) anything else, which the general path
            # then takes. A segment lends its state at its first append (the general path's),
            # so a declined request leaves the files as they were.
            segment = self._segments.last  # (a log always has its active segment)
            state = segment.append_state
            appended = None
            if state is not None and (rules := self._append_rules) is not None:
                try:
                    appended = state.append_batch(
                        records,
                        rules,
                        None if self._clock is SYSTEM_CLOCK else self._clock.milliseconds(),
                        self._next_offset_metadata.message_offset,
                        leader_epoch,
                        self._log_start_offset,
                        LogAppendInfo,
                        LogOffsetMetadata,
                        self._producer_table,
                    )
                except OSError as error:
                    raise self._storage_error("append", error) from error
            if appended is None:
                appended = self._validate_and_write(records, leader_epoch)
            info, end_metadata = appended
            if end_metadata is None:  # a retried batch, written before: nothing was
                if commit:
                    self.maybe_increment_high_watermark(self._next_offset_metadata)
                return info
            if leader_epoch > self.leader_epoch_cache.latest_epoch:
                self._assign_leader_epoch(leader_epoch, info.first_offset)
            end = end_metadata.message_offset
            if self._high_watermark.message_offset < end:
                # The end moves up past the HW, which stays: the new end is all there is to
                # set (_update_log_end_offset's common case, made without its call).
                self._next_offset_metadata = end_metadata
                if end - self._recovery_point >= self._config.flush_messages:
                    self.flush(end)
                if commit:
                    # Up from below the new end to it: maybe_increment_high_watermark's
                    # common case, under the same lock, without its checks (they hold).
                    high_watermark_lock = self._high_watermark_lock
                    high_watermark_lock.acquire()
                    try:
                        self._high_watermark = end_metadata
                    finally:
                        high_watermark_lock.release()
            else:
                self._update_log_end_offset(end)
                if end - self._recovery_point >= self._config.flush_messages:
                    self.flush(end)
                if commit:
                    self.maybe_increment_high_watermark(self._next_offset_metadata)
            return info
        finally:
            lock.release()

    def _validate_and_write(
        self, records: bytes | bytearray | memoryview, leader_epoch: int
    ) -> tuple[LogAppendInfo, LogOffsetMetadata | None]:
        """The general append under the log's lock: any request, every rule checked, a roll
        when due. What it wrote and the new log end; for a retried batch of an idempotent
        producer, its first append's offsets and None (nothing is written)."""
        now_ms = self._clock.milliseconds()
        config = self._config
        validated = validate_and_assign_offsets(
            records,
            next_offset=self._next_offset_metadata.message_offset,
            config=config,
            now_ms=now_ms,
            partition_leader_epoch=leader_epoch,
            topic_partition=self.topic_partition,
        )
        producer_append: ProducerAppendInfo | None = None
        noted = False
        # The sign bit of the first batch's producer id: -1 (no producer) has it set, so a
        # plain one-batch append pays one byte read for idempotence. The common idempotent
        # request, one batch going on where its producer left off, is one call to the
        # producer table (and one more once written); the others get every rule checked.
        if validated.batch_count > 1 or not validated.records[PRODUCER_ID_OFFSET] & 0x80:
            noted = self._producer_table.try_next(validated.records)
            if not noted:
                producer_append = self.producer_state.analyze(validated.records)
                if producer_append.duplicate is not None:
                    return self._duplicate_append_info(producer_append, config), None
        size_in_bytes, last_offset = validated.size_in_bytes, validated.last_offset
        if size_in_bytes > config.segment_bytes:
            raise RecordListTooLargeError(
                f"append of {size_in_bytes} bytes to {self.topic_partition} does not "
                f"fit a segment of segment.bytes={config.segment_bytes}"
            )
        try:
            # The segment's roll check and write in one call on its append state (what
            # LogSegment.try_append does, without that call around it).
            segment = self._segments.last  # (a log always has its active segment)
            state = segment.append_state or segment.lend_append_state()
            if state.try_append(
                validated.records,
                last_offset,
                validated.max_timestamp,
                now_ms,
                config.segment_bytes,
                config.segment_ms,
            ):
                segment_size = state.size  # (the segment's file size, which it owns now)
            else:
                segment = self.roll()
                segment.append(last_offset, validated.records)
                segment_size = segment.log.size_in_bytes
        except OSError as error:
            raise self._storage_error("append", error) from error
        if noted:
            self._producer_table.commit_next()
        elif producer_append is not None:
            self.producer_state.update(producer_append)
        info = _new_tuple(
            LogAppendInfo,
            (
                validated.first_offset,
                last_offset,
                validated.max_timestamp,
                validated.offset_of_max_timestamp,
                now_ms if config.log_append_time else -1,  # log_append_time_ms
                self._log_start_offset,
                validated.record_count,
                validated.batch_count,
                size_in_bytes,  # valid_bytes
            ),
        )
        return info, _new_tuple(
            LogOffsetMetadata, (last_offset + 1, segment.base_offset, segment_size)
        )

    def _duplicate_append_info(
        self, producer_append: ProducerAppendInfo, config: LogConfig
    ) -> LogAppendInfo:
        """A retry of a batch already written: its original offsets; nothing is written."""
        duplicate = producer_append.duplicate
        assert duplicate is not None
        logger.debug("[%s] retried batch %s acknowledged again", self.topic_partition, duplicate)
        return LogAppendInfo(
            duplicate.first_offset,
            duplicate.last_offset,
            duplicate.timestamp,
            duplicate.last_offset,
            duplicate.timestamp if config.log_append_time else -1,
            self._log_start_offset,
            0,
            0,
            0,
        )

    def _assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """A new epoch starts: the checkpoint is written in the background (two fsyncs have
        no place on the append path; one lost to a crash is recorded again at the next append)."""
        if self.leader_epoch_cache.assign(epoch, start_offset):
            self._scheduler.schedule(
                f"leader-epoch-checkpoint-{self.topic_partition}", self._flush_leader_epochs
            )

    def _recover_leader_epochs(self, recovery_point: int | None) -> None:
        """At load: forget epochs starting at or past the log end (a power cut took their
        records), and after an unclean shutdown (``recovery_point`` given) assign the epochs
        of the batches above the recovery point again: their assignment was written in the
        background and may not have lasted (it is written before a recovery-point checkpoint
        passes it, so below the checkpointed recovery point the file holds it)."""
        cache = self.leader_epoch_cache
        end = self.log_end_offset
        try:
            cache.truncate_from_end(end)
            if recovery_point is not None:
                start = min(recovery_point, end)
                for segment in self._segments.values_between(start, end):
                    position = 0
                    if segment.base_offset < start:
                        position = segment.offset_index.lookup(start).position
                    for _, header in segment.log.batch_headers(position):
                        epoch = header.partition_leader_epoch
                        if header.last_offset >= recovery_point and epoch > cache.latest_epoch:
                            cache.assign(epoch, header.base_offset)
            if cache.unflushed:
                cache.flush()
        except OSError as error:
            raise self._storage_error("leader epoch recovery", error) from error

    def _flush_leader_epochs(self) -> None:
        if self._closed:
            return
        try:
            self.leader_epoch_cache.flush()
        except OSError as error:
            logger.warning(
                "[%s] leader-epoch-checkpoint not written: %s", self.topic_partition, error
            )

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
        """Write the producer state at the log end (clean shutdown), unless a snapshot there
        exists already (nothing was appended since the last one) or the log is empty."""
        with self._lock:
            offset = self.log_end_offset
            if offset == self._log_start_offset and not self.producer_state.table:
                return  # an empty log: nothing to replay, and shutdown stays one write lighter
            data = self.producer_state.snapshot_bytes()
        self._write_snapshot(offset, data)

    def _write_snapshot(self, offset: int, data: bytes, *, sync_directory: bool = True) -> None:
        with self._snapshot_write_lock:
            path = snapshot_file(self.dir, offset)
            if not path.exists():
                write_atomically(path, data, sync_directory=sync_directory)

    def _reload_producer_state(self) -> None:
        """After a truncation: the snapshots above the new log end go, and the state is
        rebuilt from the newest one left and the batches after it."""
        end = self.log_end_offset
        self.producer_state.delete_snapshots(above=end)
        # Durability point: a deleted snapshot brought back by a power cut would describe
        # records the truncation removed, once the recovery point passes it again.
        self._directory_changes += 1
        self.producer_state.load(
            self._segments.values(), self._log_start_offset, end, end, self._clock.milliseconds()
        )
        self.leader_epoch_cache.truncate_from_end(end)

    def _update_log_end_offset(self, offset: int, active: LogSegment | None = None) -> None:
        """Move the log end to ``offset``, in ``active`` (the active segment, when the caller
        has it at hand)."""
        if active is None:
            active = self._segments.active_segment
        previous_end = self._next_offset_metadata.message_offset
        self._next_offset_metadata = LogOffsetMetadata(
            offset, active.base_offset, active.log.size_in_bytes
        )
        # An append (the end moves up) leaves a HW below the old end where it is: nothing can
        # raise it past the new end. Anything else may lower it.
        if offset < previous_end or self._high_watermark.message_offset >= offset:
            with self._high_watermark_lock:
                if self._high_watermark.message_offset >= offset:
                    self._high_watermark = self._next_offset_metadata

    def _note_truncation(self, recovery_point: int) -> None:
        """Count a truncation and set the recovery point it leaves: a flush that began before
        it moves the recovery point no more."""
        with self._recovery_point_lock:
            self._truncations += 1
            self._recovery_point = recovery_point

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (design §4 step 4)."""
        with self._lock:
            new_offset = self.log_end_offset
            active = self._segments.active_segment
            if active.base_offset == new_offset and active.size == 0:
                return active
            if new_offset < active.base_offset:
                raise KafkaStorageError(
                    f"cannot roll {self.topic_partition} at {new_offset}: below the active "
                    f"segment's base offset {active.base_offset}"
                )
            self._remove_leftover_segment_files(new_offset)
            config = self._config
            # The pre-created log file, when one is ready: renamed into place, it needs no
            # directory fsync before acknowledgements (precreated_segment).
            precreated = self._precreated_ready and not config.preallocate
            if precreated:
                self._precreated_ready = False
                precreated = take_precreated_segment_file(self.dir, new_offset)
            # The new file first: when it cannot be opened (no descriptor, no space to
            # preallocate) the active segment is left as it was, and the next append retries.
            segment = LogSegment.open(
                self.dir,
                new_offset,
                config,
                self._clock,
                init_file_size=config.segment_bytes,
                preallocate=config.preallocate,
            )
            try:
                active.on_become_inactive_segment()
            except BaseException:
                segment.delete_if_exists()
                raise
            self._segments.add(segment)
            if precreated:
                self._precreated_taken = True  # synced in the background or at close
            else:
                self._directory_changes += 1  # durability point: the new segment's files
            self._update_log_end_offset(new_offset)
            logger.info(
                "[%s] rolled new log segment at offset %d", self.topic_partition, new_offset
            )
            snapshot = self.producer_state.snapshot_bytes()
            self._scheduler.schedule(
                f"flush-{self.topic_partition}",
                lambda: self._flush_rolled_segment(active, segment, snapshot),
            )
            return segment

    def _flush_rolled_segment(self, rolled: LogSegment, new: LogSegment, snapshot: bytes) -> None:
        """After a roll: sync the segment that stopped taking writes, indexes included (an
        acks=all flush may have moved the recovery point past it without its indexes), then
        make the new segment's names durable if the roll created them (the next acks=all
        flush waits for that). In that order: the roll trimmed the rolled segment's
        preallocated tail, and once the new segment's name is durable the next start, with a
        recovery point at its base, no longer recovers the rolled one (its zeros would be
        served). Then the producer snapshot taken at the roll and the next pre-created
        segment file, made durable by one directory fsync, which also covers the rename of
        the pre-created file the roll took."""
        if self._closed:
            return
        try:
            with LOG_FLUSH_SECONDS.time():
                rolled.flush()
                self._sync_directory()
        except OSError as error:
            raise self._storage_error("flush", error) from error
        self._write_roll_snapshot(new, snapshot)
        self.flush(new.base_offset)

    def _write_roll_snapshot(self, new: LogSegment, snapshot: bytes) -> None:
        """The producer snapshot taken at a roll and the next pre-created segment file, made
        durable by one directory fsync. A snapshot that cannot be written is logged and
        skipped: start-up rebuilds from an older snapshot or the log. Nor is it written once
        a truncation removed the segment the roll made: a later segment at the same offset
        may follow other records, and the state taken at the roll would describe the wrong
        producers there (it hid an idempotent producer from the next start-up)."""
        offset = new.base_offset
        if self._closed or self._segments.get(offset) is not new:
            return
        with self._precreate_lock:
            try:
                self._write_snapshot(offset, snapshot, sync_directory=False)
            except OSError as error:
                logger.warning(
                    "[%s] producer snapshot at offset %d not written: %s",
                    self.topic_partition,
                    offset,
                    error,
                )
            precreate = not self._config.preallocate
            try:
                with self._lock:
                    self._precreated_ready = False  # until the fsync below covers the file
                    self._precreated_taken = False  # the fsync below covers the rename
                if precreate:
                    precreate_segment_file(self.dir)
                self._sync_directory(always=True)
            except OSError as error:
                if self.dir.exists():
                    raise self._storage_error("roll", error) from error
                return  # renamed for deletion meanwhile
            self._precreated_ready = precreate

    def _remove_leftover_segment_files(self, base_offset: int) -> None:
        for path in (
            names.log_file(self.dir, base_offset),
            names.offset_index_file(self.dir, base_offset),
            names.time_index_file(self.dir, base_offset),
        ):
            if path.exists():
                logger.warning(
                    "[%s] deleting leftover file %s before roll", self.topic_partition, path
                )
                path.unlink()

    def _storage_error(self, action: str, error: OSError) -> KafkaStorageError:
        """Report an I/O error to the owner (which takes the log directory offline unless the
        disk is merely full or the process out of descriptors) and turn it into
        KAFKA_STORAGE_ERROR for the client.

        KAFKA_STORAGE_ERROR is retriable in Kafka's clients (they refresh metadata and retry),
        which is what a full disk or descriptor exhaustion calls for: the directory stays
        online, and the same request succeeds once space or descriptors are free.
        """
        transient = error.errno == errno.ENOSPC or is_descriptor_exhaustion(error)
        if self.io_error_handler is not None and not transient:
            self.io_error_handler(self, error)
        detail = "; the log directory stays online, retry later" if transient else ""
        return KafkaStorageError(
            f"{action} on {self.topic_partition} in {self.dir} failed: "
            f"{error.strerror or error} (errno {error.errno}){detail}"
        )

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
        """
        end_metadata = self._next_offset_metadata
        if isolation is _LOG_END:
            max_metadata = end_metadata
        else:
            max_metadata = self._high_watermark
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
            max_metadata = self._fetch_high_watermark_metadata()
        segment = self._segments.floor_segment(start_offset)
        log_start_offset = self._log_start_offset
        if (
            start_offset > end_metadata.message_offset
            or start_offset < log_start_offset
            or segment is None
        ):
            raise OffsetOutOfRangeError(
                f"offset {start_offset} of {self.topic_partition} is out of range "
                f"[{log_start_offset}, {end_metadata.message_offset}]"
            )
        if start_offset == max_metadata.message_offset:
            return FetchDataInfo(max_metadata, None)
        if start_offset > max_metadata.message_offset:
            return FetchDataInfo(LogOffsetMetadata(start_offset), None)
        last_bound = self._last_read_bound
        while segment is not None:
            base_offset = segment.base_offset
            if base_offset == max_metadata.segment_base_offset:
                max_position = max_metadata.relative_position_in_segment
            else:
                max_position = segment.size
            start_position = None
            if (
                last_bound.message_offset == start_offset
                and last_bound.segment_base_offset == base_offset
            ):
                start_position = last_bound.relative_position_in_segment
            info = segment.read(
                start_offset, max_length, max_position, min_one_message, start_position
            )
            if info is not None:
                records = info.records
                if (
                    records is not None
                    and base_offset == max_metadata.segment_base_offset
                    and records.position + records.length == max_position
                ):
                    self._last_read_bound = max_metadata
                return info
            segment = self._segments.higher_segment(base_offset)
        return FetchDataInfo(self._next_offset_metadata, None)

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """The on-disk position of ``offset`` (OFFSET_OUT_OF_RANGE outside the log)."""
        return self.read(offset, 1, FetchIsolation.LOG_END, False).fetch_offset_metadata

    def fetch_offset_by_timestamp(
        self, target_timestamp: int, isolation: FetchIsolation = FetchIsolation.LOG_END
    ) -> TimestampAndOffset | None:
        """ListOffsets: earliest (-2), latest (-1: LEO, or HW for consumers), or the first record
        at or after the log start with timestamp >= the target, searched for (as Kafka's
        UnifiedLog.searchOffsetInLocalLog does) in the first segment whose largest timestamp
        reaches the target alone: None when no record is that new, and None when that
        segment's records that new all lie below the log start (after DeleteRecords), though
        a later segment may hold one."""
        if target_timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(-1, self._log_start_offset)
        if target_timestamp == LATEST_TIMESTAMP:
            latest = (
                self.high_watermark
                if isolation is FetchIsolation.HIGH_WATERMARK
                else self.log_end_offset
            )
            return TimestampAndOffset(-1, latest)
        for segment in self._segments.values():
            if segment.largest_timestamp >= target_timestamp:
                return segment.find_offset_by_timestamp(target_timestamp, self._log_start_offset)
        return None

    def max_timestamp_record(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP (-3): the first record holding the log's largest timestamp,
        by its own offset (as Kafka answers since 3.8), not the last offset of its batch that
        the time index keeps; None for a log without records."""
        best: tuple[LogSegment, TimestampAndOffset] | None = None
        for segment in self._segments.values():
            found = segment.max_timestamp_and_offset_so_far
            if found.timestamp >= 0 and (best is None or found.timestamp > best[1].timestamp):
                best = (segment, found)
        if best is None:
            return None
        segment, found = best
        return segment.find_offset_by_timestamp(found.timestamp, segment.base_offset) or found

    # --- high watermark and log start offset (design §7) ----------------------------------------

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the HW, clamped into [log start offset, LEO]; return the value set."""
        with self._lock, self._high_watermark_lock:
            end = self._next_offset_metadata
            if high_watermark >= end.message_offset:
                metadata = end
            else:
                metadata = LogOffsetMetadata(max(high_watermark, self._log_start_offset))
            self._high_watermark = metadata
            return metadata.message_offset

    def maybe_increment_high_watermark(
        self, new_high_watermark: LogOffsetMetadata
    ) -> LogOffsetMetadata | None:
        """Move the HW forward (never back); return the old value when it moved. Does not
        wait for an append in progress (see ``_high_watermark_lock``). Called after every
        append, so the raise comes first; what it checks holds for every value set: the HW
        never above the log end."""
        offset = new_high_watermark.message_offset
        with self._high_watermark_lock:
            old = self._high_watermark
            if offset > old.message_offset:
                if offset > self._next_offset_metadata.message_offset:
                    raise ValueError(
                        f"high watermark {offset} of {self.topic_partition} would be above "
                        f"the log end offset {self._next_offset_metadata.message_offset}"
                    )
                self._high_watermark = new_high_watermark
                return old
            # At or below the HW, so at or below the log end: it may still resolve or move
            # the HW's position.
            if offset == old.message_offset and (
                old.message_offset_only or old.on_older_segment(new_high_watermark)
            ):
                self._high_watermark = new_high_watermark
                return old
            return None

    def _fetch_high_watermark_metadata(self) -> LogOffsetMetadata:
        """The HW with its on-disk position, resolving it once if only the offset is known."""
        high_watermark = self._high_watermark
        if not high_watermark.message_offset_only:
            return high_watermark
        with self._lock:
            high_watermark = self._high_watermark
            if high_watermark.message_offset_only:
                offset = high_watermark.message_offset
                if offset == self.log_end_offset:
                    resolved = self._next_offset_metadata
                else:
                    resolved = self.convert_to_offset_metadata(offset)
                with self._high_watermark_lock:
                    if self._high_watermark is high_watermark:  # (not raised meanwhile)
                        self._high_watermark = resolved
                high_watermark = resolved
            return high_watermark

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str) -> bool:
        """Raise the log start offset (delete-records, retention); never lowers it."""
        with self._lock:
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot raise the log start offset of {self.topic_partition} to "
                    f"{new_log_start_offset}: above the high watermark {self.high_watermark}"
                )
            if new_log_start_offset <= self._log_start_offset:
                return False
            logger.info(
                "[%s] log start offset %d -> %d (%s)",
                self.topic_partition,
                self._log_start_offset,
                new_log_start_offset,
                reason,
            )
            self._log_start_offset = new_log_start_offset
            self._leader_epochs_start_at(new_log_start_offset)
            return True

    def delete_records(self, offset: int) -> int:
        """Make every record below ``offset`` invisible (DeleteRecords); return the new low
        watermark. Retention removes the segments wholly below it."""
        if offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete records of {self.topic_partition} below {offset}"
            )
        self.maybe_increment_log_start_offset(offset, "delete records")
        self._delete_log_start_offset_breached_segments()
        return self._log_start_offset

    # --- flush (design §9) ----------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``offset``), then move the
        recovery point to ``offset``, unless a truncation came meanwhile (the records synced
        may be gone, and others written in their place). Blocking: call it from a thread,
        never an event loop.

        It never takes the log's lock. Appends hold that lock back to back, and a flush
        waiting for it (after every roll, on every acks=all request) made each of them wake
        it, for milliseconds. What it reads comes from atomic snapshots: the log end, and
        the segment map.
        """
        truncations = self._truncations  # before the log end: a truncation moves both
        end = self.log_end_offset
        offset = end if offset is None else min(offset, end)
        directory_synced = self._directory_synced >= self._directory_changes
        if self._closed:
            if offset > self._recovery_point:
                # Closed with records above the recovery point: a failed directory closes
                # its logs while appends and acks=all flushes may still come. Returning would
                # claim records the disk may never have had (a power cut lost them).
                raise KafkaStorageError(
                    f"flush of {self.topic_partition} up to offset {offset} failed: the log "
                    f"is closed with records from offset {self._recovery_point} not synced"
                )
            return
        if offset <= self._recovery_point and directory_synced:
            return
        # From the segment holding the offset before the recovery point: when that point is
        # a rolled segment's end, the roll's trim of its preallocated tail (a change of size)
        # is durable only once the segment is synced again, and a recovery point past it makes
        # the next start serve the zeros as records (recovery skips the segment).
        recovery_point = self._recovery_point
        to_flush = self._segments.values_between(max(recovery_point - 1, 0), offset)
        try:
            with LOG_FLUSH_SECONDS.time():
                for segment in to_flush:
                    # Recovery rebuilds the indexes of the segment holding the recovery point,
                    # so only segments wholly below it need durable indexes: acks=all saves an
                    # msync and fsync of the active segment's index maps on every flush. The
                    # one ending at the recovery point needs only its trim (the roll's flush
                    # syncs its indexes).
                    following = self._segments.higher_segment(segment.base_offset)
                    wholly_below = (
                        following is not None and recovery_point < following.base_offset <= offset
                    )
                    segment.flush(include_indexes=wholly_below)
                self._sync_directory()
        except OSError as error:
            raise self._storage_error("flush", error) from error
        with self._recovery_point_lock:
            if self._truncations == truncations and offset > self._recovery_point:
                self._recovery_point = offset
            self._last_flush_ms = self._clock.milliseconds()

    def write_leader_epochs(self) -> None:
        """Write the leader-epoch-checkpoint if an assigned epoch may be missing from it
        (blocking). Moot once the partition directory was renamed for deletion, like the
        directory fsync. Raises KafkaStorageError when it cannot be written."""
        if not self.leader_epoch_cache.unflushed:
            return
        try:
            self.leader_epoch_cache.flush()
        except FileNotFoundError as error:
            if self.dir.exists():
                raise self._storage_error("leader-epoch-checkpoint write", error) from error
        except OSError as error:
            raise self._storage_error("leader-epoch-checkpoint write", error) from error

    def _sync_directory(self, *, always: bool = False) -> None:
        """fsync ``dir`` unless a completed fsync covers every change to its entries so far.
        A caller finding one in progress waits for it rather than taking it as done.
        ``always``: fsync even so, for changes no acknowledgement waits for (a snapshot, the
        pre-created segment file): they are not counted, so a flush never waits for them."""
        target = self._directory_changes
        if self._directory_synced >= target and not always:
            return
        with self._directory_sync_lock:
            if self._directory_synced >= target and not always:
                return
            covered = self._directory_changes
            try:
                fsync_directory(self.dir)
            except FileNotFoundError:
                if self.dir.exists():
                    raise
                return  # renamed for deletion meanwhile: nothing in it has to last
            self._directory_synced = max(self._directory_synced, covered)

    # --- retention (design §10) -----------------------------------------------------------------

    def delete_old_segments(self) -> int:
        """Apply the retention rules of the topic's cleanup.policy; return segments deleted."""
        if self._config.delete:
            return (
                self._delete_retention_ms_breached_segments()
                + self._delete_retention_size_breached_segments()
                + self._delete_log_start_offset_breached_segments()
            )
        return self._delete_log_start_offset_breached_segments()

    def _delete_retention_ms_breached_segments(self) -> int:
        retention_ms = self._config.retention_ms
        if retention_ms < 0:
            return 0
        now_ms = self._clock.milliseconds()
        return self._delete_old_segments_matching(
            lambda segment, _next: now_ms - segment.largest_timestamp > retention_ms,
            RETENTION_TIME,
            f"retention time {retention_ms} ms breached",
        )

    def _delete_retention_size_breached_segments(self) -> int:
        retention_bytes = self._config.retention_bytes
        size = self.size_in_bytes
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        excess = size - retention_bytes

        def over_size(segment: LogSegment, _next: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False

        return self._delete_old_segments_matching(
            over_size, RETENTION_SIZE, f"retention size {retention_bytes} bytes breached"
        )

    def _delete_log_start_offset_breached_segments(self) -> int:
        log_start_offset = self._log_start_offset
        return self._delete_old_segments_matching(
            lambda _segment, next_segment: (
                next_segment is not None and next_segment.base_offset <= log_start_offset
            ),
            RETENTION_LOG_START_OFFSET,
            f"below the log start offset {log_start_offset}",
        )

    def _delete_old_segments_matching(
        self, predicate: SegmentPredicate, rule: str, reason: str
    ) -> int:
        """Delete the segments retention ``rule`` (see log_stats) allows; ``reason`` is logged."""
        with self._lock:
            deletable = self._deletable_segments(predicate)
            if not deletable:
                return 0
            if len(deletable) == self._segments.number_of_segments:
                self.roll()
            self._remove_and_delete_segments(deletable, reason)
            RETENTION_DELETED_SEGMENTS.labels(rule).inc(len(deletable))
            RETENTION_DELETED_BYTES.labels(rule).inc(sum(s.size for s in deletable))
            first = self._segments.first_segment
            if first is not None and first.base_offset > self._log_start_offset:
                self._log_start_offset = first.base_offset
                if self._high_watermark.message_offset < first.base_offset:
                    self.update_high_watermark(first.base_offset)
                self._leader_epochs_start_at(first.base_offset)
            if first is not None:
                self.producer_state.delete_snapshots(below=first.base_offset)
            return len(deletable)

    def _leader_epochs_start_at(self, log_start_offset: int) -> None:
        try:
            self.leader_epoch_cache.truncate_from_start(log_start_offset)
        except OSError as error:
            raise self._storage_error("leader epoch checkpoint", error) from error

    def _deletable_segments(self, predicate: SegmentPredicate) -> list[LogSegment]:
        """Oldest-first run of segments matching ``predicate``, wholly below the HW, stopping
        at the first that fails or at the empty active segment."""
        segments = self._segments.values()
        high_watermark = self.high_watermark
        deletable = []
        for index, segment in enumerate(segments):
            next_segment = segments[index + 1] if index + 1 < len(segments) else None
            upper_bound = next_segment.base_offset if next_segment else self.log_end_offset
            empty_active = next_segment is None and segment.size == 0
            if empty_active or high_watermark < upper_bound or not predicate(segment, next_segment):
                break
            deletable.append(segment)
        return deletable

    def _remove_and_delete_segments(self, segments: list[LogSegment], reason: str) -> None:
        """Take ``segments`` out of the map, rename them ``.deleted`` and delete them after
        ``file.delete.delay.ms`` so in-flight reads of them can finish."""
        for segment in segments:
            if self._segments.get(segment.base_offset) is segment:
                self._segments.remove(segment.base_offset)
        for segment in segments:
            logger.info(
                "[%s] deleting segment %d (%d bytes): %s",
                self.topic_partition,
                segment.base_offset,
                segment.size,
                reason,
            )
            segment.rename_for_deletion()
        self._directory_changes += 1  # durability point: the ``.deleted`` renames
        self._scheduler.schedule(
            f"delete-segments-{self.topic_partition}",
            lambda: _delete_segment_files(segments),
            delay_ms=self._config.file_delete_delay_ms,
        )

    def replace_segments(self, new_segment: LogSegment, old_segments: Sequence[LogSegment]) -> None:
        """Put the cleaner's ``new_segment`` (its files end in ``.swap``) in place of
        ``old_segments``, the segments it was made from (Kafka's ``LocalLog.replaceSegments``).

        The steps follow design §11 so that LogLoader can finish the swap after a crash at any
        point: the new segment enters the map first (replacing the old one with its base offset,
        so readers never find a hole), the old segments leave it and their files go ``.deleted``
        for a delayed delete, and only once that rename is durable do the new files drop their
        ``.swap`` suffix. Old segments no longer in the map (deleted meanwhile) are left alone.

        That last rename is durable before this returns: the loader deletes a ``.swap`` file at
        or above a ``.cleaned`` one, so it must not outlive the next run's first ``.cleaned``.
        """
        with self._lock:
            old = [s for s in old_segments if self._segments.get(s.base_offset) is s]
            try:
                self._segments.add(new_segment)
                self._remove_and_delete_segments(
                    old, f"replaced by cleaned segment {new_segment.base_offset}"
                )
                fsync_directory(self.dir)
                new_segment.change_file_suffixes(names.SWAP_FILE_SUFFIX, "")
                fsync_directory(self.dir)
            except OSError as error:
                raise self._storage_error("segment swap", error) from error

    # --- truncation --------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every record at or above ``target_offset``; True when anything was removed."""
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.topic_partition} to {target_offset}")
        with self._lock:
            if target_offset >= self.log_end_offset:
                return False
            first = self._segments.first_segment
            if first is None or first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [s for s in self._segments.values() if s.base_offset > target_offset]
            if doomed:
                self._remove_and_delete_segments(doomed, f"truncation to {target_offset}")
            active = self._segments.active_segment
            active.truncate_to(target_offset)
            active.resize_indexes(self._config.segment_index_bytes)
            self._update_log_end_offset(active.read_next_offset())
            self._note_truncation(min(self._recovery_point, self.log_end_offset))
            if self.log_end_offset < self._log_start_offset:
                # The cut went through a batch straddling the log start offset: nothing visible
                # is left, and the log start offset is never lowered, so restart the log there.
                self.truncate_fully_and_start_at(self._log_start_offset)
            else:
                self._reload_producer_state()
            logger.info(
                "[%s] truncated to offset %d, log end offset now %d",
                self.topic_partition,
                target_offset,
                self.log_end_offset,
            )
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        with self._lock:
            self._remove_and_delete_segments(self._segments.values(), f"restart at {new_offset}")
            self._remove_leftover_segment_files(new_offset)
            segment = LogSegment.open(
                self.dir,
                new_offset,
                self._config,
                self._clock,
                init_file_size=self._config.segment_bytes,
                preallocate=self._config.preallocate,
            )
            self._segments.add(segment)
            self._directory_changes += 1  # durability point: the new segment's files
            self._log_start_offset = new_offset
            self._note_truncation(new_offset)
            self._next_offset_metadata = LogOffsetMetadata(new_offset, new_offset, 0)
            with self._high_watermark_lock:
                self._high_watermark = self._next_offset_metadata
            self.producer_state.clear()
            self.producer_state.delete_snapshots(above=-1)
            self.leader_epoch_cache.clear()

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Write the producer snapshot at the log end and close every segment (trimming the
        indexes). Flush first for durability.

        Closing trims the active segment's files and adds its last time index entry; those
        are fsynced here, since the clean-shutdown marker written after a close claims them.
        """
        with self._lock:
            try:
                if not self._closed:  # not after stop_flushes: the files moved
                    self.take_producer_snapshot()
            except OSError as error:
                logger.error(
                    "[%s] producer snapshot at close failed: %s; the next start-up rebuilds "
                    "the producer state from the log",
                    self.topic_partition,
                    error,
                )
            self._closed = True
            active = None if self._segments.is_empty else self._segments.active_segment
            self._segments.close()
            if active is not None:
                for path in (
                    active.log.path,
                    active.offset_index_path,
                    active.time_index_path,
                ):
                    fsync_file_if_exists(path)
            if self._precreated_taken:
                self._directory_changes += 1  # the rename of the pre-created file a roll took
            self._sync_directory()

    def stop_flushes(self) -> None:
        """The partition directory was renamed for deletion: flushes stop (a scheduled one
        would look for its files under the old names and take the log directory offline);
        reads in flight go on through the open files."""
        self._closed = True

    def close_handlers(self) -> None:
        """Close file descriptors without trimming (the log is about to be deleted)."""
        with self._lock:
            self._closed = True
            for segment in self._segments.values():
                segment.close_handlers()


def _delete_segment_files(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.delete_if_exists()


def _load_producer_state(
    producer_state: ProducerStateManager,
    segments: LogSegments,
    offsets: LoadedLogOffsets,
    recovery_point: int,
    had_clean_shutdown: bool,
    clock: Clock,
) -> None:
    """Rebuild the producer map after the segments are loaded (Kafka's
    ``rebuildProducerState``): from the newest snapshot at or below the recovery point (the
    log end after a clean shutdown), then the batches after it. After an unclean shutdown the
    snapshots above the recovery point go first: they may describe records that did not
    survive; snapshots below the first segment go with the segments retention removed."""
    end = offsets.next_offset_metadata.message_offset
    max_snapshot = end if had_clean_shutdown else min(recovery_point, end)
    first = segments.first_segment
    producer_state.delete_snapshots(
        below=first.base_offset if first is not None else 0,
        above=end if had_clean_shutdown else max_snapshot,
    )
    producer_state.load(
        segments.values(), offsets.log_start_offset, end, max_snapshot, clock.milliseconds()
    )
