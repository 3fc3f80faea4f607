"""LogLoader: open a partition directory after a clean or unclean stop (design §8).

Four steps, each repairing what a crash at any point can leave behind (after putting back a
pre-created segment file whose rename a power cut undid, see precreated_segment):
1. remove temporary files (``.deleted``, ``.cleaned``), collect the ``.swap`` files worth keeping;
2. complete interrupted swaps (cleaner output replacing the segments it covers);
3. load every ``.log`` as a segment, rebuilding missing or corrupt indexes and dropping orphans;
4. unless the shutdown was clean, recover segments from the recovery point on: validate every
   batch, cut the log at the first invalid byte and drop every later segment.
Wherever recovery cuts a segment (step 3's index rebuild recovers it too) every later segment
goes: what follows a torn write cannot be trusted to follow it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from odradek.clock import Clock
from odradek.config.log_config import LogConfig
from odradek.int_limits import INT64_MAX
from odradek.storage import log_file_names as names
from odradek.storage.atomic_file import fsync_directory
from odradek.storage.leader_epoch_file_cache import LeaderEpochFileCache
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_segments import LogSegments
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.precreated_segment import recover_precreated_segment
from odradek.storage.producer_state_manager import ProducerStateManager
from odradek.storage.time_index import TimeIndex

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedLogOffsets:
    """What loading found: the offsets the UnifiedLog starts with and what recovery did."""

    log_start_offset: int
    recovery_point: int
    next_offset_metadata: LogOffsetMetadata
    recovered_segments: int = 0
    recovered_bytes: int = 0
    truncated_bytes: int = 0


class LogLoader:
    """Loads the segments of one partition directory into ``segments``."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: LogSegments,
        *,
        clock: Clock,
        log_start_offset_checkpoint: int,
        recovery_point_checkpoint: int,
        had_clean_shutdown: bool,
    ) -> None:
        self.dir = directory
        self.config = config
        self.segments = segments
        self.clock = clock
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.had_clean_shutdown = had_clean_shutdown
        self._name = directory.name

    def load(self) -> LoadedLogOffsets:
        recover_precreated_segment(self.dir, self._name)
        swap_files = self.remove_temp_files_and_collect_swap_files()
        self.complete_swap_operations(swap_files)
        truncated_while_loading = self.load_segment_files()
        return self.recover_log(truncated_while_loading)

    # --- step 1 ------------------------------------------------------------------------------

    def remove_temp_files_and_collect_swap_files(self) -> list[Path]:
        """Delete ``.deleted`` and ``.cleaned`` files; keep the ``.swap`` log files of finished
        cleaner runs, delete index swaps (rebuilt later) and swaps of unfinished runs."""
        min_cleaned_offset: int | None = None
        swap_candidates: list[Path] = []
        for name in self._file_names():
            path = self.dir / name
            if name.endswith(names.DELETED_FILE_SUFFIX):
                self._delete(path, "left over from a deletion")
            elif name.endswith(names.CLEANED_FILE_SUFFIX):
                offset = names.offset_from_file_name(name)
                if min_cleaned_offset is None or offset < min_cleaned_offset:
                    min_cleaned_offset = offset
                self._delete(path, "left over from an unfinished cleaning")
            elif name.endswith(names.SWAP_FILE_SUFFIX):
                base = names.strip_suffix(path, names.SWAP_FILE_SUFFIX)
                self._delete_indexes_of(base)
                if names.is_index_file(base):
                    self._delete(path, "index swap; the index is rebuilt")
                elif names.is_log_file(base):
                    swap_candidates.append(path)
        keep = []
        for path in swap_candidates:
            if (
                min_cleaned_offset is not None
                and names.offset_from_file_name(path.name) >= min_cleaned_offset
            ):
                self._delete(path, "swap of an unfinished operation")
            else:
                keep.append(path)
        # A swapped segment's .txnindex (the cleaner's) goes in with its log, or with it.
        kept_offsets = {names.offset_from_file_name(path.name) for path in keep}
        for name in self._file_names():
            if name.endswith(names.TXN_INDEX_FILE_SUFFIX + names.SWAP_FILE_SUFFIX) and (
                names.offset_from_file_name(name) not in kept_offsets
            ):
                self._delete(self.dir / name, "transaction index swap without its log swap")
        return keep

    def _delete_indexes_of(self, base_file: Path) -> None:
        offset = names.offset_from_file_name(base_file.name)
        for index in (
            names.offset_index_file(self.dir, offset),
            names.time_index_file(self.dir, offset),
        ):
            if index.exists():
                self._delete(index, f"replaced by the swap of {base_file.name}")

    # --- step 2 ------------------------------------------------------------------------------

    def complete_swap_operations(self, swap_files: list[Path]) -> None:
        """Put each finished ``.swap`` segment in place of the segments whose offsets it covers."""
        for swap_file in swap_files:
            base_offset = names.offset_from_file_name(swap_file.name)
            swap_segment = LogSegment.open(
                self.dir,
                base_offset,
                self.config,
                self.clock,
                file_already_exists=True,
                file_suffix=names.SWAP_FILE_SUFFIX,
            )
            swap_segment.recover()
            next_offset = swap_segment.read_next_offset()
            for log_path in self._log_files():
                offset = names.offset_from_file_name(log_path.name)
                if base_offset <= offset < next_offset:
                    for path in (
                        log_path,
                        names.offset_index_file(self.dir, offset),
                        names.time_index_file(self.dir, offset),
                        names.transaction_index_file(self.dir, offset),
                    ):
                        if path.exists():
                            self._delete(path, f"replaced by swap segment {base_offset}")
            swap_segment.change_file_suffixes(names.SWAP_FILE_SUFFIX, "")
            swap_segment.close()
            logger.info("[%s] completed swap of segment %d", self._name, base_offset)

    # --- step 3 ------------------------------------------------------------------------------

    def load_segment_files(self) -> int:
        """Open every ``.log``; delete index files with no log; rebuild bad indexes. Returns
        the bytes those rebuilds cut, with the segments after a cut one."""
        file_sizes = self._file_sizes()
        log_offsets = sorted(
            names.offset_from_file_name(name)
            for name in file_sizes
            if name.endswith(names.LOG_FILE_SUFFIX)
        )
        known = set(log_offsets)
        for name in file_sizes:
            if name.endswith(
                (names.INDEX_FILE_SUFFIX, names.TIME_INDEX_FILE_SUFFIX, names.TXN_INDEX_FILE_SUFFIX)
            ):
                if names.offset_from_file_name(name) not in known:
                    self._delete(self.dir / name, "orphan index with no log file")
        cut: list[LogSegment] = []  # the segments an index rebuild cut, in order
        truncated_bytes = 0
        for base_offset in log_offsets:
            segment = LogSegment.open(
                self.dir, base_offset, self.config, self.clock, file_already_exists=True
            )
            self.segments.add(segment)
            problem = self._index_problem(base_offset, file_sizes)
            if problem:
                logger.warning(
                    "[%s] segment %d: %s; rebuilding its indexes", self._name, base_offset, problem
                )
                truncated = segment.recover()
                truncated_bytes += truncated
                if truncated > 0:
                    cut.append(segment)
        # The first cut that leaves a hole before the next segment ends the log.
        torn = next((segment for segment in cut if not self._ends_where_next_begins(segment)), None)
        if torn is not None:
            truncated_bytes += self._delete_segments_after(torn)
        return truncated_bytes

    def _index_problem(self, base_offset: int, file_sizes: dict[str, int]) -> str:
        """A cheap check of a segment's index files from the directory listing alone, so
        start-up with thousands of segments opens no index; the full sanity check (order,
        last offset) runs when an index is first used."""
        prefix = names.filename_prefix_from_offset(base_offset)
        if file_sizes.get(prefix + names.LOG_FILE_SUFFIX) == 0:
            return ""  # nothing to index: the files appear when the segment is first used
        for suffix, entry_size in (
            (names.INDEX_FILE_SUFFIX, OffsetIndex.entry_size),
            (names.TIME_INDEX_FILE_SUFFIX, TimeIndex.entry_size),
        ):
            name = prefix + suffix
            size = file_sizes.get(name)
            if size is None:
                return f"{name} is missing"
            if size % entry_size:
                return f"{name} has size {size}, not a multiple of {entry_size}"
        return ""

    def _file_names(self) -> list[str]:
        """Names of the regular files in the partition directory, sorted."""
        with os.scandir(self.dir) as entries:
            return sorted(entry.name for entry in entries if entry.is_file())

    def _file_sizes(self) -> dict[str, int]:
        """Size of every regular file in the partition directory, by name."""
        with os.scandir(self.dir) as entries:
            return {entry.name: entry.stat().st_size for entry in entries if entry.is_file()}

    def _log_files(self) -> list[Path]:
        return [
            self.dir / name for name in self._file_names() if name.endswith(names.LOG_FILE_SUFFIX)
        ]

    # --- step 4 ------------------------------------------------------------------------------

    def recover_log(self, truncated_while_loading: int) -> LoadedLogOffsets:
        """Validate the unflushed tail, create a first segment if none, settle the offsets;
        the summary counts ``truncated_while_loading`` (step 3) among the bytes truncated."""
        recovered_segments = recovered_bytes = 0
        truncated_bytes = truncated_while_loading
        if not self.had_clean_shutdown:
            recovered_segments, recovered_bytes, truncated_in_recovery = (
                self._recover_unflushed_segments()
            )
            truncated_bytes += truncated_in_recovery
        log_start_offset = self.log_start_offset_checkpoint
        if self.segments.is_empty:
            self._create_segment(log_start_offset)
        active = self.segments.active_segment
        next_offset = active.base_offset if _unwritten(active) else active.read_next_offset()
        if next_offset < log_start_offset:
            logger.warning(
                "[%s] log end offset %d is below the log start offset %d: deleting all segments",
                self._name,
                next_offset,
                log_start_offset,
            )
            for segment in self.segments.values():
                self.segments.remove(segment.base_offset)
                segment.delete_if_exists()
            self._create_segment(log_start_offset)
            next_offset = log_start_offset
        active = self.segments.active_segment
        if not _unwritten(active):
            active.resize_indexes(self.config.segment_index_bytes)
        first = self.segments.first_segment
        assert first is not None
        # After an unclean stop the recovery point stays where the checkpoint had it (Kafka's
        # rule): what recovery read or cut above it is not durable yet (a truncation of a
        # preallocated tail is a change of size no fsync covered). Moved to the log end, it
        # would be checkpointed, and a second power cut would bring back bytes recovery had
        # cut (the zeros past the last batch) in a segment the next start no longer recovers,
        # served as records. The first flush syncs those segments and moves it on.
        recovery_point = (
            next_offset
            if self.had_clean_shutdown
            else min(self.recovery_point_checkpoint, next_offset)
        )
        return LoadedLogOffsets(
            log_start_offset=max(log_start_offset, first.base_offset),
            recovery_point=recovery_point,
            next_offset_metadata=LogOffsetMetadata(next_offset, active.base_offset, active.size),
            recovered_segments=recovered_segments,
            recovered_bytes=recovered_bytes,
            truncated_bytes=truncated_bytes,
        )

    def _recover_unflushed_segments(self) -> tuple[int, int, int]:
        """Recover every segment that may hold offsets at or above the recovery point; after a
        truncation, later segments cannot be trusted to follow and are deleted."""
        recovered = scanned_bytes = truncated_bytes = 0
        unflushed = self.segments.values_between(self.recovery_point_checkpoint, INT64_MAX)
        for segment in unflushed:
            scanned_bytes += segment.size
            truncated = segment.recover()
            recovered += 1
            if truncated > 0 and self._ends_where_next_begins(segment):
                truncated_bytes += truncated  # no record was cut: the log goes on unbroken
                continue
            if truncated > 0:
                truncated_bytes += truncated + self._delete_segments_after(segment)
                break
            if self._lost_tail_before_next(segment):
                truncated_bytes += self._delete_segments_after(segment)
                break
        if recovered:
            logger.info(
                "[%s] recovered %d segments (%d bytes scanned, %d bytes truncated)",
                self._name,
                recovered,
                scanned_bytes,
                truncated_bytes,
            )
        return recovered, scanned_bytes, truncated_bytes

    def _ends_where_next_begins(self, segment: LogSegment) -> bool:
        """Whether ``segment``, cut by recovery, still ends right before the next segment's
        base offset. Then what was cut held no record of the log: the zeros of a preallocated
        file whose trim at the roll was not yet durable when the power went, or bytes past
        the last batch. The later segments follow it, so recovery keeps them (they may hold
        acknowledged records); a cut that leaves a hole drops them, as Kafka does."""
        following = self.segments.higher_segment(segment.base_offset)
        if following is None or segment.read_next_offset() != following.base_offset:
            return False
        logger.info(
            "[%s] segment %d was cut after its last batch and segment %d follows it: "
            "keeping the segments after it",
            self._name,
            segment.base_offset,
            following.base_offset,
        )
        return True

    def _lost_tail_before_next(self, segment: LogSegment) -> bool:
        """Whether ``segment`` ends short of the next one's base offset in a log that
        compaction never thins: a power cut took its unflushed tail, while pages of the next
        segment the operating system had written back survived. Everything after the hole was
        unflushed too (a flush syncs the segments in order), so recovery cuts it, keeping the
        log a prefix of what was written. A compacted segment may end short legitimately."""
        following = self.segments.higher_segment(segment.base_offset)
        if following is None or self.config.compact:
            return False
        next_offset = segment.read_next_offset()
        if next_offset >= following.base_offset:
            return False
        logger.warning(
            "[%s] segment %d ends at offset %d, below the next segment's base offset %d: "
            "its unflushed tail was lost; deleting the segments after it",
            self._name,
            segment.base_offset,
            next_offset,
            following.base_offset,
        )
        return True

    def _delete_segments_after(self, torn: LogSegment) -> int:
        """Delete every segment after ``torn``, which recovery cut; the bytes they held."""
        deleted = 0
        for later in self.segments.values():
            if later.base_offset > torn.base_offset:
                logger.warning(
                    "[%s] deleting segment %d after a truncated segment",
                    self._name,
                    later.base_offset,
                )
                deleted += later.size
                self.segments.remove(later.base_offset)
                later.delete_if_exists()
        return deleted

    def _create_segment(self, base_offset: int) -> None:
        self.segments.add(
            LogSegment.open(
                self.dir,
                base_offset,
                self.config,
                self.clock,
                init_file_size=self.config.segment_bytes,
                preallocate=self.config.preallocate,
            )
        )

    def _delete(self, path: Path, reason: str) -> None:
        logger.info("[%s] deleting %s: %s", self._name, path.name, reason)
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _unwritten(segment: LogSegment) -> bool:
    """A segment never written to: no records and no index files yet. Its indexes are created,
    with room, by its first append, so loading has nothing to read or resize in them (and
    holds no descriptor for them: a new partition costs one, its log file)."""
    return (
        segment.size == 0
        and not segment.offset_index_path.exists()
        and not segment.time_index_path.exists()
    )


def load_log(
    directory: Path,
    config: LogConfig,
    *,
    clock: Clock,
    log_start_offset: int,
    recovery_point: int,
    had_clean_shutdown: bool,
    producer_id_expiration_ms: int,
) -> tuple[LogSegments, LoadedLogOffsets, ProducerStateManager]:
    """Open the partition directory ``directory`` (creating it if needed) as design §8 says:
    its segments loaded and recovered (LogLoader.load) from the checkpointed log start offset
    and recovery point, then its producer state (load_producer_state)."""
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
    load_producer_state(
        producer_state, segments, offsets, recovery_point, had_clean_shutdown, clock
    )
    return segments, offsets, producer_state


def load_producer_state(
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


def recover_leader_epochs(
    cache: LeaderEpochFileCache, segments: LogSegments, end: int, recovery_point: int | None
) -> None:
    """At load: forget epochs starting at or past the log end ``end`` (a power cut took their
    records), and after an unclean shutdown (``recovery_point`` given) assign the epochs of
    the batches above the recovery point again: their assignment was written in the
    background and may not have lasted (it is written before a recovery-point checkpoint
    passes it, so below the checkpointed recovery point the file holds it). Raises OSError
    when the checkpoint cannot be written."""
    cache.truncate_from_end(end)
    if recovery_point is not None:
        start = min(recovery_point, end)
        for segment in segments.values_between(start, end):
            position = 0
            if segment.base_offset < start:
                position = segment.offset_index.lookup(start).position
            for _, header in segment.log.batch_headers(position):
                epoch = header.partition_leader_epoch
                if header.last_offset >= recovery_point and epoch > cache.latest_epoch:
                    cache.assign(epoch, header.base_offset)
    if cache.unflushed:
        cache.flush()
