"""LogCleanerManager: which compacted log to clean next, which logs the cleaner holds, and where
each log's cleaning stopped (Kafka's ``LogCleanerManager``).

A log is in at most one of these hands at a time: a cleaner thread cleaning it or applying
its retention (state ``in progress``), or callers that paused it (``paused``, counted) to
truncate it, delete it or apply its retention themselves. Pausing a log that is being cleaned
first aborts the run and waits for the cleaner thread to let go of it.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from odradek.cleaner.cleanable_offsets import cleanable_offsets, max_compaction_delay
from odradek.cleaner.cleaner_offset_checkpoints import CleanerOffsetCheckpoints
from odradek.cleaner.log_to_clean import LogToClean
from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.storage.log import Log
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

PAUSE_WAIT_S = 0.1


@dataclass(frozen=True)
class LogCleaningState:
    """``in progress`` (being cleaned), ``aborted`` (asked to stop, not stopped yet) or
    ``paused`` by ``paused_count`` callers; a log the cleaner is not touching has no state
    (Kafka's ``LogCleaningState``)."""

    name: str
    paused_count: int = 0

    @property
    def is_paused(self) -> bool:
        return self.name == PAUSED_NAME


PAUSED_NAME = "paused"
IN_PROGRESS = LogCleaningState("in progress")
ABORTED = LogCleaningState("aborted")


def paused(count: int) -> LogCleaningState:
    return LogCleaningState(PAUSED_NAME, count)


class LogCleanerManager:
    """Shared by every cleaner thread and by the LogManager; every method is thread-safe."""

    def __init__(
        self,
        logs: Callable[[], Iterable[Log]],
        checkpoints: CleanerOffsetCheckpoints,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._logs = logs
        self.checkpoints = checkpoints
        self._clock = clock
        self._lock = threading.Condition()
        self._in_progress: dict[TopicPartition, LogCleaningState] = {}
        self._uncleanable: dict[Path, set[TopicPartition]] = defaultdict(set)
        self.dirtiest_log_cleanable_ratio = 0.0
        self.max_compaction_delay_ms = 0
        self.time_of_last_run_ms = clock.milliseconds()

    def cleaning_state(self, tp: TopicPartition) -> LogCleaningState | None:
        with self._lock:
            return self._in_progress.get(tp)

    def first_dirty_offset(self, tp: TopicPartition) -> int:
        """``tp``'s checkpointed first dirty offset, -1 before its first cleaning."""
        return self.checkpoints.cleaner_offsets().get(tp, -1)

    # --- choosing ----------------------------------------------------------------------------

    def grab_filthiest_compacted_log(self) -> LogToClean | None:
        """The compacted log with the highest dirty ratio over its ``min.cleanable.dirty.ratio``
        (or with records past ``max.compaction.lag.ms``), now marked in progress; None when no
        log needs cleaning."""
        with self._lock:
            now_ms = self.time_of_last_run_ms = self._clock.milliseconds()
            checkpoints = self.checkpoints.cleaner_offsets()
            measured = [
                cleanable
                for log in self._logs()
                if self._is_candidate(log)
                and (cleanable := self._log_to_clean(log, checkpoints, now_ms)) is not None
            ]
            self.max_compaction_delay_ms = max((c.compaction_delay_ms for c in measured), default=0)
            candidates = [c for c in measured if c.total_bytes > 0]
            self.dirtiest_log_cleanable_ratio = max(
                (c.cleanable_ratio for c in candidates), default=0.0
            )
            ready = [c for c in candidates if _needs_cleaning(c)]
            if not ready:
                return None
            filthiest = max(ready, key=lambda c: c.cleanable_ratio)
            self._in_progress[filthiest.topic_partition] = IN_PROGRESS
            return filthiest

    def _is_candidate(self, log: Log) -> bool:
        return (
            log.config.compact
            and log.topic_partition not in self._in_progress
            and not self.is_uncleanable_partition(log)
        )

    def _log_to_clean(
        self, log: Log, checkpoints: dict[TopicPartition, int], now_ms: int
    ) -> LogToClean | None:
        tp = log.topic_partition
        try:
            offsets = cleanable_offsets(log, checkpoints.get(tp), now_ms)
            if offsets.force_update_checkpoint:
                self.checkpoints.update_cleaner_offsets({tp: offsets.first_dirty_offset})
            delay_ms = max_compaction_delay(log, offsets.first_dirty_offset, now_ms)
            return LogToClean.of(
                log,
                offsets.first_dirty_offset,
                offsets.first_uncleanable_dirty_offset,
                compaction_delay_ms=delay_ms,
            )
        except Exception:
            logger.exception("[%s] cannot measure the log for cleaning; not cleaning it", tp)
            self.mark_partition_uncleanable(log.dir.parent, tp)
            return None

    # --- retention of compacted logs ---------------------------------------------------------

    def deletable_logs(self) -> list[Log]:
        """The compacted logs whose retention a cleaner thread applies now, marked in progress
        (the LogManager applies retention to the other logs)."""
        with self._lock:
            logs = [log for log in self._logs() if self._is_candidate(log)]
            for log in logs:
                self._in_progress[log.topic_partition] = IN_PROGRESS
            return logs

    def done_deleting(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self._release(tp)

    def pause_cleaning_for_non_compacted_partitions(self) -> list[Log]:
        """Pause the logs without ``compact`` that nobody holds and return them: the
        LogManager's retention task applies retention to these, then resumes them."""
        with self._lock:
            logs = [
                log
                for log in self._logs()
                if not log.config.compact and log.topic_partition not in self._in_progress
            ]
            for log in logs:
                self._in_progress[log.topic_partition] = paused(1)
            return logs

    # --- pausing -----------------------------------------------------------------------------

    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Stop any cleaning of ``tp`` now and forget it, its checkpointed first dirty offset
        included (its topic is being deleted)."""
        with self._lock:
            self.abort_and_pause_cleaning(tp)
            self.resume_cleaning([tp])
            for partitions in self._uncleanable.values():
                partitions.discard(tp)
            self.checkpoints.remove([tp])

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        """Keep the cleaner off ``tp`` until :meth:`resume_cleaning`; a run in progress is
        aborted and this returns once the cleaner thread has let go of the log."""
        with self._lock:
            state = self._in_progress.get(tp)
            if state is None:
                self._in_progress[tp] = paused(1)
            elif state == IN_PROGRESS:
                self._in_progress[tp] = ABORTED
            elif state.is_paused:
                self._in_progress[tp] = paused(state.paused_count + 1)
            else:
                raise ValueError(f"[{tp}] cleaning cannot be paused while it is {state.name}")
            while not self._in_progress[tp].is_paused:
                self._lock.wait(PAUSE_WAIT_S)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        """Undo one pause of each of ``tps``."""
        with self._lock:
            for tp in tps:
                state = self._in_progress.get(tp)
                if state is None or not state.is_paused:
                    raise ValueError(f"[{tp}] cleaning cannot be resumed: it is not paused")
                if state.paused_count > 1:
                    self._in_progress[tp] = paused(state.paused_count - 1)
                else:
                    del self._in_progress[tp]

    def is_cleaning_aborted(self, tp: TopicPartition) -> bool:
        with self._lock:
            return self._in_progress.get(tp) == ABORTED

    # --- finishing ---------------------------------------------------------------------------

    def done_cleaning(self, tp: TopicPartition, end_offset: int | None) -> None:
        """The cleaner thread let go of ``tp``; when the run completed (``end_offset`` given,
        not aborted) its new first dirty offset is checkpointed."""
        with self._lock:
            if end_offset is not None and self._in_progress.get(tp) == IN_PROGRESS:
                self.checkpoints.update_cleaner_offsets({tp: end_offset})
            self._release(tp)

    def _release(self, tp: TopicPartition) -> None:
        state = self._in_progress.get(tp)
        if state == IN_PROGRESS:
            del self._in_progress[tp]
        elif state == ABORTED:
            self._in_progress[tp] = paused(1)
            self._lock.notify_all()
        else:
            raise ValueError(f"[{tp}] the cleaner does not hold the log (state {state})")

    def maybe_truncate_checkpoint(self, log: Log, offset: int) -> None:
        """After ``log`` was truncated to ``offset``: its first dirty offset cannot be above."""
        with self._lock:
            tp = log.topic_partition
            if log.config.compact and self.checkpoints.cleaner_offsets().get(tp, 0) > offset:
                self.checkpoints.update_cleaner_offsets({tp: offset})

    # --- uncleanable partitions --------------------------------------------------------------

    def mark_partition_uncleanable(self, log_dir: Path, tp: TopicPartition) -> None:
        """Stop cleaning ``tp`` after a failure, until the broker restarts (Kafka does so)."""
        with self._lock:
            self._uncleanable[log_dir].add(tp)

    def is_uncleanable_partition(self, log: Log) -> bool:
        with self._lock:
            return log.topic_partition in self._uncleanable.get(log.dir.parent, ())

    def uncleanable_partitions(self) -> dict[Path, frozenset[TopicPartition]]:
        with self._lock:
            return {d: frozenset(tps) for d, tps in self._uncleanable.items() if tps}

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """``log_dir`` went offline: its partitions are no longer tracked."""
        with self._lock:
            self._uncleanable.pop(log_dir, None)
        self.checkpoints.forget_dir(log_dir)


def _needs_cleaning(cleanable: LogToClean) -> bool:
    return (
        cleanable.needs_compaction_now and cleanable.cleanable_bytes > 0
    ) or cleanable.cleanable_ratio > cleanable.log.config.min_cleanable_dirty_ratio
