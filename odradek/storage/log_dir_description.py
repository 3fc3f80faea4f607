"""LogDirDescription: one log directory as Kafka's DescribeLogDirs reports it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class LogDirDescription:
    """A log directory: online or not, the size of each partition it holds, and the total and
    usable bytes of the volume it is on (-1 when offline or unreadable, as Kafka's default)."""

    log_dir: Path
    online: bool
    partition_sizes: tuple[tuple[TopicPartition, int], ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1

    @classmethod
    def offline(cls, log_dir: Path) -> LogDirDescription:
        return cls(log_dir, online=False)

    @classmethod
    def of(cls, log_dir: Path, logs: Iterable[UnifiedLog]) -> LogDirDescription:
        """The directory's ``logs`` and its volume's space (``statvfs``: it touches the disk,
        so call it off the event loop). Usable bytes are those an unprivileged writer may
        take (``f_bavail``), as Java's ``getUsableSpace`` counts them."""
        sizes = tuple(sorted((log.topic_partition, log.size_in_bytes) for log in logs))
        try:
            volume = os.statvfs(log_dir)
        except OSError:
            return cls(log_dir, True, sizes)
        return cls(
            log_dir,
            True,
            sizes,
            total_bytes=volume.f_blocks * volume.f_frsize,
            usable_bytes=volume.f_bavail * volume.f_frsize,
        )
