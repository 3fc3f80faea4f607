"""LogLoadSummary: what loading the logs at start-up found and cost (for the log and metrics)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.storage.unified_log import UnifiedLog


@dataclass(frozen=True)
class LogLoadSummary:
    """Totals over every log loaded at start-up."""

    partitions: int
    segments: int
    recovered_segments: int
    recovered_bytes: int
    truncated_bytes: int
    seconds: float

    @classmethod
    def of(cls, logs: Iterable[UnifiedLog], seconds: float) -> LogLoadSummary:
        logs = list(logs)
        return cls(
            partitions=len(logs),
            segments=sum(log.number_of_segments for log in logs),
            recovered_segments=sum(log.load_summary.recovered_segments for log in logs),
            recovered_bytes=sum(log.load_summary.recovered_bytes for log in logs),
            truncated_bytes=sum(log.load_summary.truncated_bytes for log in logs),
            seconds=seconds,
        )

    def __str__(self) -> str:
        return (
            f"loaded {self.partitions} partitions with {self.segments} segments in "
            f"{self.seconds:.2f} s; recovered {self.recovered_segments} segments "
            f"({self.recovered_bytes} bytes scanned, {self.truncated_bytes} bytes truncated)"
        )
