"""LogTruncation: cutting a partition's log back to an offset (Kafka's ``UnifiedLog.truncateTo``
and ``truncateFullyAndStartAt``).

LocalLog removes the records from the segments; this is what a cut resets above them, under
the log's lock: the HW down to the new log end, the positions the transactions resolved, the
producer state reloaded from its snapshots and the batches left (ProducerSnapshots), the
leader epochs from the end. A cut below the first segment, or through a batch straddling the
log start offset, restarts the log empty there (the log start offset is never lowered).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.storage.high_watermark import HighWatermark
from odradek.storage.local_log import LocalLog
from odradek.storage.log_transactions import LogTransactions
from odradek.storage.producer_snapshots import ProducerSnapshots

if TYPE_CHECKING:
    from odradek.storage.unified_log import UnifiedLog

logger = logging.getLogger(__name__)


class LogTruncation:
    """Truncations of one partition's log, and what each resets."""

    def __init__(
        self,
        log: UnifiedLog,
        local: LocalLog,
        high_watermark: HighWatermark,
        transactions: LogTransactions,
        producer_snapshots: ProducerSnapshots,
        lock: threading.RLock,
        set_log_start_offset: Callable[[int], None],
    ) -> None:
        self._log = log
        self._local = local
        self._high_watermark = high_watermark
        self._transactions = transactions
        self._producer_snapshots = producer_snapshots
        self._lock = lock  # the log's
        self._set_log_start_offset = set_log_start_offset  # the log's, unchecked

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every record at or above ``target_offset``; True when anything was removed."""
        log, local = self._log, self._local
        if target_offset < 0:
            raise ValueError(f"cannot truncate {local.topic_partition} to {target_offset}")
        with self._lock:
            if target_offset >= local.log_end_offset:
                return False
            first = local.segments.first_segment
            if first is None or first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            local.truncate_to(target_offset)
            self._transactions.positions_moved()
            self._high_watermark.lower_to_log_end()
            log_start_offset = log.log_start_offset
            if local.log_end_offset < log_start_offset:
                # The cut went through a batch straddling the log start offset: nothing visible
                # is left, and the log start offset is never lowered, so restart the log there.
                self.truncate_fully_and_start_at(log_start_offset)
            else:
                self._producer_snapshots.reload_after_truncation(log_start_offset)
                log.leader_epoch_cache.truncate_from_end(local.log_end_offset)
            logger.info(
                "[%s] truncated to offset %d, log end offset now %d",
                local.topic_partition,
                target_offset,
                local.log_end_offset,
            )
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        log, local = self._log, self._local
        with self._lock:
            local.truncate_fully_and_start_at(new_offset)
            self._transactions.positions_moved()
            self._set_log_start_offset(new_offset)
            self._high_watermark.set(local.next_offset_metadata)
            log.producer_state.clear()
            log.producer_state.delete_snapshots(above=-1)
            log.leader_epoch_cache.clear()
