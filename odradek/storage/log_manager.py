"""LogManager: every partition's UnifiedLog on this broker (Kafka's ``LogManager``; §2, 8, 12).

It owns the log directories (``log.dirs``: each locked, identified by ``meta.properties`` and
taken offline on an I/O error while the others keep serving), the Logs (new partitions go to
the online directories with the fewest partitions, created all or nothing), their loading, the
offset checkpoints and the background tasks that keep the logs in shape: retention, flush, the
checkpoints and the removal of deleted partitions. Which topics exist, with which settings, is
decided by :class:`~odradek.server.admin.topic_admin.TopicAdmin`, which calls in here.

Start-up rolls back unfinished partition creations, then loads every directory in parallel with
``num.recovery.threads.per.data.dir`` threads each and skips recovery where the clean-shutdown
marker says the last stop was graceful. Methods that touch the disk block; the server calls
them off its event loop. Background tasks run on the manager's own scheduler threads.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import count
from operator import attrgetter, methodcaller
from pathlib import Path
from typing import TypeVar

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config.broker_config import BrokerConfig
from odradek.config.log_config import LogConfig
from odradek.errors import (
    InvalidConfigError,
    InvalidTopicError,
    KafkaStorageError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.atomic_file import fsync_directory, write_atomically
from odradek.storage.cleaning_control import CleaningControl
from odradek.storage.descriptor_budget import DescriptorBudget
from odradek.storage.idle_file_cache import IDLE_FILES
from odradek.storage.log_dir_description import LogDirDescription
from odradek.storage.log_dir_failure_channel import (
    LogDirFailureChannel,
    is_descriptor_exhaustion,
)
from odradek.storage.log_dir_lock import LogDirLock
from odradek.storage.log_file_names import LOG_FILE_SUFFIX
from odradek.storage.log_load_summary import LogLoadSummary
from odradek.storage.meta_properties import MetaProperties
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.storage.partition_description import PartitionDescription
from odradek.storage.pending_partition_creation import PendingPartitionCreation
from odradek.storage.scheduler import ScheduledTask, Scheduler
from odradek.storage.topic_config_store import TopicConfigStore
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import (
    DELETE_DIR_SUFFIX,
    TopicPartition,
    describe_partitions,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

CLEAN_SHUTDOWN_FILE_NAME = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"
# The offsets each log checkpoint file records, taken from the live Logs.
LOG_CHECKPOINTS: dict[str, Callable[[UnifiedLog], int]] = {
    RECOVERY_POINT_CHECKPOINT_FILE: methodcaller("recovery_point_to_checkpoint"),
    LOG_START_OFFSET_CHECKPOINT_FILE: attrgetter("log_start_offset"),
    HIGH_WATERMARK_CHECKPOINT_FILE: attrgetter("high_watermark"),
}
CREATION_ABORT_TIMEOUT_S = 10.0  # how long shutdown waits for abandoned creations to roll back
BACKGROUND_THREADS = 4
MAX_FILE_NAME_LENGTH = 255
# ``<topic>-<partition>.<32 hex digits>-delete``: what delete_topic renames a partition to.
_DELETED_PARTITION_DIR = re.compile(r".+-[0-9]+\.[0-9a-f]{32}" + re.escape(DELETE_DIR_SUFFIX))


class LogManager:
    """The logs of this broker, their directories, topics and background tasks."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        initial_task_delay_ms: int | None = None,
    ) -> None:
        """``initial_task_delay_ms``: when the periodic tasks first run, if not
        ``log.initial.task.delay.ms``."""
        self._config = config
        self._default_log_config = config.log_config()
        self._clock = clock
        self._initial_task_delay_ms = (
            config.log_initial_task_delay_ms
            if initial_task_delay_ms is None
            else initial_task_delay_ms
        )
        self.log_dirs = _distinct_log_dirs(config.log_dir_paths)
        self.failure_channel = LogDirFailureChannel()
        self.failure_channel.add_listener(self._on_log_dir_offline)
        self.scheduler = Scheduler(BACKGROUND_THREADS, thread_name_prefix="log-manager")
        self._topic_configs = TopicConfigStore(self.log_dirs, self.failure_channel)
        self._checkpoint_files = {
            (log_dir, name): OffsetCheckpointFile(log_dir / name)
            for log_dir in self.log_dirs
            for name in LOG_CHECKPOINTS
        }
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        # The logs get_log returns, read on every request: ``_logs`` less those of a failed
        # directory, dropped the moment it fails (before its logs close). Written under the
        # lock, except that a failing directory's logs leave it without it (see
        # _on_log_dir_offline); get_log checks the long way whatever it misses.
        self._serving: dict[TopicPartition, UnifiedLog] = {}
        self._serving_change_numbers = count(1)
        self.serving_changes = 0
        """A number that changes (to one never used before) after each change of the logs
        get_log returns: whoever keeps logs it got may keep them while this stands still,
        and asks get_log again when it moves."""
        self._offline_partitions: dict[TopicPartition, Path] = {}
        # Indexes kept beside the two maps above so that lookups and placement cost no scan.
        self._partitions_by_topic: dict[str, set[TopicPartition]] = {}  # online and offline
        self._partition_counts: Counter[Path] = Counter()  # the logs in each directory
        self._log_dir_locks: list[LogDirLock] = []
        self._tasks: list[ScheduledTask] = []
        self._lock = threading.Lock()  # guards the partition maps; held briefly, never for I/O
        self._shutting_down = False
        self._creations_in_flight = 0
        self._creations_done = threading.Condition(self._lock)
        self._checkpoint_lock = threading.Lock()  # a checkpoint snapshot and its write are one step
        self.meta_properties: MetaProperties | None = None
        self._new_log_dirs: frozenset[Path] = frozenset()  # without meta.properties at start-up
        self.load_summary: LogLoadSummary | None = None
        self.cleaner: CleaningControl | None = None
        self._starting = False

    @property
    def config(self) -> BrokerConfig:
        return self._config

    # --- start-up ----------------------------------------------------------------------------

    def startup(self) -> None:
        """Lock and identify the log directories, load every log, start the background tasks.

        Raises LogDirLockedError, InconsistentClusterIdError, or KafkaStorageError when no log
        directory is usable; nothing stays locked then.
        """
        self.scheduler.startup()
        self._starting = True
        try:
            self._prepare_log_dirs()
            self._topic_configs.load()
            self._roll_back_pending_creations()
            self._load_logs()
            self._forget_configs_of_absent_topics()
        except BaseException:
            for log in self._logs.values():
                _close_quietly(log, log.close_handlers)
            self._logs.clear()
            self._serving.clear()
            self._serving_changed()
            self._release_locks()
            self.scheduler.shutdown()
            raise
        finally:
            self._starting = False
        self._schedule_background_tasks()

    def _prepare_log_dirs(self) -> None:
        self._for_each_online_dir("create", _create_log_dir)
        for log_dir in self._online_dirs():
            try:
                self._log_dir_locks.append(LogDirLock.acquire(log_dir))
            except OSError as error:
                self._take_offline(log_dir, f"cannot lock it: {error}", error)
        stored = self._for_each_online_dir("read meta.properties of", MetaProperties.read)
        meta = MetaProperties.reconcile(stored, self._config.broker_id, self._config.cluster_id)
        fresh = [log_dir for log_dir, found in stored.items() if found is None]
        self._new_log_dirs = frozenset(fresh)
        self._for_each_online_dir("write meta.properties to", meta.write, fresh)
        if not self._online_dirs():
            raise KafkaStorageError(
                f"none of the log directories {[str(d) for d in self.log_dirs]} is usable"
            )
        self.meta_properties = meta

    def _load_logs(self) -> None:
        started = time.monotonic()
        threads = self._config.num_recovery_threads_per_data_dir
        pools = {
            log_dir: ThreadPoolExecutor(threads, thread_name_prefix=f"log-recovery-{log_dir}")
            for log_dir in self._online_dirs()
        }
        try:
            jobs = {log_dir: self._submit_log_dir(log_dir, pool) for log_dir, pool in pools.items()}
            loaded = [
                log for d, dir_jobs in jobs.items() for log in self._finish_log_dir(d, dir_jobs)
            ]
        finally:
            for pool in pools.values():
                pool.shutdown()
        self.load_summary = LogLoadSummary.of(loaded, time.monotonic() - started)
        logger.info("%s", self.load_summary)
        self._log_descriptor_budget(self.load_summary)

    def _log_descriptor_budget(self, summary: LogLoadSummary) -> None:
        """State the descriptor limit and what the loaded logs and max.connections may need;
        a warning when the need is above the limit."""
        budget = DescriptorBudget.current(
            summary.partitions, summary.segments, IDLE_FILES.capacity, self._config.max_connections
        )
        if budget.exceeds_limit:
            logger.warning(
                "%s: raise the limit (ulimit -n, LimitNOFILE) or lower max.connections", budget
            )
        else:
            logger.info("%s", budget)

    def _submit_log_dir(
        self, log_dir: Path, pool: ThreadPoolExecutor
    ) -> dict[TopicPartition, Future[UnifiedLog]]:
        """Start loading every partition directory of ``log_dir`` with its checkpoints."""
        clean = (log_dir / CLEAN_SHUTDOWN_FILE_NAME).exists()
        recovery_points, log_start_offsets, high_watermarks = (
            self._checkpoint_files[(log_dir, name)].read() for name in LOG_CHECKPOINTS
        )
        if log_dir in self._new_log_dirs:
            logger.info("loading logs from %s (a new log directory)", log_dir)
        else:
            state = "clean" if clean else "unclean"
            logger.info("loading logs from %s (%s shutdown)", log_dir, state)

        def open_log(directory: Path, tp: TopicPartition) -> UnifiedLog:
            return UnifiedLog.open(
                directory,
                self.topic_config(tp.topic),
                self.scheduler,
                clock=self._clock,
                log_start_offset=log_start_offsets.get(tp, 0),
                recovery_point=recovery_points.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
                had_clean_shutdown=clean,
                producer_id_expiration_ms=self._config.producer_id_expiration_ms,
            )

        jobs = {}
        try:
            for directory in sorted(log_dir.iterdir()):
                tp = self._partition_of(directory)
                if tp is not None:
                    jobs[tp] = pool.submit(open_log, directory, tp)
        except OSError as error:
            self._take_offline(log_dir, f"cannot list it: {error}", error)
        return jobs

    def _partition_of(self, directory: Path) -> TopicPartition | None:
        """The partition stored in ``directory``; None for anything else (a deleted partition's
        directory is queued for removal)."""
        if not directory.is_dir():
            return None
        if directory.name.endswith(DELETE_DIR_SUFFIX):
            if _DELETED_PARTITION_DIR.fullmatch(directory.name):
                self._schedule_log_dir_removal(directory, None, delay_ms=0)
            else:
                logger.info("ignoring %s: not a deleted partition directory", directory)
            return None
        try:
            return TopicPartition.from_dir_name(directory.name)
        except InvalidTopicError:
            logger.info("ignoring %s: not a partition directory", directory)
            return None

    def _finish_log_dir(
        self, log_dir: Path, jobs: Mapping[TopicPartition, Future[UnifiedLog]]
    ) -> list[UnifiedLog]:
        """Collect the loaded logs of ``log_dir``; on an I/O error its partitions go offline."""
        logs = []
        for tp, job in jobs.items():
            try:
                logs.append(job.result())
            except OSError as error:
                self._take_offline(log_dir, f"loading partition {tp} failed: {error}", error)
        if self.failure_channel.is_offline(log_dir):
            for log in logs:
                _close_quietly(log, log.close_handlers)
            with self._lock:
                self._offline_partitions.update(dict.fromkeys(jobs, log_dir))
                for tp in jobs:
                    self._index_locked(tp)
            return []
        with self._lock:
            for log in logs:
                self._register_locked(log)
        self._for_each_online_dir(
            "remove the clean-shutdown marker of", _remove_clean_shutdown_marker, [log_dir]
        )
        return logs

    def _register_locked(self, log: UnifiedLog) -> None:
        """Make ``log`` one of this broker's; call with the lock held."""
        tp = log.topic_partition
        existing = self._logs.get(tp)
        if existing is not None:
            raise KafkaStorageError(
                f"partition {tp} is stored twice, in {existing.dir} and {log.dir}; "
                f"remove one copy before starting the broker"
            )
        log.io_error_handler = self._on_log_io_error
        self._logs[tp] = log
        self._partition_counts[log.log_dir] += 1
        self._index_locked(tp)
        self._serve_locked(log)

    def _serve_locked(self, log: UnifiedLog) -> None:
        """Let get_log return ``log`` from ``_serving``; call with the lock held. Added, then
        checked: a directory failing meanwhile either sees it there (and drops it) or is
        seen offline here."""
        tp = log.topic_partition
        self._serving[tp] = log
        self._serving_changed()
        if self.failure_channel.is_offline(log.log_dir):
            self._serving.pop(tp, None)
            self._serving_changed()

    def _unregister_locked(self, log: UnifiedLog) -> None:
        """Forget ``log`` (deleted); call with the lock held."""
        tp = log.topic_partition
        del self._logs[tp]
        self._serving.pop(tp, None)
        self._serving_changed()
        self._partition_counts[log.log_dir] -= 1
        partitions = self._partitions_by_topic[tp.topic]
        partitions.discard(tp)
        if not partitions:
            del self._partitions_by_topic[tp.topic]

    def _index_locked(self, tp: TopicPartition) -> None:
        self._partitions_by_topic.setdefault(tp.topic, set()).add(tp)

    # --- background tasks --------------------------------------------------------------------

    def _schedule_background_tasks(self) -> None:
        config = self._config
        periodic = [
            ("kafka-log-retention", self.cleanup_logs, config.log_retention_check_interval_ms),
            ("kafka-log-flusher", self.flush_dirty_logs, config.log_flush_scheduler_interval_ms),
            (
                "kafka-recovery-point-checkpoint",
                self.checkpoint_log_recovery_offsets,
                config.log_flush_offset_checkpoint_interval_ms,
            ),
            (
                "kafka-log-start-offset-checkpoint",
                self.checkpoint_log_start_offsets,
                config.log_flush_start_offset_checkpoint_interval_ms,
            ),
            (
                "highwatermark-checkpoint",
                self.checkpoint_high_watermarks,
                config.replica_high_watermark_checkpoint_interval_ms,
            ),
            (
                "PeriodicProducerExpirationCheck",
                self.remove_expired_producers,
                config.producer_id_expiration_check_interval_ms,
            ),
        ]
        self._tasks = [
            self.scheduler.schedule(name, task, self._initial_task_delay_ms, period_ms)
            for name, task, period_ms in periodic
        ]

    def attach_cleaner(self, cleaner: CleaningControl) -> None:
        """Coordinate retention and topic deletion with a running log cleaner."""
        self.cleaner = cleaner

    def cleanup_logs(self) -> int:
        """Apply retention to every online log (the retention task); return segments deleted.

        With a cleaner attached, retention pauses it on the logs it checks (compacted logs get
        their retention from the cleaner between runs, as in Kafka), so the two never work on
        one log at once.
        """
        cleaner = self.cleaner
        if cleaner is None:
            return sum(self._for_each_log("retention check", lambda log: log.delete_old_segments()))
        logs = cleaner.pause_cleaning_for_non_compacted_partitions()
        try:
            return sum(
                self._for_each_log("retention check", lambda log: log.delete_old_segments(), logs)
            )
        finally:
            cleaner.resume_cleaning([log.topic_partition for log in logs])

    def remove_expired_producers(self) -> None:
        """Forget, in every online log, producers idle for producer.id.expiration.ms."""
        self._for_each_log("producer expiration", lambda log: log.remove_expired_producers())

    def flush_dirty_logs(self) -> None:
        """Flush every log whose last flush is at least its ``flush.ms`` ago (the flush task)."""
        now_ms = self._clock.milliseconds()

        def flush_if_due(log: UnifiedLog) -> None:
            if now_ms - log.last_flush_time >= log.config.flush_ms:
                log.flush()

        self._for_each_log("flush", flush_if_due)

    def checkpoint_log_recovery_offsets(self) -> None:
        """Write ``recovery-point-offset-checkpoint`` in every online directory."""
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT_FILE, self._online_dirs())

    def checkpoint_log_start_offsets(self) -> None:
        """Write ``log-start-offset-checkpoint`` in every online directory."""
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT_FILE, self._online_dirs())

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` (the HWs) in every online directory."""
        self._write_checkpoints(HIGH_WATERMARK_CHECKPOINT_FILE, self._online_dirs())

    def _write_checkpoints(self, file_name: str, log_dirs: Iterable[Path]) -> None:
        """Write ``file_name`` in each of ``log_dirs`` from the logs there; the snapshot is
        taken under the checkpoint lock so a deleted partition cannot reappear in it."""
        offset_of = LOG_CHECKPOINTS[file_name]
        with self._checkpoint_lock:
            for log_dir, logs in self._logs_by_dir(log_dirs).items():
                offsets = {log.topic_partition: offset_of(log) for log in logs}
                self._write_checkpoint(log_dir, file_name, offsets)

    def _write_checkpoint(
        self, log_dir: Path, file_name: str, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Write one checkpoint file; skipped when its directory is offline, and a failure
        takes the directory offline."""
        if self.failure_channel.is_offline(log_dir):
            return
        try:
            self._checkpoint_files[(log_dir, file_name)].write(offsets)
        except OSError as error:
            self._take_offline(log_dir, f"cannot write {file_name}: {error}", error)

    def _for_each_log(
        self,
        action: str,
        function: Callable[[UnifiedLog], T],
        logs: Iterable[UnifiedLog] | None = None,
    ) -> list[T]:
        """``function`` applied to every online log (or to ``logs``); a failure is logged with
        its partition and does not stop the others."""
        results = []
        for log in self.all_logs() if logs is None else logs:
            try:
                results.append(function(log))
            except Exception:
                logger.exception("[%s] %s failed", log.topic_partition, action)
        return results

    # --- partitions --------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> UnifiedLog:
        """The log of ``tp``. Raises UnknownTopicOrPartitionError when this broker has no such
        partition and KafkaStorageError when its log directory is offline.

        Asked on every request: one dict lookup when the log is served (``_serving``)."""
        log = self._serving.get(tp)
        if log is not None:
            return log
        return self._get_log_not_serving(tp)

    def _serving_changed(self) -> None:
        """Number the change just made to ``_serving`` (after it: see ``serving_changes``).
        A fresh number each time, so that no race of two changes leaves one unseen."""
        self.serving_changes = next(self._serving_change_numbers)

    def _get_log_not_serving(self, tp: TopicPartition) -> UnifiedLog:
        """get_log for a partition not in ``_serving``: absent, offline, or dropped by a
        directory failure racing a registration (then it is served again)."""
        log = self._logs.get(tp)
        log_dir = log.log_dir if log is not None else self._offline_partitions.get(tp)
        if log_dir is None:
            raise UnknownTopicOrPartitionError(f"this broker has no partition {tp}")
        if log is None or self.failure_channel.is_offline(log_dir):
            raise KafkaStorageError(
                f"partition {tp} is offline: its log directory {log_dir} failed "
                f"({self.failure_channel.reason(log_dir)})"
            )
        with self._lock:
            if self._logs.get(tp) is log:
                self._serve_locked(log)
        return log

    def all_logs(self) -> list[UnifiedLog]:
        """Every log in an online directory."""
        with self._lock:
            logs = list(self._logs.values())
        return [log for log in logs if not self.failure_channel.is_offline(log.log_dir)]

    def describe_partition(self, tp: TopicPartition) -> PartitionDescription:
        """Offsets, size and directory of ``tp``; raises as :meth:`get_log` does."""
        return PartitionDescription.of(self.get_log(tp))

    def describe_log_dirs(self) -> list[LogDirDescription]:
        """Every log directory, in configuration order: its partitions' sizes and its
        volume's space, or offline (DescribeLogDirs). Touches the disk (``statvfs``)."""
        online = self._logs_by_dir(self._online_dirs())
        return [
            LogDirDescription.of(log_dir, online[log_dir])
            if log_dir in online
            else LogDirDescription.offline(log_dir)
            for log_dir in self.log_dirs
        ]

    @property
    def offline_log_dirs(self) -> frozenset[Path]:
        return self.failure_channel.offline_log_dirs

    def _online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    def _logs_by_dir(self, log_dirs: Iterable[Path]) -> dict[Path, list[UnifiedLog]]:
        """The logs in each of ``log_dirs`` (every one of them a key, maybe with no logs)."""
        by_dir: dict[Path, list[UnifiedLog]] = {log_dir: [] for log_dir in log_dirs}
        with self._lock:
            for log in self._logs.values():
                if log.log_dir in by_dir:
                    by_dir[log.log_dir].append(log)
        return by_dir

    # --- topics and partitions ---------------------------------------------------------------

    def topics(self) -> list[str]:
        """Every topic with a partition on this broker, offline ones included."""
        with self._lock:
            return sorted(self._partitions_by_topic)

    def partitions(self, topic: str) -> list[TopicPartition]:
        """The partitions of ``topic`` on this broker (empty when it has none)."""
        with self._lock:
            return sorted(self._partitions_by_topic.get(topic, ()))

    @property
    def topic_configs(self) -> TopicConfigStore:
        """Every topic's config overrides, kept in the log directories."""
        return self._topic_configs

    def topic_config(self, topic: str) -> LogConfig:
        """The settings ``topic``'s logs run with: the broker defaults and its overrides."""
        return LogConfig.from_stored(self._topic_configs.overrides(topic), self._default_log_config)

    def create_logs(
        self,
        creation: PendingPartitionCreation,
        config: LogConfig,
        aborted: Callable[[], bool] = lambda: False,
    ) -> list[UnifiedLog]:
        """Create the empty logs of ``creation``'s partitions, all or nothing, even across a
        crash (see :mod:`odradek.storage.pending_partition_creation`); the logs become visible
        together once all exist. Each goes to the online directory with the fewest partitions.

        The cost is O(partitions created), whatever the number of partitions already here.
        Raises KafkaStorageError when a directory fails, or when ``aborted()`` turns true or
        the broker shuts down meanwhile; nothing is created then.
        """
        with self._lock:
            if self._shutting_down:
                raise KafkaStorageError(f"cannot create {creation.topic}: the broker is stopping")
            self._creations_in_flight += 1
        try:
            return self._create_logs(creation, config, aborted)
        finally:
            with self._creations_done:
                self._creations_in_flight -= 1
                self._creations_done.notify_all()

    def _create_logs(
        self, creation: PendingPartitionCreation, config: LogConfig, aborted: Callable[[], bool]
    ) -> list[UnifiedLog]:
        topic = creation.topic
        marked = list(self._for_each_online_dir("record a pending creation in", creation.write))
        if not marked:
            raise KafkaStorageError(f"cannot create {topic}: no online log directory")
        made: list[Path] = []
        logs: list[UnifiedLog] = []
        try:
            for tp, log_dir in self._placement(creation.partitions).items():
                if aborted() or self._shutting_down:
                    raise KafkaStorageError(
                        f"creation of {topic} abandoned: the broker is stopping"
                    )
                logs.append(self._create_log(tp, log_dir, config, made))
            for log_dir in {directory.parent for directory in made}:
                try:
                    fsync_directory(log_dir)  # the new partition directories survive a power cut
                except OSError as error:
                    self._take_offline(
                        log_dir, f"cannot create partitions of {topic}: {error}", error
                    )
                    raise KafkaStorageError(
                        f"cannot create {topic} in {log_dir}: {error}"
                    ) from error
            with self._lock:
                if self._shutting_down:
                    raise KafkaStorageError(
                        f"creation of {topic} abandoned: the broker is stopping"
                    )
                if any(log.topic_partition in self._logs for log in logs):
                    raise KafkaStorageError(f"partitions of {topic} appeared meanwhile")
                for log in logs:  # all visible at once
                    self._register_locked(log)
        except BaseException:
            if self._roll_back(creation, logs, made):
                self._for_each_online_dir("remove a creation marker from", creation.remove, marked)
            raise
        action = "remove a creation marker from"
        removed = self._for_each_online_dir(action, creation.remove, marked)
        if len(removed) != len(marked):  # a marker left behind rolls the creation back at start-up
            raise KafkaStorageError(
                f"cannot finish creating {topic}: its creation marker could not be removed"
            )
        logger.info(
            "created %d partitions of %s: %s",
            len(logs),
            topic,
            describe_partitions([log.topic_partition for log in logs]),
        )
        return logs

    def _create_log(
        self, tp: TopicPartition, log_dir: Path, config: LogConfig, made: list[Path]
    ) -> UnifiedLog:
        """The new log of ``tp`` in ``log_dir``; its directory is added to ``made`` once made."""
        directory = log_dir / tp.dir_name
        try:
            directory.mkdir()
            made.append(directory)
            return UnifiedLog.create(
                directory,
                config,
                self.scheduler,
                clock=self._clock,
                producer_id_expiration_ms=self._config.producer_id_expiration_ms,
            )
        except FileExistsError:
            raise KafkaStorageError(
                f"cannot create partition {tp}: {directory} exists but is not a log of this "
                f"broker; remove it"
            ) from None
        except OSError as error:
            self._take_offline(log_dir, f"cannot create partition {tp}: {error}", error)
            raise KafkaStorageError(
                f"cannot create partition {tp} in {log_dir}: {error}"
            ) from error

    def _roll_back(
        self, creation: PendingPartitionCreation, logs: list[UnifiedLog], made: list[Path]
    ) -> bool:
        """Undo an unfinished creation: close its logs, remove its directories; False (the
        marker stays for the next start-up to finish the job) when a removal fails."""
        for log in logs:
            _close_quietly(log, log.close_handlers)
        removed = True
        for directory in made:
            try:
                shutil.rmtree(directory)
            except OSError as error:
                logger.warning("[%s] cannot remove %s: %s", creation.topic, directory, error)
                removed = False
        logger.info(
            "rolled back the creation of %d partitions of %s",
            creation.partition_count,
            creation.topic,
        )
        return removed

    def _placement(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Path]:
        """A directory for each new partition: the online one with the fewest partitions,
        counting those placed before it (the first listed on a tie)."""
        online = self._online_dirs()
        if not online:
            raise KafkaStorageError("no online log directory to place a new partition in")
        with self._lock:
            counts = {log_dir: self._partition_counts[log_dir] for log_dir in online}
        placement = {}
        for tp in partitions:
            log_dir = min(online, key=counts.__getitem__)
            counts[log_dir] += 1
            placement[tp] = log_dir
        return placement

    def _roll_back_pending_creations(self) -> None:
        """Remove what unfinished creations left (before the logs are loaded).

        A creation's partitions were never visible before its marker went, so none holds a
        record; one that does means the creation finished and only its marker's removal failed
        (an I/O error took the directory offline): then the marker alone goes.
        """
        pending = self._for_each_online_dir(
            "read the creation markers of", PendingPartitionCreation.read_all
        )
        creations = {creation for found in pending.values() for creation in found}
        for creation in sorted(creations, key=attrgetter("creation_id")):
            written = self._for_each_online_dir(
                "inspect a pending creation in", lambda d, c=creation: _holds_records(d, c)
            )
            if any(written.values()):
                logger.warning(
                    "keeping the %d partitions of %s a creation marker names: they hold records, "
                    "so their creation had finished",
                    creation.partition_count,
                    creation.topic,
                )
            else:
                logger.warning(
                    "rolling back the unfinished creation of %d partitions of %s",
                    creation.partition_count,
                    creation.topic,
                )
                self._for_each_online_dir(
                    "roll back a creation in", lambda d, c=creation: _remove_partitions(d, c)
                )
                if creation.new_topic:
                    self._topic_configs.remove(creation.topic)
            self._for_each_online_dir("remove a creation marker from", creation.remove)

    def _forget_configs_of_absent_topics(self) -> None:
        """Drop the overrides of topics without a partition, which a crash between a topic's
        config change and its partitions' creation or deletion leaves; only while every log
        directory is online (an offline one may hold the topic)."""
        if self.failure_channel.offline_log_dirs:
            return
        with self._lock:
            absent = self._topic_configs.topics - self._partitions_by_topic.keys()
        for topic in sorted(absent):
            logger.info("forgetting the config overrides of %s: it has no partition", topic)
            self._topic_configs.remove(topic)

    def delete_logs(self, partitions: Iterable[TopicPartition]) -> None:
        """Delete the logs of ``partitions``: their directories are renamed
        ``<dir>.<id>-delete`` at once and removed after ``file.delete.delay.ms`` (so in-flight
        reads can finish). Raises UnknownTopicOrPartitionError, or KafkaStorageError when one
        is offline; nothing is deleted then."""
        logs = [self.get_log(tp) for tp in partitions]
        if self.cleaner is not None:
            for log in logs:
                self.cleaner.abort_cleaning(log.topic_partition)
        with self._lock:
            for log in logs:
                self._unregister_locked(log)
        for log in logs:
            self._rename_for_deletion(log)
        for log_dir in {log.log_dir for log in logs}:
            for file_name in LOG_CHECKPOINTS:
                self._write_checkpoints(file_name, [log_dir])

    def _rename_for_deletion(self, log: UnifiedLog) -> None:
        deleted_dir = log.dir.with_name(_delete_dir_name(log.topic_partition))
        try:
            os.rename(log.dir, deleted_dir)
            fsync_directory(log.log_dir)
        except OSError as error:
            self._take_offline(log.log_dir, f"cannot rename {log.dir} for deletion: {error}", error)
            with self._lock:
                self._offline_partitions[log.topic_partition] = log.log_dir
                self._index_locked(log.topic_partition)
            _close_quietly(log, log.close_handlers)
            return
        log.stop_flushes()  # its files' paths are gone
        logger.debug("[%s] renamed to %s for deletion", log.topic_partition, deleted_dir.name)
        self._schedule_log_dir_removal(deleted_dir, log, log.config.file_delete_delay_ms)

    def _schedule_log_dir_removal(
        self, directory: Path, log: UnifiedLog | None, delay_ms: int
    ) -> None:
        tp = TopicPartition.from_dir_name(directory.name)

        def remove() -> None:
            if log is not None:
                log.close_handlers()
            try:
                shutil.rmtree(directory)
                logger.debug("[%s] removed the deleted partition's directory %s", tp, directory)
            except OSError as error:
                logger.warning("[%s] cannot remove %s: %s", tp, directory, error)

        self.scheduler.schedule(f"kafka-delete-logs-{directory.name}", remove, delay_ms=delay_ms)

    # --- failures ----------------------------------------------------------------------------

    def _on_log_io_error(self, log: UnifiedLog, error: OSError) -> None:
        message = f"I/O error in partition {log.topic_partition}: {error}"
        self._take_offline(log.log_dir, message, error)

    def _take_offline(self, log_dir: Path, message: str, error: BaseException) -> None:
        """Report ``log_dir`` failed. Out of descriptors it stays online (the failure channel
        says why), except while starting: a directory not locked, or a partition not loaded,
        for want of a descriptor must stop the start-up, not be skipped."""
        if self._starting and is_descriptor_exhaustion(error):
            raise KafkaStorageError(
                f"{message}: out of file descriptors while starting; raise the limit "
                f"(ulimit -n, LimitNOFILE) and start again"
            ) from error
        self.failure_channel.maybe_add_offline_log_dir(log_dir, message, error)

    def _on_log_dir_offline(self, log_dir: Path) -> None:
        """Stop serving the failed directory's logs at once, and close them on a scheduler
        thread: the reporter may hold a UnifiedLog's lock (or this manager's), and closing other
        logs from there could deadlock."""
        for log in list(self._logs.values()):
            if log.log_dir == log_dir and self._serving.get(log.topic_partition) is log:
                self._serving.pop(log.topic_partition, None)
        self._serving_changed()
        self.scheduler.schedule(f"log-dir-offline-{log_dir}", lambda: self._close_logs_in(log_dir))
        if self.cleaner is not None:
            self.cleaner.handle_log_dir_failure(log_dir)

    def _close_logs_in(self, log_dir: Path) -> None:
        with self._lock:
            logs = [log for log in self._logs.values() if log.log_dir == log_dir]
            for log in logs:
                del self._logs[log.topic_partition]
                self._serving.pop(log.topic_partition, None)
                self._offline_partitions[log.topic_partition] = log_dir
            self._serving_changed()
            self._partition_counts[log_dir] = 0
        for log in logs:
            _close_quietly(log, log.close_handlers)
        logger.error(
            "log directory %s is offline: %s unavailable",
            log_dir,
            describe_partitions([log.topic_partition for log in logs]),
        )

    def _for_each_online_dir(
        self,
        action: str,
        function: Callable[[Path], T],
        log_dirs: Iterable[Path] | None = None,
    ) -> dict[Path, T]:
        """``function(log_dir)`` for each online directory (of ``log_dirs``, default all); an
        OSError takes that directory offline."""
        results = {}
        for log_dir in self._online_dirs() if log_dirs is None else log_dirs:
            if self.failure_channel.is_offline(log_dir):
                continue
            try:
                results[log_dir] = function(log_dir)
            except OSError as error:
                self._take_offline(log_dir, f"cannot {action} it: {error}", error)
        return results

    # --- shutdown ----------------------------------------------------------------------------

    def shutdown(self, creation_timeout_s: float = CREATION_ABORT_TIMEOUT_S) -> None:
        """Abandon unfinished creations (waiting at most ``creation_timeout_s`` for them to
        roll back), stop the background tasks, flush every log, write the checkpoints, close
        the logs, write the clean-shutdown markers and release the locks (design §12).

        A creation still running after the wait leaves every directory without its
        clean-shutdown marker: the next start-up recovers and rolls the creation back.
        """
        logger.info("shutting down the log manager")
        with self._creations_done:
            self._shutting_down = True
            creations_finished = self._creations_done.wait_for(
                lambda: self._creations_in_flight == 0, creation_timeout_s
            )
        if not creations_finished:
            logger.warning(
                "a topic creation is still running after %.0f s: no clean-shutdown marker is "
                "written, the next start-up rolls it back",
                creation_timeout_s,
            )
        for task in self._tasks:
            task.cancel()
        self.scheduler.shutdown(run_pending_one_offs=True)
        by_dir = self._logs_by_dir(self.log_dirs)
        clean = [creations_finished] * len(by_dir)
        with ThreadPoolExecutor(len(self.log_dirs), thread_name_prefix="log-shutdown") as pool:
            list(pool.map(self._shut_down_log_dir, by_dir, by_dir.values(), clean))
        self._release_locks()
        logger.info("log manager shut down")

    def _shut_down_log_dir(self, log_dir: Path, logs: list[UnifiedLog], clean: bool) -> None:
        flushed = [self._flush_for_shutdown(log) for log in logs]
        if self.failure_channel.is_offline(log_dir):
            for log in logs:
                _close_quietly(log, log.close_handlers)
            return
        for file_name in LOG_CHECKPOINTS:
            self._write_checkpoints(file_name, [log_dir])
        for log in logs:
            _close_quietly(log, log.close)
        if clean and all(flushed):
            self._for_each_online_dir(
                "write the clean-shutdown marker in",
                lambda d: write_atomically(d / CLEAN_SHUTDOWN_FILE_NAME, b""),
                [log_dir],
            )

    def _flush_for_shutdown(self, log: UnifiedLog) -> bool:
        if self.failure_channel.is_offline(log.log_dir):
            return False
        try:
            log.flush()
            log.write_leader_epochs()  # a clean start recovers nothing, so reassigns no epoch
            return True
        except KafkaStorageError as error:
            logger.error("[%s] flush at shutdown failed: %s", log.topic_partition, error)
            return False

    def _release_locks(self) -> None:
        for lock in self._log_dir_locks:
            lock.release()
        self._log_dir_locks.clear()


def _distinct_log_dirs(paths: Iterable[Path]) -> tuple[Path, ...]:
    """Absolute log directories; a directory listed twice is a config error."""
    log_dirs = [path.resolve() for path in paths]
    duplicates = sorted({str(d) for d in log_dirs if log_dirs.count(d) > 1})
    if duplicates:
        raise InvalidConfigError(f"log.dirs lists {', '.join(duplicates)} more than once")
    return tuple(log_dirs)


def _delete_dir_name(tp: TopicPartition) -> str:
    """``<topic>-<partition>.<id>-delete``, the topic cut short if the name would be too long."""
    suffix = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return tp.topic[: MAX_FILE_NAME_LENGTH - len(suffix)] + suffix


def _holds_records(log_dir: Path, creation: PendingPartitionCreation) -> bool:
    """Whether a partition of ``creation`` in ``log_dir`` has a non-empty segment."""
    for tp in creation.partitions:
        directory = log_dir / tp.dir_name
        if directory.is_dir() and any(
            path.stat().st_size for path in directory.glob(f"*{LOG_FILE_SUFFIX}")
        ):
            return True
    return False


def _remove_partitions(log_dir: Path, creation: PendingPartitionCreation) -> None:
    """Remove the directories of ``creation``'s partitions from ``log_dir``. Raises OSError."""
    for tp in creation.partitions:
        directory = log_dir / tp.dir_name
        shutil.rmtree(directory, ignore_errors=True)
        if directory.exists():
            raise OSError(f"cannot remove {directory}")
    fsync_directory(log_dir)


def _close_quietly(log: UnifiedLog, close: Callable[[], None]) -> None:
    try:
        close()
    except OSError as error:
        logger.warning("[%s] closing the log failed: %s", log.topic_partition, error)


def _remove_clean_shutdown_marker(log_dir: Path) -> None:
    """Durability point: the marker's removal is durable before any write it would hide from
    recovery after a power cut (an unlink, like a rename, lasts only once its directory is
    fsynced)."""
    marker = log_dir / CLEAN_SHUTDOWN_FILE_NAME
    if marker.exists():
        marker.unlink(missing_ok=True)
        fsync_directory(log_dir)


def _create_log_dir(log_dir: Path) -> None:
    """Durability point: a log directory created here has a durable entry in its parent."""
    if not log_dir.is_dir():
        log_dir.mkdir(parents=True, exist_ok=True)
        fsync_directory(log_dir.parent)
