"""LogRetention: what removes records from the start of a partition's log (design §10).

The decisions of Kafka's ``UnifiedLog.deleteOldSegments``: under cleanup.policy=delete, the
segments wholly older than retention.ms, then the oldest while the log is above
retention.bytes; under any policy, the segments wholly below the log start offset, which
DeleteRecords raises (``delete_records``, Kafka's ``maybeIncrementLogStartOffset``). Each rule
is a segment predicate; the segments it allows are deleted under the log's lock (Kafka's
``deleteSegments``: never the active segment's records at or above the high watermark,
LocalLog's ``deletable_segments``), and the log start offset, the HW, the leader epochs and the
producer snapshots follow the first segment left.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.clock import Clock
from odradek.errors import OffsetOutOfRangeError
from odradek.storage.local_log import SegmentPredicate
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_stats import (
    RETENTION_DELETED_BYTES,
    RETENTION_DELETED_SEGMENTS,
    RETENTION_LOG_START_OFFSET,
    RETENTION_SIZE,
    RETENTION_TIME,
)

if TYPE_CHECKING:
    from odradek.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)


class LogRetention:
    """The retention rules of one partition's log, applied to it."""

    def __init__(
        self,
        log: UnifiedLog,
        lock: threading.RLock,
        set_log_start_offset: Callable[[int], None],
        clock: Clock,
    ) -> None:
        self._log = log
        self._lock = lock  # the log's
        self._set_log_start_offset = set_log_start_offset  # the log's, unchecked
        self._clock = clock

    def delete_records(self, offset: int) -> int:
        """Make every record below ``offset`` invisible (DeleteRecords); return the new low
        watermark. The segments wholly below it are deleted."""
        if offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete records of {self._log.topic_partition} below {offset}"
            )
        self.maybe_increment_log_start_offset(offset, "delete records")
        self.delete_log_start_offset_breached_segments()
        return self._log.log_start_offset

    def maybe_increment_log_start_offset(self, new_log_start_offset: int, reason: str) -> bool:
        """Raise the log start offset (never lowers it, nor raises it above the HW); True
        when it moved."""
        log = self._log
        with self._lock:
            high_watermark = log.high_watermark
            if new_log_start_offset > high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot raise the log start offset of {log.topic_partition} to "
                    f"{new_log_start_offset}: above the high watermark {high_watermark}"
                )
            log_start_offset = log.log_start_offset
            if new_log_start_offset <= log_start_offset:
                return False
            logger.info(
                "[%s] log start offset %d -> %d (%s)",
                log.topic_partition,
                log_start_offset,
                new_log_start_offset,
                reason,
            )
            self._set_log_start_offset(new_log_start_offset)
            log.leader_epochs.start_at(new_log_start_offset)
            return True

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
        return self.delete_segments_matching(
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

        return self.delete_segments_matching(
            over_size, RETENTION_SIZE, f"retention size {retention_bytes} bytes breached"
        )

    def delete_log_start_offset_breached_segments(self) -> int:
        log = self._log
        log_start_offset = log.log_start_offset
        return self.delete_segments_matching(
            lambda _segment, next_segment: (
                next_segment is not None and next_segment.base_offset <= log_start_offset
            ),
            RETENTION_LOG_START_OFFSET,
            f"below the log start offset {log_start_offset}",
        )

    def delete_segments_matching(self, predicate: SegmentPredicate, rule: str, reason: str) -> int:
        """Delete the segments retention ``rule`` (see log_stats) allows; ``reason`` is
        logged. Return how many."""
        log = self._log
        local = log.local_log
        segments = log.segments
        with self._lock:
            deletable = local.deletable_segments(predicate, log.high_watermark)
            if not deletable:
                return 0
            if len(deletable) == segments.number_of_segments:
                log.roll()
            local.remove_and_delete_segments(deletable, reason)
            RETENTION_DELETED_SEGMENTS.labels(rule).inc(len(deletable))
            RETENTION_DELETED_BYTES.labels(rule).inc(sum(s.size for s in deletable))
            first = segments.first_segment
            if first is not None and first.base_offset > log.log_start_offset:
                self._set_log_start_offset(first.base_offset)
                if log.high_watermark < first.base_offset:
                    log.update_high_watermark(first.base_offset)
                log.leader_epochs.start_at(first.base_offset)
            if first is not None:
                log.producer_state.delete_snapshots(below=first.base_offset)
            return len(deletable)
