"""LogRetention: which segments of a partition's log retention deletes (design §10).

The decisions of Kafka's ``UnifiedLog.deleteOldSegments``: under cleanup.policy=delete, the
segments wholly older than retention.ms, then the oldest while the log is above
retention.bytes; under any policy, the segments wholly below the log start offset (after
DeleteRecords). Each rule is a segment predicate; the log deletes the segments it allows
(``UnifiedLog.delete_segments_matching``: under its lock, never the active segment's records at
or above the high watermark).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.clock import Clock
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_stats import (
    RETENTION_LOG_START_OFFSET,
    RETENTION_SIZE,
    RETENTION_TIME,
)

if TYPE_CHECKING:
    from odradek.storage.unified_log import UnifiedLog


class LogRetention:
    """The retention rules of one partition's log, applied to it."""

    def __init__(self, log: UnifiedLog, clock: Clock) -> None:
        self._log = log
        self._clock = clock

    def delete_old_segments(self) -> int:
        """Apply the retention rules of the topic's cleanup.policy; return segments deleted.
        Each rule sees what the one before it left."""
        if self._log.config.delete:
            return (
                self.delete_retention_ms_breached_segments()
                + self.delete_retention_size_breached_segments()
                + self.delete_log_start_offset_breached_segments()
            )
        return self.delete_log_start_offset_breached_segments()

    def delete_retention_ms_breached_segments(self) -> int:
        log = self._log
        retention_ms = log.config.retention_ms
        if retention_ms < 0:
            return 0
        now_ms = self._clock.milliseconds()
        return log.delete_segments_matching(
            lambda segment, _next: now_ms - segment.largest_timestamp > retention_ms,
            RETENTION_TIME,
            f"retention time {retention_ms} ms breached",
        )

    def delete_retention_size_breached_segments(self) -> int:
        log = self._log
        retention_bytes = log.config.retention_bytes
        size = log.size_in_bytes
        if retention_bytes < 0 or size < retention_bytes:
            return 0
        excess = size - retention_bytes

        def over_size(segment: LogSegment, _next: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False

        return log.delete_segments_matching(
            over_size, RETENTION_SIZE, f"retention size {retention_bytes} bytes breached"
        )

    def delete_log_start_offset_breached_segments(self) -> int:
        log = self._log
        log_start_offset = log.log_start_offset
        return log.delete_segments_matching(
            lambda _segment, next_segment: (
                next_segment is not None and next_segment.base_offset <= log_start_offset
            ),
            RETENTION_LOG_START_OFFSET,
            f"below the log start offset {log_start_offset}",
        )
