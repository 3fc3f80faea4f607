"""LogCleaner: the broker's log compaction service (Kafka's ``LogCleaner``, design §11).

The LogManager starts it with its logs and checkpoint store, and keeps it off a log while it
changes that log in other ways:

- retention: ``pause_cleaning_for_non_compacted_partitions()``, apply retention to the logs
  returned, then ``resume_cleaning`` them (compacted logs get retention from the cleaner
  threads, between runs);
- truncation: ``abort_and_pause_cleaning(tp)``, truncate, ``maybe_truncate_checkpoint``,
  ``resume_cleaning([tp])``;
- topic deletion: ``abort_cleaning(tp)`` for each partition before its directory goes;
- a log directory going offline: ``handle_log_dir_failure(log_dir)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_offset_checkpoints import CleanerOffsetCheckpoints, DirFailureHandler
from odradek.cleaner.cleaner_stats import CleaningReport
from odradek.cleaner.cleaner_thread import CleanerThread
from odradek.cleaner.log_cleaner_manager import LogCleanerManager
from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

AWAIT_POLL_S = 0.01


@dataclass(frozen=True)
class CleanerMetrics:
    """``kafka.log:type=LogCleaner`` and ``type=LogCleanerManager`` gauges at one moment, by
    their names: the ``max_``/``recopy`` figures are over each thread's last run."""

    max_buffer_utilization_percent: float
    cleaner_recopy_percent: float
    max_clean_time_secs: float
    max_compaction_delay_secs: float
    dead_thread_count: int
    max_dirty_percent: float
    time_since_last_run_ms: int
    uncleanable_partitions_count: int
    worker_failures: int = 0
    uncleanable_partitions: tuple[tuple[Path, TopicPartition, str], ...] = ()
    """(log directory, partition, reason) of each uncleanable partition."""


class LogCleaner:
    """``config.num_threads`` cleaner threads sharing one :class:`LogCleanerManager`.

    ``logs`` returns the broker's online logs (``LogManager.all_logs``); the cleaner keeps
    their first dirty offsets in each directory's ``cleaner-offset-checkpoint`` (its only
    writer), reporting a directory it cannot write to ``on_dir_failure``
    (``LogDirFailureChannel.maybe_add_offline_log_dir``). Every method may be called from any
    thread, but not while holding a UnifiedLog's lock.
    """

    def __init__(
        self,
        config: CleanerConfig,
        logs: Callable[[], Iterable[UnifiedLog]],
        *,
        on_dir_failure: DirFailureHandler | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        checkpoints = CleanerOffsetCheckpoints(logs, on_dir_failure)
        self.manager = LogCleanerManager(logs, checkpoints, clock, config.backoff_ms)
        self._clock = clock
        self._threads: list[CleanerThread] = []
        self._worker_failures = 0  # of threads since shut down

    def startup(self) -> None:
        """Start the cleaner threads (none when ``log.cleaner.enable`` is false)."""
        if not self.config.enable_cleaner or self._threads:
            return
        self._threads = [
            CleanerThread(number, self.config, self.manager)
            for number in range(self.config.num_threads)
        ]
        for thread in self._threads:
            thread.start()

    def shutdown(self) -> None:
        """Stop the threads, aborting the runs in progress, and wait for them."""
        for thread in self._threads:
            thread.initiate_shutdown()
        for thread in self._threads:
            thread.await_shutdown()
        self._worker_failures += sum(t.worker_failures for t in self._threads)
        self._threads = []

    # --- keeping the cleaner off a log -------------------------------------------------------

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        self.manager.resume_cleaning(tps)

    def pause_cleaning_for_non_compacted_partitions(self) -> list[UnifiedLog]:
        return self.manager.pause_cleaning_for_non_compacted_partitions()

    def maybe_truncate_checkpoint(self, log: UnifiedLog, offset: int) -> None:
        self.manager.maybe_truncate_checkpoint(log, offset)

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        self.manager.handle_log_dir_failure(log_dir)

    # --- what it did -------------------------------------------------------------------------

    @property
    def last_reports(self) -> list[CleaningReport]:
        """Each thread's last finished run."""
        return [t.last_report for t in self._threads if t.last_report is not None]

    def metrics(self) -> CleanerMetrics:
        """Kafka's cleaner gauges now; the per-run ones over each thread's last run."""
        reports = self.last_reports
        manager = self.manager
        bytes_read = sum(r.bytes_read for r in reports)
        bytes_written = sum(r.bytes_written for r in reports)
        utilization = max((r.buffer_utilization for r in reports), default=0.0)
        uncleanable = manager.uncleanable_partitions()
        return CleanerMetrics(
            max_buffer_utilization_percent=100 * utilization,
            cleaner_recopy_percent=100 * bytes_written / max(bytes_read, 1),
            max_clean_time_secs=max((r.seconds for r in reports), default=0.0),
            max_compaction_delay_secs=manager.max_compaction_delay_ms / 1000,
            dead_thread_count=sum(not t.is_alive for t in self._threads),
            max_dirty_percent=100 * manager.dirtiest_log_cleanable_ratio,
            time_since_last_run_ms=self._clock.milliseconds() - manager.time_of_last_run_ms,
            uncleanable_partitions_count=sum(len(tps) for tps in uncleanable.values()),
            worker_failures=self._worker_failures + sum(t.worker_failures for t in self._threads),
            uncleanable_partitions=tuple(
                (log_dir, tp, reason)
                for log_dir, tps in sorted(uncleanable.items())
                for tp, reason in sorted(tps.items())
            ),
        )

    def await_cleaned(self, tp: TopicPartition, offset: int, timeout_s: float) -> bool:
        """Wait until ``tp``'s first dirty offset reaches ``offset``; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self.manager.first_dirty_offset(tp) < offset:
            if time.monotonic() >= deadline:
                return False
            time.sleep(AWAIT_POLL_S)
        return True
