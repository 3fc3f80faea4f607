"""LogTransactions: the transactional side of a partition's log (Kafka's UnifiedLog appending
with origin COORDINATOR, its ``firstUnstableOffset`` and ``lastStableOffset``, and its
read_committed reads; design §6, 7).

The COMMIT and ABORT markers the transaction coordinator writes (an abort recorded in the
segment's .txnindex with the last stable offset it leaves), the first unstable offset and the
last stable offset it gives read_committed consumers, and their reads: up to the last stable
offset, with the aborted transactions overlapping the records found. Which transactions are
open is the ProducerStateManager's to say; reading segments and their .txnindex files is
LocalLog's.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from odradek.clock import Clock
from odradek.record.control_record import EndTransactionMarker
from odradek.storage.fetch_data_info import FetchDataInfo, FetchIsolation
from odradek.storage.high_watermark import HighWatermark
from odradek.storage.local_log import LocalLog
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.log_appender import LogAppender
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.transaction_index import AbortedTxn

if TYPE_CHECKING:
    from odradek.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)


class LogTransactions:
    """The end-of-transaction markers, last stable offset and read_committed reads of one
    partition's log."""

    def __init__(
        self,
        log: UnifiedLog,
        appender: LogAppender,
        local: LocalLog,
        high_watermark: HighWatermark,
        lock: threading.RLock,
        clock: Clock,
    ) -> None:
        self._log = log
        self._appender = appender
        self._local = local
        self._high_watermark = high_watermark
        self._lock = lock  # the log's
        self._clock = clock
        # The first unstable offset with its position, as last resolved for a read_committed
        # read (replaced whole; see last_stable_offset_metadata).
        self._first_unstable_metadata = LogOffsetMetadata(-1)

    def positions_moved(self) -> None:
        """The segments were truncated or replaced: a position resolved before may be gone."""
        self._first_unstable_metadata = LogOffsetMetadata(-1)

    def append_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        leader_epoch: int,
    ) -> LogAppendInfo:
        """Append the COMMIT or ABORT marker the transaction coordinator writes for
        ``producer_id`` (Kafka's append with origin COORDINATOR; a client's Produce never
        writes one), under the log's lock: the producer's open transaction ends, an abort is
        recorded in the segment's .txnindex with the last stable offset it leaves, and the
        transaction stays unstable until the high watermark passes the marker.

        Raises InvalidProducerEpochError (an epoch older than the producer's) or
        TransactionCoordinatorFencedError (a coordinator epoch older than the last marker's).
        """
        log = self._log
        local = self._local
        marker = EndTransactionMarker(committed, coordinator_epoch)
        with self._lock:
            now_ms = self._clock.milliseconds()
            offset = local.next_offset_metadata.message_offset
            state = log.producer_state
            entry, completed = state.analyze_end_txn_marker(
                producer_id, producer_epoch, marker, offset, now_ms
            )
            records = marker.to_batch(
                producer_id,
                producer_epoch,
                now_ms,
                base_offset=offset,
                partition_leader_epoch=leader_epoch,
            )
            try:
                segment = self._appender.write_to_active_segment(offset, now_ms, records, now_ms)
                if completed is not None and completed.is_aborted:
                    segment.txn_index.append(
                        AbortedTxn(
                            producer_id,
                            completed.first_offset,
                            offset,
                            state.last_stable_offset_after(completed),
                        )
                    )
            except OSError as error:
                raise local.storage_error("transaction marker append", error) from error
            # The transactions the HW passed go first: however seldom the LSO is read, the
            # ended ones kept are only those whose marker awaits its commit.
            state.on_high_watermark_updated(self._high_watermark.metadata.message_offset)
            state.update_end_txn_marker(entry, completed)
            if leader_epoch > log.leader_epoch_cache.latest_epoch:
                log.leader_epochs.assign(leader_epoch, offset)
            end = offset + 1
            local.next_offset_metadata = LogOffsetMetadata(
                end, segment.base_offset, segment.log.size_in_bytes
            )
            if end - local.recovery_point >= log.config.flush_messages:
                log.flush(end)
            logger.debug(
                "[%s] %s marker of producer %d epoch %d (coordinator epoch %d) at offset %d",
                local.topic_partition,
                marker.control_type.name,
                producer_id,
                producer_epoch,
                coordinator_epoch,
                offset,
            )
            return LogAppendInfo(
                offset, offset, now_ms, offset, -1, log.log_start_offset, 1, 1, len(records)
            )

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open, or ended by a marker the
        high watermark has not passed (not below the log start offset); None when none is."""
        state = self._log.producer_state
        if not state.unstable:
            return None  # (a transaction opening meanwhile starts at or above the HW)
        with self._lock:
            first = state.first_unstable_offset(self._high_watermark.metadata.message_offset)
            if first is None:
                return None
            return max(first, self._log.log_start_offset)

    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: the first unstable offset, or the
        high watermark when that is lower (Kafka's ``lastStableOffset``)."""
        high_watermark = self._high_watermark.metadata.message_offset
        first = self.first_unstable_offset()
        return high_watermark if first is None or first > high_watermark else first

    def last_stable_offset_metadata(self) -> LogOffsetMetadata:
        """The last stable offset with its position (resolved once per first unstable offset)."""
        first = self.first_unstable_offset()
        high_watermark = self._high_watermark.metadata
        if first is None or first >= high_watermark.message_offset:
            return high_watermark
        metadata = self._first_unstable_metadata
        if metadata.message_offset != first:
            metadata = self._first_unstable_metadata = self._log.convert_to_offset_metadata(first)
        return metadata

    def read_committed(
        self, start_offset: int, max_length: int, min_one_message: bool
    ) -> FetchDataInfo:
        """A read up to the last stable offset, with the aborted transactions overlapping the
        records found (from the fetch offset up to the next segment, or the log end: Kafka's
        bound when the offset index names none closer)."""
        max_metadata = self.last_stable_offset_metadata()
        local = self._local
        if max_metadata is self._high_watermark.metadata:
            info = self._log.read(
                start_offset, max_length, FetchIsolation.HIGH_WATERMARK, min_one_message
            )
            return local.add_aborted_transactions(start_offset, info)
        segment = local.segment_holding(
            start_offset, self._log.log_start_offset, local.next_offset_metadata.message_offset
        )
        if start_offset >= max_metadata.message_offset:
            return FetchDataInfo(
                max_metadata
                if start_offset == max_metadata.message_offset
                else LogOffsetMetadata(start_offset),
                None,
                aborted_transactions=(),
            )
        return local.read_with_aborted_transactions(
            segment, start_offset, max_length, max_metadata, min_one_message
        )
