"""CleanerOffsetCheckpoints: the ``cleaner-offset-checkpoint`` file of each log directory, and
its only writer (Kafka's ``LogCleanerManager`` keeps these files the same way).

The file records, for each compacted partition of the directory, its first dirty offset: where
the next cleaning run starts. The LogManager never writes it; it asks the cleaner to forget a
deleted partition (``LogCleaner.abort_cleaning``), which rewrites the file without it.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from odradek.errors import KafkaStorageError
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"

DirFailureHandler = Callable[[Path, str, BaseException], object]
"""Called with (log directory, message, error) when a checkpoint cannot be written there
(the broker passes ``LogDirFailureChannel.maybe_add_offline_log_dir``)."""


class CleanerOffsetCheckpoints:
    """The checkpoint files in the directories holding ``logs()``, as one map.

    Each directory's file is read once, on first use, and then kept in memory: this class is
    its only writer. An update rewrites each file it touches atomically, dropping the entries
    of partitions no longer there (deleted topics), as Kafka's ``updateCheckpoints`` does. A
    write that fails reports the directory to ``on_dir_failure`` and raises KafkaStorageError.
    Thread-safe.
    """

    def __init__(
        self,
        logs: Callable[[], Iterable[UnifiedLog]],
        on_dir_failure: DirFailureHandler | None = None,
    ) -> None:
        self._logs = logs
        self._on_dir_failure = on_dir_failure
        self._lock = threading.Lock()
        self._offsets: dict[Path, dict[TopicPartition, int]] = {}

    def cleaner_offsets(self) -> dict[TopicPartition, int]:
        """Every partition's checkpointed first dirty offset, over the directories of the
        current logs."""
        offsets: dict[TopicPartition, int] = {}
        with self._lock:
            for log_dir in {log.dir.parent for log in self._logs()}:
                offsets.update(self._offsets_in(log_dir))
        return offsets

    def update_cleaner_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Set these partitions' first dirty offsets, each in its log's directory; partitions
        that are not (or no longer) among the logs are skipped."""
        self._update(offsets, ())

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        """Forget ``tps`` (their topic is being deleted), rewriting the files that held them."""
        self._update({}, frozenset(tps))

    def forget_dir(self, log_dir: Path) -> None:
        """``log_dir`` went offline: drop what was read from it (it is read again if it comes
        back after a restart)."""
        with self._lock:
            self._offsets.pop(log_dir, None)

    def _update(
        self, offsets: Mapping[TopicPartition, int], removed: frozenset[TopicPartition]
    ) -> None:
        directories = {log.topic_partition: log.dir.parent for log in self._logs()}
        by_dir: dict[Path, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, offset in offsets.items():
            if tp in directories:
                by_dir[directories[tp]][tp] = offset
        with self._lock:
            touched = set(by_dir)
            # The directories of removed partitions still among the logs, read or not yet.
            touched.update(directories[tp] for tp in removed if tp in directories)
            touched.update(d for d, held in self._offsets.items() if removed & held.keys())
            for log_dir in touched:
                current = self._offsets_in(log_dir)
                kept = {
                    tp: offset
                    for tp, offset in current.items()
                    if directories.get(tp) == log_dir and tp not in removed
                }
                kept.update(by_dir.get(log_dir, {}))
                self._write(log_dir, kept)
                self._offsets[log_dir] = kept

    def _offsets_in(self, log_dir: Path) -> dict[TopicPartition, int]:
        """``log_dir``'s offsets, its file read on first use; call with the lock held."""
        offsets = self._offsets.get(log_dir)
        if offsets is None:
            offsets = self._offsets[log_dir] = _file(log_dir).read()
        return offsets

    def _write(self, log_dir: Path, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            _file(log_dir).write(offsets)
        except OSError as error:
            message = f"cannot write {CLEANER_OFFSET_CHECKPOINT_FILE}: {error}"
            if self._on_dir_failure is not None:
                self._on_dir_failure(log_dir, message, error)
            else:
                logger.error("log directory %s: %s", log_dir, message)
            raise KafkaStorageError(f"log directory {log_dir}: {message}") from error


def _file(log_dir: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
