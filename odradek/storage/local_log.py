"""LocalLog: a partition's segments on local disk (Kafka's ``LocalLog``; design §4, 6, 9, 10).

What the files need: the segment map and the log end (the next offset and where it lies), the
roll, reads from the segments (with the aborted transactions a read_committed read lists),
truncation of segments, segment deletion and renames, flushes and the recovery point they
move, and the bookkeeping of which directory changes a completed directory fsync covers.
Offsets clients see (log start offset, high watermark), producer state and leader epochs
belong to the partition's ``UnifiedLog`` above, retention decisions to its ``LogRetention``,
searches by timestamp to ``offset_by_timestamp``.

Not thread-safe by itself, as Kafka's: the UnifiedLog's lock serialises whatever changes the
segments, truncations and the log end. Flushes run without that lock (see ``flush``), and
readers read the immutable snapshots (the segment map, the end metadata) without it.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.clock import Clock
from odradek.config.log_config import LogConfig
from odradek.errors import KafkaStorageError, OffsetOutOfRangeError
from odradek.int_limits import INT64_MAX
from odradek.storage import log_file_names as names
from odradek.storage.atomic_file import fsync_directory, fsync_file_if_exists
from odradek.storage.fetch_data_info import FetchDataInfo
from odradek.storage.log_dir_failure_channel import is_descriptor_exhaustion
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_segments import LogSegments
from odradek.storage.log_stats import LOG_FLUSH_SECONDS
from odradek.storage.offset_index import OffsetPosition
from odradek.storage.precreated_segment import (
    precreate_segment_file,
    take_precreated_segment_file,
)
from odradek.storage.scheduler import Scheduler
from odradek.storage.transaction_index import AbortedTxn
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

SegmentPredicate = Callable[[LogSegment, "LogSegment | None"], bool]


class LocalLog:
    """The segments of one partition in its directory, and the log end they hold."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: LogSegments,
        recovery_point: int,
        next_offset_metadata: LogOffsetMetadata,
        scheduler: Scheduler,
        clock: Clock,
    ) -> None:
        self.dir = directory
        self.log_dir = directory.parent  # the log directory holding it (never moves)
        self.topic_partition = TopicPartition.from_dir_name(directory.name)
        self.config = config
        self.segments = segments
        self.scheduler = scheduler
        self.clock = clock
        self.recovery_point = recovery_point
        # Flushes move the recovery point under this lock, not the log's (see flush); each
        # truncation counts itself here, so a flush knows if the records it synced went.
        self._recovery_point_lock = threading.Lock()
        self._truncations = 0
        self.next_offset_metadata = next_offset_metadata
        """The log end: replaced whole (never mutated), so readers need no lock."""
        self.last_read_bound = LogOffsetMetadata(next_offset_metadata.message_offset)
        """The bound the last read that reached it stopped at: where a consumer keeping up
        reads from next. A read from its offset starts at its position (checked with one
        header read) instead of an index lookup and a scan of up to index.interval.bytes of
        headers, a read each. Offset only until a read reaches its bound."""
        self.last_flush_ms = clock.milliseconds()
        # Durability point: changes to ``dir``'s entries (the files loading created, a roll's
        # new segment, ``.deleted`` renames) are counted, and the count the last completed
        # fsync of ``dir`` covered is kept. A flush fsyncs the directory if they differ before
        # it moves the recovery point, so an acks=all append into a new segment is answered
        # only once the segment's name is durable, inside the group commit it already waits
        # for; the flush a roll schedules usually does it first.
        self.directory_changes = 1
        self._directory_synced = 0
        self._directory_sync_lock = threading.Lock()
        self.io_error_handler: Callable[[OSError], None] | None = None
        """Told of an I/O error that takes the log directory offline (set by the owner)."""
        self.closed = False
        # The next segment's log file, created ahead of the roll (precreated_segment): ready
        # once a directory fsync covers it; taken (renamed) by a roll, whose rename the next
        # directory fsync (the roll's background task, or closing) covers.
        self._precreate_lock = threading.Lock()
        self._precreated_ready = False
        self._precreated_taken = False

    # --- state -------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.next_offset_metadata.message_offset

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def open_segment(self, base_offset: int) -> LogSegment:
        """A new segment's files at ``base_offset``, sized as the config says."""
        config = self.config
        return LogSegment.open(
            self.dir,
            base_offset,
            config,
            self.clock,
            init_file_size=config.segment_bytes,
            preallocate=config.preallocate,
        )

    def update_log_end_offset(self, offset: int) -> None:
        """Move the log end to ``offset``, in the active segment."""
        active = self.segments.active_segment
        self.next_offset_metadata = LogOffsetMetadata(
            offset, active.base_offset, active.log.size_in_bytes
        )

    def note_truncation(self, recovery_point: int) -> None:
        """Count a truncation and set the recovery point it leaves: a flush that began before
        it moves the recovery point no more."""
        with self._recovery_point_lock:
            self._truncations += 1
            self.recovery_point = recovery_point

    def storage_error(self, action: str, error: OSError) -> KafkaStorageError:
        """Report an I/O error to the owner (which takes the log directory offline unless the
        disk is merely full or the process out of descriptors) and turn it into
        KAFKA_STORAGE_ERROR for the client.

        KAFKA_STORAGE_ERROR is retriable in Kafka's clients (they refresh metadata and retry),
        which is what a full disk or descriptor exhaustion calls for: the directory stays
        online, and the same request succeeds once space or descriptors are free.
        """
        transient = error.errno == errno.ENOSPC or is_descriptor_exhaustion(error)
        if self.io_error_handler is not None and not transient:
            self.io_error_handler(error)
        detail = "; the log directory stays online, retry later" if transient else ""
        return KafkaStorageError(
            f"{action} on {self.topic_partition} in {self.dir} failed: "
            f"{error.strerror or error} (errno {error.errno}){detail}"
        )

    # --- roll --------------------------------------------------------------------------------

    def roll(self) -> tuple[LogSegment, LogSegment] | None:
        """Start a new active segment at the log end offset (design §4 step 4): the segment
        that stopped taking writes and the new one, or None when the active segment is empty
        and already starts there."""
        new_offset = self.log_end_offset
        active = self.segments.active_segment
        if active.base_offset == new_offset and active.size == 0:
            return None
        if new_offset < active.base_offset:
            raise KafkaStorageError(
                f"cannot roll {self.topic_partition} at {new_offset}: below the active "
                f"segment's base offset {active.base_offset}"
            )
        self._remove_leftover_segment_files(new_offset)
        # The pre-created log file, when one is ready: renamed into place, it needs no
        # directory fsync before acknowledgements (precreated_segment).
        precreated = self._precreated_ready and not self.config.preallocate
        if precreated:
            self._precreated_ready = False
            precreated = take_precreated_segment_file(self.dir, new_offset)
        # The new file first: when it cannot be opened (no descriptor, no space to
        # preallocate) the active segment is left as it was, and the next append retries.
        segment = self.open_segment(new_offset)
        try:
            active.on_become_inactive_segment()
        except BaseException:
            segment.delete_if_exists()
            raise
        self.segments.add(segment)
        if precreated:
            self._precreated_taken = True  # synced in the background or at close
        else:
            self.directory_changes += 1  # durability point: the new segment's files
        self.update_log_end_offset(new_offset)
        logger.info("[%s] rolled new log segment at offset %d", self.topic_partition, new_offset)
        return active, segment

    def sync_rolled_segment(self, rolled: LogSegment) -> None:
        """After a roll: sync the segment that stopped taking writes, indexes included (an
        acks=all flush may have moved the recovery point past it without its indexes), then
        make the new segment's names durable if the roll created them (the next acks=all
        flush waits for that). In that order: the roll trimmed the rolled segment's
        preallocated tail, and once the new segment's name is durable the next start, with a
        recovery point at its base, no longer recovers the rolled one (its zeros would be
        served)."""
        try:
            with LOG_FLUSH_SECONDS.time():
                rolled.flush()
                self.sync_directory()
        except OSError as error:
            raise self.storage_error("flush", error) from error

    def precreate_next_segment(
        self, write_with: Callable[[], None], log_lock: threading.RLock
    ) -> None:
        """After a roll: the next pre-created segment file and whatever ``write_with`` writes
        into the directory (the producer snapshot taken at the roll), made durable by one
        directory fsync, which also covers the rename of the pre-created file the roll took.
        ``log_lock``: the owner's lock, under which rolls take the pre-created file."""
        with self._precreate_lock:
            write_with()
            precreate = not self.config.preallocate
            try:
                with log_lock:
                    self._precreated_ready = False  # until the fsync below covers the file
                    self._precreated_taken = False  # the fsync below covers the rename
                if precreate:
                    precreate_segment_file(self.dir)
                self.sync_directory(always=True)
            except OSError as error:
                if self.dir.exists():
                    raise self.storage_error("roll", error) from error
                return  # renamed for deletion meanwhile
            self._precreated_ready = precreate

    def _remove_leftover_segment_files(self, base_offset: int) -> None:
        for path in (
            names.log_file(self.dir, base_offset),
            names.offset_index_file(self.dir, base_offset),
            names.time_index_file(self.dir, base_offset),
            names.transaction_index_file(self.dir, base_offset),
        ):
            if path.exists():
                logger.warning(
                    "[%s] deleting leftover file %s before roll", self.topic_partition, path
                )
                path.unlink()

    # --- read --------------------------------------------------------------------------------

    def segment_holding(
        self, start_offset: int, log_start_offset: int, log_end_offset: int
    ) -> LogSegment:
        """The segment a read from ``start_offset`` starts in; OFFSET_OUT_OF_RANGE when the
        offset lies outside [log start, log end]."""
        segment = self.segments.floor_segment(start_offset)
        if start_offset > log_end_offset or start_offset < log_start_offset or segment is None:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} of {self.topic_partition} is out of range "
                f"[{log_start_offset}, {log_end_offset}]"
            )
        return segment

    def read(
        self,
        segment: LogSegment | None,
        start_offset: int,
        max_length: int,
        max_metadata: LogOffsetMetadata,
        min_one_message: bool,
    ) -> FetchDataInfo:
        """Records from ``segment`` on (the one holding ``start_offset``), never past
        ``max_metadata``; a read reaching that bound leaves it as ``last_read_bound``."""
        last_bound = self.last_read_bound
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
                    self.last_read_bound = max_metadata
                return info
            segment = self.segments.higher_segment(base_offset)
        return FetchDataInfo(self.next_offset_metadata, None)

    def read_with_aborted_transactions(
        self,
        segment: LogSegment | None,
        start_offset: int,
        max_length: int,
        max_metadata: LogOffsetMetadata,
        min_one_message: bool,
    ) -> FetchDataInfo:
        """``read``, with the aborted transactions overlapping the records found (Kafka's read
        with includeAbortedTxns): a read_committed fetch's, ``max_metadata`` its last stable
        offset."""
        info = self.read(segment, start_offset, max_length, max_metadata, min_one_message)
        return self.add_aborted_transactions(start_offset, info)

    def add_aborted_transactions(self, start_offset: int, info: FetchDataInfo) -> FetchDataInfo:
        """``info`` with the aborted transactions overlapping its records, from
        ``start_offset`` up to Kafka's bound (``fetch_upper_bound_offset``)."""
        if info.records is None:
            return info
        aborted = self.collect_aborted_transactions(
            start_offset, self.fetch_upper_bound_offset(info)
        )
        return FetchDataInfo(
            info.fetch_offset_metadata, info.records, info.first_entry_incomplete, tuple(aborted)
        )

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``start_offset``, ``upper_bound_offset``), from
        the .txnindex of the segment holding ``start_offset`` on, until an index's search is
        complete (Kafka's ``collectAbortedTransactions``)."""
        found: list[AbortedTxn] = []
        for candidate in self.segments.values_between(start_offset, INT64_MAX):
            result = candidate.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
        return found

    def fetch_upper_bound_offset(self, info: FetchDataInfo) -> int:
        """An offset no record of ``info`` reaches (Kafka's bound for the aborted transactions
        a fetch lists): the first offset index entry past the bytes read, else the next
        segment's base offset, else the log end."""
        fetched = info.fetch_offset_metadata
        segment = self.segments.get(fetched.segment_base_offset)
        if segment is not None and info.records is not None:
            bound = segment.offset_index.fetch_upper_bound_offset(
                OffsetPosition(fetched.message_offset, fetched.relative_position_in_segment),
                info.records.length,
            )
            if bound is not None:
                return bound.offset
        following = self.segments.higher_segment(fetched.segment_base_offset)
        return (
            following.base_offset
            if following is not None
            else self.next_offset_metadata.message_offset
        )

    # --- flush (design §9) -------------------------------------------------------------------

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
        directory_synced = self._directory_synced >= self.directory_changes
        if self.closed:
            if offset > self.recovery_point:
                # Closed with records above the recovery point: a failed directory closes
                # its logs while appends and acks=all flushes may still come. Returning would
                # claim records the disk may never have had (a power cut lost them).
                raise KafkaStorageError(
                    f"flush of {self.topic_partition} up to offset {offset} failed: the log "
                    f"is closed with records from offset {self.recovery_point} not synced"
                )
            return
        if offset <= self.recovery_point and directory_synced:
            return
        # From the segment holding the offset before the recovery point: when that point is
        # a rolled segment's end, the roll's trim of its preallocated tail (a change of size)
        # is durable only once the segment is synced again, and a recovery point past it makes
        # the next start serve the zeros as records (recovery skips the segment).
        recovery_point = self.recovery_point
        to_flush = self.segments.values_between(max(recovery_point - 1, 0), offset)
        try:
            with LOG_FLUSH_SECONDS.time():
                for segment in to_flush:
                    # Recovery rebuilds the indexes of the segment holding the recovery point,
                    # so only segments wholly below it need durable indexes: acks=all saves an
                    # msync and fsync of the active segment's index maps on every flush. The
                    # one ending at the recovery point needs only its trim (the roll's flush
                    # syncs its indexes).
                    following = self.segments.higher_segment(segment.base_offset)
                    wholly_below = (
                        following is not None and recovery_point < following.base_offset <= offset
                    )
                    segment.flush(include_indexes=wholly_below)
                self.sync_directory()
        except OSError as error:
            raise self.storage_error("flush", error) from error
        with self._recovery_point_lock:
            if self._truncations == truncations and offset > self.recovery_point:
                self.recovery_point = offset
            self.last_flush_ms = self.clock.milliseconds()

    def sync_directory(self, *, always: bool = False) -> None:
        """fsync ``dir`` unless a completed fsync covers every change to its entries so far.
        A caller finding one in progress waits for it rather than taking it as done.
        ``always``: fsync even so, for changes no acknowledgement waits for (a snapshot, the
        pre-created segment file): they are not counted, so a flush never waits for them."""
        target = self.directory_changes
        if self._directory_synced >= target and not always:
            return
        with self._directory_sync_lock:
            if self._directory_synced >= target and not always:
                return
            covered = self.directory_changes
            try:
                fsync_directory(self.dir)
            except FileNotFoundError:
                if self.dir.exists():
                    raise
                return  # renamed for deletion meanwhile: nothing in it has to last
            self._directory_synced = max(self._directory_synced, covered)

    # --- deletion ----------------------------------------------------------------------------

    def deletable_segments(
        self, predicate: SegmentPredicate, high_watermark: int
    ) -> list[LogSegment]:
        """Oldest-first run of segments matching ``predicate``, wholly below
        ``high_watermark``, stopping at the first that fails or at the empty active segment."""
        segments = self.segments.values()
        deletable = []
        for index, segment in enumerate(segments):
            next_segment = segments[index + 1] if index + 1 < len(segments) else None
            upper_bound = next_segment.base_offset if next_segment else self.log_end_offset
            empty_active = next_segment is None and segment.size == 0
            if empty_active or high_watermark < upper_bound or not predicate(segment, next_segment):
                break
            deletable.append(segment)
        return deletable

    def remove_and_delete_segments(self, segments: Sequence[LogSegment], reason: str) -> None:
        """Take ``segments`` out of the map, rename them ``.deleted`` and delete them after
        ``file.delete.delay.ms`` so in-flight reads of them can finish."""
        segments = list(segments)
        for segment in segments:
            if self.segments.get(segment.base_offset) is segment:
                self.segments.remove(segment.base_offset)
        for segment in segments:
            logger.info(
                "[%s] deleting segment %d (%d bytes): %s",
                self.topic_partition,
                segment.base_offset,
                segment.size,
                reason,
            )
            segment.rename_for_deletion()
        self.directory_changes += 1  # durability point: the ``.deleted`` renames
        self.scheduler.schedule(
            f"delete-segments-{self.topic_partition}",
            lambda: _delete_segment_files(segments),
            delay_ms=self.config.file_delete_delay_ms,
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
        old = [s for s in old_segments if self.segments.get(s.base_offset) is s]
        try:
            self.segments.add(new_segment)
            self.remove_and_delete_segments(
                old, f"replaced by cleaned segment {new_segment.base_offset}"
            )
            fsync_directory(self.dir)
            new_segment.change_file_suffixes(names.SWAP_FILE_SUFFIX, "")
            fsync_directory(self.dir)
        except OSError as error:
            raise self.storage_error("segment swap", error) from error

    # --- truncation --------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> None:
        """Remove every record at or above ``target_offset``, which the first segment starts
        at or below: the segments above it go, the one holding it is cut and becomes the
        active one, and the log end and recovery point follow."""
        doomed = [s for s in self.segments.values() if s.base_offset > target_offset]
        if doomed:
            self.remove_and_delete_segments(doomed, f"truncation to {target_offset}")
        active = self.segments.active_segment
        active.truncate_to(target_offset)
        active.resize_indexes(self.config.segment_index_bytes)
        self.update_log_end_offset(active.read_next_offset())
        self.note_truncation(min(self.recovery_point, self.log_end_offset))

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty one at ``new_offset``, the new log end."""
        self.remove_and_delete_segments(self.segments.values(), f"restart at {new_offset}")
        self._remove_leftover_segment_files(new_offset)
        self.segments.add(self.open_segment(new_offset))
        self.directory_changes += 1  # durability point: the new segment's files
        self.note_truncation(new_offset)
        self.next_offset_metadata = LogOffsetMetadata(new_offset, new_offset, 0)

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close every segment (trimming the indexes). Closing trims the active segment's files
        and adds its last time index entry; those are fsynced here, since the clean-shutdown
        marker written after a close claims them."""
        self.closed = True
        active = None if self.segments.is_empty else self.segments.active_segment
        self.segments.close()
        if active is not None:
            for path in (active.log.path, active.offset_index_path, active.time_index_path):
                fsync_file_if_exists(path)
        if self._precreated_taken:
            self.directory_changes += 1  # the rename of the pre-created file a roll took
        self.sync_directory()

    def close_handlers(self) -> None:
        """Close file descriptors without trimming (the log is about to be deleted)."""
        self.closed = True
        for segment in self.segments.values():
            segment.close_handlers()


def _delete_segment_files(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.delete_if_exists()
