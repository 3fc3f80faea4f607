"""LogCleanerManager: which compacted log to clean next, which logs the cleaner holds, and where
each log's cleaning stopped (Kafka's ``LogCleanerManager``).

A log is in at most one of these hands at a time: a cleaner thread cleaning it or applying
its retention (state ``in progress``), or callers that paused it (``paused``, counted) to
truncate it, delete it or apply its retention themselves. Pausing a log that is being cleaned
first aborts the run and waits for the cleaner thread to let go of it.

A run that fails (its worker died, or the cleaning raised) is retried after a backoff that
doubles with each failure in a row, from ``log.cleaner.backoff.ms`` up to
``MAX_RETRY_BACKOFF_MS``; after ``MAX_CLEANING_ATTEMPTS`` failures in a row the partition is
marked uncleanable, with the last failure as its reason, until the broker restarts (Kafka
marks it at the first failure; a worker process can die of causes that pass, such as memory
pressure, where Kafka's cleaner thread would not).
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
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

PAUSE_WAIT_S = 0.1
MAX_CLEANING_ATTEMPTS = 3
MAX_RETRY_BACKOFF_MS = 300_000
REASON_CHARS = 300


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
        logs: Callable[[], Iterable[UnifiedLog]],
        checkpoints: CleanerOffsetCheckpoints,
        clock: Clock = SYSTEM_CLOCK,
        retry_backoff_ms: int = 15_000,
    ) -> None:
        self._logs = logs
        self._retry_backoff_ms = retry_backoff_ms
        self.checkpoints = checkpoints
        self.clock = clock
        self._lock = threading.Condition()
        self._in_progress: dict[TopicPartition, LogCleaningState] = {}
        self._uncleanable: dict[Path, dict[TopicPartition, str]] = defaultdict(dict)
        self._failures: dict[TopicPartition, int] = {}  # failed runs in a row
        self._retry_at_ms: dict[TopicPartition, int] = {}
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
            now_ms = self.time_of_last_run_ms = self.clock.milliseconds()
            checkpoints = self.checkpoints.cleaner_offsets()
            measured = [
                cleanable
                for log in self._logs()
                if self._is_candidate(log)
                and self._retry_at_ms.get(log.topic_partition, 0) <= now_ms
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

    def _is_candidate(self, log: UnifiedLog) -> bool:
        return (
            log.config.compact
            and log.topic_partition not in self._in_progress
            and not self.is_uncleanable_partition(log)
        )

    def _log_to_clean(
        self, log: UnifiedLog, checkpoints: dict[TopicPartition, int], now_ms: int
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
            reason = "its dirty section cannot be measured"
            self.mark_partition_uncleanable(log.dir.parent, tp, reason)
            return None

    # --- retention of compacted logs ---------------------------------------------------------

    def deletable_logs(self) -> list[UnifiedLog]:
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

    def pause_cleaning_for_non_compacted_partitions(self) -> list[UnifiedLog]:
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
                partitions.pop(tp, None)
            self._failures.pop(tp, None)
            self._retry_at_ms.pop(tp, None)
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
                self._failures.pop(tp, None)
                self._retry_at_ms.pop(tp, None)
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

    def maybe_truncate_checkpoint(self, log: UnifiedLog, offset: int) -> None:
        """After ``log`` was truncated to ``offset``: its first dirty offset cannot be above."""
        with self._lock:
            tp = log.topic_partition
            if log.config.compact and self.checkpoints.cleaner_offsets().get(tp, 0) > offset:
                self.checkpoints.update_cleaner_offsets({tp: offset})

    # --- uncleanable partitions --------------------------------------------------------------

    def cleaning_failed(self, log_dir: Path, tp: TopicPartition, reason: str) -> None:
        """A run of ``tp`` failed for ``reason``: retry it after a backoff, or mark it
        uncleanable once it has failed ``MAX_CLEANING_ATTEMPTS`` times in a row."""
        with self._lock:
            failures = self._failures[tp] = self._failures.get(tp, 0) + 1
            if failures >= MAX_CLEANING_ATTEMPTS:
                self.mark_partition_uncleanable(
                    log_dir, tp, f"{failures} cleaning runs failed in a row; the last: {reason}"
                )
                return
            backoff_ms = retry_backoff_ms(self._retry_backoff_ms, failures)
            self._retry_at_ms[tp] = self.clock.milliseconds() + backoff_ms
        logger.warning(
            "[%s] cleaning failed (%d of %d attempts): %s; retrying in %.1f s",
            tp,
            failures,
            MAX_CLEANING_ATTEMPTS,
            _first_line(reason),
            backoff_ms / 1000,
        )

    def mark_partition_uncleanable(self, log_dir: Path, tp: TopicPartition, reason: str) -> None:
        """Stop cleaning ``tp`` until the broker restarts (Kafka does so), for ``reason``."""
        with self._lock:
            self._uncleanable[log_dir][tp] = _first_line(reason)[:REASON_CHARS]
            self._failures.pop(tp, None)
            self._retry_at_ms.pop(tp, None)
        logger.error(
            "[%s] marked uncleanable in %s until the broker restarts: %s", tp, log_dir, reason
        )

    def is_uncleanable_partition(self, log: UnifiedLog) -> bool:
        with self._lock:
            return log.topic_partition in self._uncleanable.get(log.dir.parent, ())

    def uncleanable_partitions(self) -> dict[Path, dict[TopicPartition, str]]:
        """Each log directory's uncleanable partitions, with the reason of each."""
        with self._lock:
            return {d: dict(tps) for d, tps in self._uncleanable.items() if tps}

    def failed_attempts(self, tp: TopicPartition) -> int:
        """How many runs of ``tp`` failed in a row (0 after a run that completed)."""
        with self._lock:
            return self._failures.get(tp, 0)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        """``log_dir`` went offline: its partitions are no longer tracked."""
        with self._lock:
            self._uncleanable.pop(log_dir, None)
        self.checkpoints.forget_dir(log_dir)


def _needs_cleaning(cleanable: LogToClean) -> bool:
    return (
        cleanable.needs_compaction_now and cleanable.cleanable_bytes > 0
    ) or cleanable.cleanable_ratio > cleanable.log.config.min_cleanable_dirty_ratio


def retry_backoff_ms(base_ms: int, failures: int) -> int:
    """The wait after ``failures`` failures in a row: ``base_ms`` doubled for each failure after
    the first, at most ``MAX_RETRY_BACKOFF_MS`` (and never below ``base_ms``)."""
    return max(base_ms, min(base_ms * 2 ** (failures - 1), MAX_RETRY_BACKOFF_MS))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
