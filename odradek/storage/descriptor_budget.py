"""DescriptorBudget: the broker's file descriptor limit against what it may need, for the
start-up log.

A broker holds a descriptor for each partition's active segment, a bounded number of idle
segment files and index maps (``IdleFileCache``), one per client connection, and a few of its
own (listeners, log directory locks, checkpoints being written). Running out fails appends and
rolls with a retriable error (the log directory stays online), so the limit is worth stating,
and a warning when it is too low.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

RESERVED_DESCRIPTORS = 64
"""Descriptors the broker needs whatever its data: standard streams, listeners, the metrics
endpoint, log directory locks, checkpoints and topic configs being written, the cleaner's
pipes, the event loop's own."""


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one, as the JVM does for Kafka; return the
    (soft, hard) limits now in force (-1 for unlimited)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # a hard limit the kernel caps lower (nr_open)
            pass
    return _finite(soft), _finite(hard)


def _finite(limit: int) -> int:
    return -1 if limit == resource.RLIM_INFINITY else limit


@dataclass(frozen=True)
class DescriptorBudget:
    """The descriptor limit and the broker's estimated need (see the module's docstring)."""

    soft_limit: int  # -1: unlimited
    hard_limit: int
    partitions: int
    segments: int
    idle_files: int  # the idle file cache's capacity
    connections: int  # max.connections

    @classmethod
    def current(
        cls, partitions: int, segments: int, idle_files: int, connections: int
    ) -> DescriptorBudget:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        return cls(_finite(soft), _finite(hard), partitions, segments, idle_files, connections)

    @property
    def open_idle_files(self) -> int:
        """At most this many inactive ``.log`` files and index maps (three files a segment)
        are open at once."""
        return min(self.idle_files, 3 * self.segments)

    @property
    def need(self) -> int:
        return self.partitions + self.open_idle_files + self.connections + RESERVED_DESCRIPTORS

    @property
    def exceeds_limit(self) -> bool:
        return 0 <= self.soft_limit < self.need

    def __str__(self) -> str:
        limit = "unlimited" if self.soft_limit < 0 else str(self.soft_limit)
        hard = "unlimited" if self.hard_limit < 0 else str(self.hard_limit)
        return (
            f"file descriptor limit {limit} (soft; hard {hard}); estimated need {self.need}: "
            f"{self.partitions} partitions' active segments, at most {self.open_idle_files} "
            f"idle segment files and index maps of {self.segments} segments, "
            f"{self.connections} connections (max.connections), {RESERVED_DESCRIPTORS} reserved"
        )
