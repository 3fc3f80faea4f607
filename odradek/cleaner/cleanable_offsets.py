"""Which offsets of a compacted log may be cleaned now, and how overdue its cleaning is
(Kafka's ``LogCleanerManager.cleanableOffsets`` and ``maxCompactionDelay``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from odradek.storage.log_segment import LogSegment
from odradek.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetsToClean:
    """The dirty section ``[first_dirty_offset, first_uncleanable_dirty_offset)``;
    ``force_update_checkpoint`` when the checkpointed first dirty offset was unusable."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def cleanable_offsets(
    log: UnifiedLog, last_clean_offset: int | None, now_ms: int
) -> OffsetsToClean:
    """The dirty section of ``log`` given its checkpointed first dirty offset (design §11).

    It starts at the checkpoint, reset to the log start offset when it lies outside the log
    (below it after retention, past the end after a truncation), and stops at the first of:
    the active segment, the last stable offset (never past an open transaction's first
    record, as Kafka's), and the first segment holding a record younger than
    ``min.compaction.lag.ms``.
    """
    first_dirty_offset, force_update = _first_dirty_offset(log, last_clean_offset)
    uncleanable = min(log.last_stable_offset, log.active_segment.base_offset)
    lag_ms = max(log.config.min_compaction_lag_ms, 0)
    if lag_ms > 0:
        for segment in log.segments.values_between(first_dirty_offset, uncleanable):
            if segment.largest_timestamp > now_ms - lag_ms:
                uncleanable = segment.base_offset
                break
    return OffsetsToClean(first_dirty_offset, max(first_dirty_offset, uncleanable), force_update)


def _first_dirty_offset(log: UnifiedLog, last_clean_offset: int | None) -> tuple[int, bool]:
    log_start_offset = log.log_start_offset
    if last_clean_offset is None:
        return log_start_offset, False
    if last_clean_offset < log_start_offset:
        if not log.config.delete:  # with delete too, retention moves the start all the time
            logger.warning(
                "[%s] resetting the first dirty offset to the log start offset %d: the "
                "checkpointed %d is below it",
                log.topic_partition,
                log_start_offset,
                last_clean_offset,
            )
        return log_start_offset, True
    if last_clean_offset > log.log_end_offset:
        logger.warning(
            "[%s] resetting the first dirty offset to the log start offset %d: the "
            "checkpointed %d is past the log end offset %d",
            log.topic_partition,
            log_start_offset,
            last_clean_offset,
            log.log_end_offset,
        )
        return log_start_offset, True
    return last_clean_offset, False


def max_compaction_delay(log: UnifiedLog, first_dirty_offset: int, now_ms: int) -> int:
    """How far past ``max.compaction.lag.ms`` the oldest dirty segment is, by its first batch's
    timestamp (0 when none is): above 0 the log is cleaned whatever its dirty ratio."""
    clean_until_ms = now_ms - max(log.config.max_compaction_lag_ms, 0)
    if clean_until_ms <= 0:
        return 0
    dirty = log.segments.values_between(first_dirty_offset, log.active_segment.base_offset)
    timestamps = [ts for segment in dirty if (ts := _first_batch_timestamp(segment)) > 0]
    earliest = min(timestamps, default=clean_until_ms)
    return max(clean_until_ms - earliest, 0)


def _first_batch_timestamp(segment: LogSegment) -> int:
    """The max timestamp of the segment's first batch, -1 when it has none."""
    first = next(segment.log.batch_headers(0), None)
    return first[1].max_timestamp if first else -1
