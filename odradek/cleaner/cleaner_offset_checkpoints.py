"""CleanerOffsetCheckpoints: the ``cleaner-offset-checkpoint`` file of each log directory."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from odradek.storage.log import Log
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.topic_partition import TopicPartition

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


class CleanerOffsetCheckpoints:
    """A :class:`CleanerCheckpointStore` over the checkpoint files in the directories holding
    ``logs()``. An update rewrites each file it touches atomically, dropping the entries of
    partitions no longer there (deleted topics), as Kafka's ``updateCheckpoints`` does."""

    def __init__(self, logs: Callable[[], Iterable[Log]]) -> None:
        self._logs = logs
        self._lock = threading.Lock()

    def cleaner_offsets(self) -> dict[TopicPartition, int]:
        offsets: dict[TopicPartition, int] = {}
        for log_dir in {log.dir.parent for log in self._logs()}:
            offsets.update(_file(log_dir).read())
        return offsets

    def update_cleaner_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        directories = {log.topic_partition: log.dir.parent for log in self._logs()}
        by_dir: dict[Path, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, offset in offsets.items():
            if tp in directories:
                by_dir[directories[tp]][tp] = offset
        with self._lock:
            for log_dir, updates in by_dir.items():
                checkpoint = _file(log_dir)
                kept = {
                    tp: offset
                    for tp, offset in checkpoint.read().items()
                    if directories.get(tp) == log_dir
                }
                checkpoint.write({**kept, **updates})


def _file(log_dir: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
