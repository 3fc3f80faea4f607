"""LogAppender: a partition log's general append, validation above the segment (Kafka's
UnifiedLog.append: LogValidator, the producer state's checks, then LogSegment; design §4).

What UnifiedLog.append does with any request its one fast path (the active segment's append
state) declines: LogValidator's checks and offsets from the log end; the producer state's
sequence checks (a retried batch of an idempotent producer is answered with its first
append's offsets and nothing is written); the write to the active segment, rolled first when
the records do not fit; then the producer state's update. The log end, the HW and the leader
epochs an append moves are UnifiedLog's to set, for either path.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.clock import Clock
from odradek.errors import RecordListTooLargeError
from odradek.record.record_batch import PRODUCER_ID_OFFSET
from odradek.storage.local_log import LocalLog
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.log_segment import LogSegment
from odradek.storage.log_validator import validate_and_assign_offsets
from odradek.storage.producer_append_info import ProducerAppendInfo

if TYPE_CHECKING:
    from odradek.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)

_new_tuple = tuple.__new__
"""Makes a named tuple from a tuple of its fields without its Python ``__new__`` (LogAppendInfo,
LogOffsetMetadata), at half the cost."""


class LogAppender:
    """Validates, checks against the producer state, and writes one partition's appends."""

    def __init__(self, log: UnifiedLog, local: LocalLog, clock: Clock) -> None:
        self._log = log
        self._local = local
        self._clock = clock

    def validate_and_write(
        self, records: bytes | bytearray | memoryview, leader_epoch: int
    ) -> tuple[LogAppendInfo, LogOffsetMetadata | None]:
        """The general append, under the log's lock: any request, every rule checked, a roll
        when due. What it wrote and the new log end; for a retried batch of an idempotent
        producer, its first append's offsets and None (nothing is written)."""
        log = self._log
        now_ms = self._clock.milliseconds()
        config = log.config
        validated = validate_and_assign_offsets(
            records,
            next_offset=self._local.next_offset_metadata.message_offset,
            config=config,
            now_ms=now_ms,
            partition_leader_epoch=leader_epoch,
            topic_partition=log.topic_partition,
        )
        producer_state = log.producer_state
        producer_table = producer_state.table
        producer_append: ProducerAppendInfo | None = None
        noted = False
        # The sign bit of the first batch's producer id: -1 (no producer) has it set, so a
        # plain one-batch append pays one byte read for idempotence. The common idempotent
        # request, one batch going on where its producer left off, is one call to the
        # producer table (and one more once written); the others get every rule checked.
        # (The table declines a batch that opens a transaction or a plain one inside one.)
        records = validated.records
        if validated.batch_count > 1 or not records[PRODUCER_ID_OFFSET] & 0x80:
            noted = producer_table.try_next(records)
            if not noted:
                producer_append = producer_state.analyze(validated.records)
                duplicate = producer_append.duplicate
                if duplicate is not None:
                    logger.debug(
                        "[%s] retried batch %s acknowledged again", log.topic_partition, duplicate
                    )
                    info = LogAppendInfo.of_duplicate(
                        duplicate, log.log_start_offset, config.log_append_time
                    )
                    return info, None
        size_in_bytes, last_offset = validated.size_in_bytes, validated.last_offset
        if size_in_bytes > config.segment_bytes:
            raise RecordListTooLargeError(
                f"append of {size_in_bytes} bytes to {log.topic_partition} does not "
                f"fit a segment of segment.bytes={config.segment_bytes}"
            )
        try:
            # Validated above the segment (LogValidator), written by it.
            segment = self.write_to_active_segment(
                last_offset, validated.max_timestamp, validated.records, now_ms
            )
            segment_size = segment.log.size_in_bytes
        except OSError as error:
            raise self._local.storage_error("append", error) from error
        if noted:
            producer_table.commit_next()
        elif producer_append is not None:
            producer_state.update(producer_append)
        info = _new_tuple(
            LogAppendInfo,
            (
                validated.first_offset,
                last_offset,
                validated.max_timestamp,
                validated.offset_of_max_timestamp,
                now_ms if config.log_append_time else -1,  # log_append_time_ms
                log.log_start_offset,
                validated.record_count,
                validated.batch_count,
                size_in_bytes,  # valid_bytes
            ),
        )
        return info, _new_tuple(
            LogOffsetMetadata, (last_offset + 1, segment.base_offset, segment_size)
        )

    def write_to_active_segment(
        self, last_offset: int, max_timestamp: int, records: bytes | memoryview, now_ms: int
    ) -> LogSegment:
        """Write validated ``records`` (offsets up to ``last_offset``) to the active segment,
        rolling first when they do not fit (LogSegment.try_append's check); return the
        segment written to. Under the log's lock; raises OSError."""
        segment = self._local.segments.last  # (a log always has its active segment)
        if not segment.try_append(self._log.config, last_offset, max_timestamp, records, now_ms):
            segment = self._log.roll()
            segment.append(last_offset, records)
        return segment
