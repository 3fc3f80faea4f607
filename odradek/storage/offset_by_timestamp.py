"""Offset by timestamp: what ListOffsets asks of a partition's log (Kafka's
``UnifiedLog.fetchOffsetByTimestamp`` and ``searchOffsetInLocalLog``).

The earliest offset (-2: the log start offset), the latest (-1: the log end, the HW for a
consumer, the last stable offset for a read_committed one), the record holding the largest
timestamp (-3), and the first record at or after the log start with a timestamp at or above a
target, searched for in the first segment whose largest timestamp reaches it (each segment's
time index and records: LogSegment.find_offset_by_timestamp).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.file_records import TimestampAndOffset
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_segments import LogSegments

if TYPE_CHECKING:
    from odradek.storage.unified_log import UnifiedLog


def fetch_offset_by_timestamp(
    log: UnifiedLog, target_timestamp: int, isolation: FetchIsolation
) -> TimestampAndOffset | None:
    """ListOffsets: earliest (-2), latest (-1: LEO, or HW for consumers), or the first record
    at or after the log start with timestamp >= the target, searched for (as Kafka's
    searchOffsetInLocalLog does) in the first segment whose largest timestamp reaches the
    target alone: None when no record is that new, and None when that segment's records that
    new all lie below the log start (after DeleteRecords), though a later segment may hold
    one."""
    if target_timestamp == EARLIEST_TIMESTAMP:
        return TimestampAndOffset(-1, log.log_start_offset)
    if target_timestamp == LATEST_TIMESTAMP:
        if isolation is FetchIsolation.HIGH_WATERMARK:
            latest = log.high_watermark
        elif isolation is FetchIsolation.TXN_COMMITTED:
            latest = log.last_stable_offset
        else:
            latest = log.log_end_offset
        return TimestampAndOffset(-1, latest)
    log_start_offset = log.log_start_offset
    for segment in log.segments.values():
        if segment.largest_timestamp >= target_timestamp:
            return segment.find_offset_by_timestamp(target_timestamp, log_start_offset)
    return None


def max_timestamp_record(segments: LogSegments) -> TimestampAndOffset | None:
    """ListOffsets MAX_TIMESTAMP (-3): the first record holding the largest timestamp of the
    ``segments``, by its own offset (as Kafka answers since 3.8), not the last offset of its
    batch that the time index keeps; None without records."""
    best: tuple[LogSegment, TimestampAndOffset] | None = None
    for segment in segments.values():
        found = segment.max_timestamp_and_offset_so_far
        if found.timestamp >= 0 and (best is None or found.timestamp > best[1].timestamp):
            best = (segment, found)
    if best is None:
        return None
    segment, found = best
    return segment.find_offset_by_timestamp(found.timestamp, segment.base_offset) or found
