"""LogRoll: rolling a partition's log onto a new active segment (design §4 step 4; Kafka's
``UnifiedLog.roll`` and the flush it schedules).

The roll itself is LocalLog's (a new segment at the log end offset); around it, the high
watermark moves to its position in the new segment when it sat at the end, and the producer
state is snapshotted at the new segment's base. The rest waits for the scheduler's thread: the
rolled segment's sync (and the new one's name), the snapshot written with the next
pre-created segment file, and a flush up to the new segment.
"""

from __future__ import annotations

import threading

from odradek.storage.high_watermark import HighWatermark
from odradek.storage.local_log import LocalLog
from odradek.storage.log_segment import LogSegment
from odradek.storage.producer_snapshots import ProducerSnapshots
from odradek.storage.producer_state_manager import ProducerStateManager
from odradek.storage.scheduler import Scheduler


class LogRoll:
    """The rolls of one partition's log."""

    def __init__(
        self,
        local: LocalLog,
        high_watermark: HighWatermark,
        producer_state: ProducerStateManager,
        producer_snapshots: ProducerSnapshots,
        scheduler: Scheduler,
        lock: threading.RLock,
    ) -> None:
        self._local = local
        self._high_watermark = high_watermark
        self._producer_state = producer_state
        self._producer_snapshots = producer_snapshots
        self._scheduler = scheduler
        self._lock = lock  # the log's

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (the active one when it is
        empty); its flush, the producer snapshot at its base and the next pre-created
        segment file follow in the background."""
        with self._lock:
            local = self._local
            rolled = local.roll()
            if rolled is None:
                return local.segments.active_segment
            active, segment = rolled
            self._high_watermark.lower_to_log_end()  # a HW at the end: to its new position
            snapshot = self._producer_state.snapshot_bytes()
            self._scheduler.schedule(
                f"flush-{local.topic_partition}",
                lambda: self._flush_rolled_segment(active, segment, snapshot),
            )
            return segment

    def _flush_rolled_segment(self, rolled: LogSegment, new: LogSegment, snapshot: bytes) -> None:
        """After a roll: sync the rolled segment and the new one's names (LocalLog's
        sync_rolled_segment), then write the producer snapshot taken at the roll with the next
        pre-created segment file, and flush up to the new segment."""
        local = self._local
        if local.closed:
            return
        local.sync_rolled_segment(rolled)
        self._producer_snapshots.write_at_roll(new, snapshot)
        local.flush(new.base_offset)
