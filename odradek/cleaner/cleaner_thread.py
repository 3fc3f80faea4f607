"""CleanerThread: cleans the filthiest log again and again (Kafka's ``CleanerThread``)."""

from __future__ import annotations

import logging
import threading

from odradek.cleaner.cleaned_segment_swap import delete_leftovers, swap_in
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_process import CleanerProcess
from odradek.cleaner.cleaner_stats import CleaningReport
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import (
    CleanerWorkerDiedError,
    LogCleaningAbortedError,
    LogCleaningError,
)
from odradek.cleaner.log_cleaner_manager import LogCleanerManager, retry_backoff_ms
from odradek.cleaner.log_to_clean import LogToClean
from odradek.errors import KafkaStorageError

logger = logging.getLogger(__name__)


class CleanerThread:
    """A daemon thread that, until shut down, takes the filthiest log from the manager, has its
    :class:`CleanerProcess` clean it and swaps the result in, then applies the retention of the
    compacted logs; it sleeps ``log.cleaner.backoff.ms`` whenever no log needed cleaning.

    The worker process starts with the first run, not with the thread: its interpreter's start
    (about 0.2 s of CPU) would compete with the broker's own start-up, and a broker without
    compacted topics never needs it. It then lives as long as the thread.

    The thread itself plans each run, waits on the worker, swaps the result in and writes the
    checkpoint: about 2 ms of the broker's CPU a run, in short stretches between system calls.

    A worker that dies in a run (killed, out of memory) is counted in ``worker_failures`` and
    replaced by a fresh one after a backoff (``log.cleaner.backoff.ms``, doubled for each death
    in a row); the manager retries the partition (log_cleaner_manager.py).
    """

    def __init__(self, thread_id: int, config: CleanerConfig, manager: LogCleanerManager) -> None:
        self.thread_id = thread_id
        self.last_report: CleaningReport | None = None
        self._run_deaths = 0  # worker processes that died in a run, in all
        self._deaths_in_a_row = 0
        self._restart_backoff_s = 0.0
        self._config = config
        self._manager = manager
        self._stopping = threading.Event()
        self._process = CleanerProcess()
        self._thread = threading.Thread(
            target=self._run, name=f"kafka-log-cleaner-thread-{thread_id}", daemon=True
        )

    @property
    def worker_failures(self) -> int:
        """Worker processes that died, in a run or between runs (each was replaced)."""
        return self._run_deaths + self._process.idle_deaths

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def initiate_shutdown(self) -> None:
        """Stop after the current step; a cleaning run in progress is aborted."""
        self._stopping.set()

    def await_shutdown(self) -> None:
        self._thread.join()

    def _run(self) -> None:
        logger.info("log cleaner thread %d started", self.thread_id)
        try:
            while not self._stopping.is_set():
                try:
                    cleaned = self.try_clean_filthiest_log()
                except Exception:
                    logger.exception("log cleaner thread %d: unexpected error", self.thread_id)
                    cleaned = False
                if self._restart_backoff_s:
                    self._stopping.wait(self._restart_backoff_s)
                    self._restart_backoff_s = 0.0
                elif not cleaned:
                    self._stopping.wait(self._config.backoff_ms / 1000)
        finally:
            self._process.stop()
        logger.info("log cleaner thread %d stopped", self.thread_id)

    def try_clean_filthiest_log(self) -> bool:
        """Clean the filthiest log, if any needs it, then apply compacted logs' retention;
        True when a log was cleaned (or its cleaning attempted)."""
        cleanable = self._manager.grab_filthiest_compacted_log()
        if cleanable is not None:
            self._clean_log(cleanable)
        self._apply_retention()
        return cleanable is not None

    def _clean_log(self, cleanable: LogToClean) -> None:
        tp = cleanable.topic_partition
        end_offset = None
        try:
            report = self._clean(cleanable)
            end_offset = report.end_offset
            self.last_report = report
            logger.info("%s", report.describe())
            self._deaths_in_a_row = 0
        except LogCleaningAbortedError as error:
            logger.info("[%s] cleaning stopped: %s", tp, error)
        except KafkaStorageError as error:
            logger.warning("[%s] cleaning stopped, the log directory failed: %s", tp, error)
        except CleanerWorkerDiedError as error:
            self._run_deaths += 1
            self._deaths_in_a_row += 1
            backoff_ms = retry_backoff_ms(self._config.backoff_ms, self._deaths_in_a_row)
            self._restart_backoff_s = backoff_ms / 1000
            logger.error(
                "log cleaner thread %d: %s; starting a new worker in %.1f s",
                self.thread_id,
                error,
                self._restart_backoff_s,
            )
            self._manager.cleaning_failed(cleanable.log.dir.parent, tp, str(error))
        except LogCleaningError as error:  # the worker's traceback is in the message
            logger.error("%s", error)
            self._manager.cleaning_failed(cleanable.log.dir.parent, tp, str(error))
        except Exception as error:
            logger.exception("[%s] cleaning failed", tp)
            reason = f"{type(error).__name__}: {error}"
            self._manager.cleaning_failed(cleanable.log.dir.parent, tp, reason)
        finally:
            if end_offset is None:
                delete_leftovers(cleanable.log.dir)
            self._manager.done_cleaning(tp, end_offset)

    def _clean(self, cleanable: LogToClean) -> CleaningReport:
        tp = cleanable.topic_partition
        logger.info(
            "[%s] cleaning offsets [%d, %d), dirty ratio %.2f",
            tp,
            cleanable.first_dirty_offset,
            cleanable.first_uncleanable_offset,
            cleanable.cleanable_ratio,
        )

        def should_abort() -> bool:
            return self._stopping.is_set() or self._manager.is_cleaning_aborted(tp)

        result = self._process.clean(
            CleaningTask.plan(cleanable, self._config, self._manager.clock.milliseconds()),
            should_abort,
        )
        swap_in(cleanable.log, result, should_abort)
        after = LogToClean.of(cleanable.log, result.end_offset, cleanable.first_uncleanable_offset)
        return CleaningReport.of(cleanable, result, after)

    def _apply_retention(self) -> None:
        logs = self._manager.deletable_logs()
        try:
            for log in logs:
                try:
                    log.delete_old_segments()
                except Exception:
                    logger.exception(
                        "[%s] retention of the compacted log failed", log.topic_partition
                    )
        finally:
            self._manager.done_deleting(log.topic_partition for log in logs)
