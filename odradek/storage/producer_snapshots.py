"""ProducerSnapshots: when a partition log's producer-state snapshots are written and the state
reloaded from them (the snapshot points Kafka's UnifiedLog sets around
``ProducerStateManager.takeSnapshot`` and ``truncateAndReload``; design §8).

The snapshot files, their format and the state itself are the ProducerStateManager's; this is
the log's side of them. A roll takes one at the new segment's base under the log's lock, and
its background flush writes it with the next pre-created segment file; a close writes one at
the log end; a truncation deletes those above the new log end and reloads the state from the
newest one left and the batches after it. Opening a log loads the state (LogLoader's
``load_producer_state``); retention deletes the snapshots below the first segment.
"""

from __future__ import annotations

import logging
import threading

from odradek.clock import Clock
from odradek.storage.local_log import LocalLog
from odradek.storage.log_segment import LogSegment
from odradek.storage.producer_state_manager import ProducerStateManager

logger = logging.getLogger(__name__)


class ProducerSnapshots:
    """The producer snapshots of one partition's log: written at rolls and closes, reloaded
    after truncations."""

    def __init__(
        self,
        producer_state: ProducerStateManager,
        local: LocalLog,
        lock: threading.RLock,
        clock: Clock,
    ) -> None:
        self._producer_state = producer_state
        self._local = local
        self._lock = lock  # the log's
        self._clock = clock

    def write_at_roll(self, new: LogSegment, snapshot: bytes) -> None:
        """The ``snapshot`` taken at the roll that made ``new``, made durable with the next
        pre-created segment file. A snapshot that cannot be written is logged and skipped:
        start-up rebuilds from an older snapshot or the log. Nor is it written once a
        truncation removed the segment the roll made: a later segment at the same offset may
        follow other records, and the state taken at the roll would describe the wrong
        producers there (it hid an idempotent producer from the next start-up)."""
        local = self._local
        offset = new.base_offset
        if local.closed or local.segments.get(offset) is not new:
            return

        def write_snapshot() -> None:
            try:
                self._producer_state.write_snapshot(offset, snapshot, sync_directory=False)
            except OSError as error:
                logger.warning(
                    "[%s] producer snapshot at offset %d not written: %s",
                    local.topic_partition,
                    offset,
                    error,
                )

        local.precreate_next_segment(write_snapshot, self._lock)

    def write_at_log_end(self, log_start_offset: int) -> None:
        """Write the producer state at the log end (clean shutdown), unless a snapshot there
        exists already (nothing was appended since the last one) or the log is empty."""
        state = self._producer_state
        with self._lock:
            offset = self._local.log_end_offset
            if offset == log_start_offset and not state.table:
                return  # an empty log: nothing to replay, and shutdown stays one write lighter
            data = state.snapshot_bytes()
        state.write_snapshot(offset, data)

    def reload_after_truncation(self, log_start_offset: int) -> None:
        """After a truncation (under the log's lock): the snapshots above the new log end go,
        and the state is rebuilt from the newest one left and the batches after it."""
        local = self._local
        end = local.log_end_offset
        self._producer_state.delete_snapshots(above=end)
        # Durability point: a deleted snapshot brought back by a power cut would describe
        # records the truncation removed, once the recovery point passes it again.
        local.directory_changes += 1
        self._producer_state.load(
            local.segments.values(), log_start_offset, end, end, self._clock.milliseconds()
        )
