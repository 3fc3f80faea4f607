"""ProducerStateManager: one partition's producer map, its snapshots and its recovery (Kafka's
``ProducerStateManager``).

The map (a ProducerTable, see producer_table) holds, per producer id, its epoch and its last
five batches; the log checks every append with a producer id against it (the table's
``try_next`` for the common batch, ProducerAppendInfo for the rest) and applies the update
once the batches are written. Snapshots (``<offset>.snapshot``, Kafka's format, see
producer_snapshot_file) record the map at a log end offset: one at every segment roll and one
at clean shutdown. Loading takes the newest readable snapshot at or below the log end (after an
unclean shutdown, at or below the recovery point: what lies above it may be gone) and replays
the batches after it; a corrupt snapshot is logged, deleted, and the next older one (or the log
from its start) used instead. Idle producers expire after ``producer.id.expiration.ms``.

Not thread-safe: the owning UnifiedLog calls it under its lock.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path

from odradek.storage.log_segment import LogSegment
from odradek.storage.producer_append_info import (
    ProducerAppendInfo,
    analyze_producer_state,
    replay_batch,
)
from odradek.storage.producer_snapshot_file import (
    CorruptSnapshotError,
    SnapshotEntry,
    encode_snapshot,
    read_snapshot,
    snapshot_file,
    snapshot_offsets,
)
from odradek.storage.producer_state_entry import NUM_BATCHES_TO_RETAIN, ProducerStateEntry
from odradek.storage.producer_table import ProducerTable, ProducerTableType

logger = logging.getLogger(__name__)

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


class ProducerStateManager:
    """The producers of one partition, and their snapshots in its directory."""

    def __init__(
        self,
        directory: Path,
        name: str,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = directory
        self._name = name
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.table: ProducerTableType = ProducerTable()
        """The producers' entries (producer_table), this manager's for its lifetime (loading
        clears it). The append path asks it first (``try_next``, then ``commit_next`` once
        written), and comes to :meth:`analyze` for the requests it declines."""

    # --- the append path ---------------------------------------------------------------------

    def analyze(self, records: bytes | bytearray | memoryview) -> ProducerAppendInfo:
        """Check a client's batches (offsets assigned); see ProducerAppendInfo. The answer
        goes to :meth:`update` once the batches are written, before any other analysis.

        The common request, one batch going on where its producer left off, is answered
        sooner by ``table.try_next`` (then ``table.commit_next`` once written); this is the
        answer for any request, that one included."""
        return analyze_producer_state(self.entry, records, self._name)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Apply a written append's producer updates."""
        put = self.table.put
        for pid, entry in append_info.updated.items():
            put(pid, entry.producer_epoch, entry.last_timestamp, tuple(entry.batches))

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        """A copy of one producer's entry, or None if the partition does not know it."""
        found = self.table.get(producer_id)
        if found is None:
            return None
        epoch, last_timestamp, batches = found
        return ProducerStateEntry(
            producer_id, epoch, deque(batches, maxlen=NUM_BATCHES_TO_RETAIN), last_timestamp
        )

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """A copy of every producer's entry, in the order they came (for inspection)."""
        return {pid: self.entry(pid) for pid in self.table.producer_ids()}  # type: ignore[misc]

    def clear(self) -> None:
        """Forget every producer (the log was emptied)."""
        self.table.clear()

    def last_data_offsets(self) -> dict[int, int]:
        """Each live producer's last written offset (the cleaner keeps those batches)."""
        return self.table.last_data_offsets()

    # --- expiration --------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; how many went."""
        expired = self.table.remove_expired(now_ms, self.producer_id_expiration_ms)
        if expired:
            logger.info("[%s] expired %d idle producer ids", self._name, expired)
        return expired

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot_bytes(self) -> bytes:
        """The map in Kafka's snapshot format (taken under the log lock, written later): a row
        per retained batch of each producer, oldest first, and a producer without a batch as
        Kafka's empty row (see producer_snapshot_file)."""
        return encode_snapshot(SnapshotEntry(*row) for row in self.table.rows())

    def snapshot_offsets(self) -> list[int]:
        return snapshot_offsets(self.dir)

    def delete_snapshots(self, *, below: int = -1, above: int = 2**63 - 1) -> None:
        """Delete the snapshots below ``below`` or above ``above``."""
        for offset in self.snapshot_offsets():
            if offset < below or offset > above:
                _unlink(snapshot_file(self.dir, offset))

    # --- loading -----------------------------------------------------------------------------

    def load(
        self,
        segments: list[LogSegment],
        log_start_offset: int,
        log_end_offset: int,
        max_snapshot_offset: int,
        now_ms: int,
    ) -> int:
        """Rebuild the map for a log ending at ``log_end_offset``: from the newest readable
        snapshot at or below ``max_snapshot_offset`` (and not below the first segment), then
        the batches after it. Returns the offset replay started from."""
        self.table.clear()
        start = segments[0].base_offset if segments else log_start_offset
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_snapshot_offset or offset > log_end_offset or offset < start:
                continue
            path = snapshot_file(self.dir, offset)
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, OSError) as error:
                logger.warning(
                    "[%s] producer snapshot %s is unreadable (%s): deleted; the state is "
                    "rebuilt from an older snapshot or the log",
                    self._name,
                    path.name,
                    error,
                )
                _unlink(path)
                continue
            self._load_entries(entries, now_ms)
            start = offset
            break
        else:
            if log_end_offset > log_start_offset:
                logger.info(
                    "[%s] no producer snapshot at or below offset %d: rebuilding the producer "
                    "state from the log",
                    self._name,
                    min(max_snapshot_offset, log_end_offset),
                )
        self.replay(segments, start, log_end_offset)
        return start

    def _load_entries(self, entries: list[SnapshotEntry], now_ms: int) -> None:
        """Rows of one producer follow each other, oldest first; Kafka's snapshots have one
        row per producer, ours one per retained batch."""
        loaded: dict[int, ProducerStateEntry] = {}
        for row in entries:
            entry = loaded.get(row.producer_id)
            if entry is None or entry.producer_epoch != row.producer_epoch:
                entry = loaded[row.producer_id] = ProducerStateEntry(
                    row.producer_id, row.producer_epoch
                )
            if row.last_offset >= 0:
                entry.batches.append(
                    (row.last_sequence, row.last_offset, row.offset_delta, row.timestamp)
                )
            entry.last_timestamp = row.timestamp
        self.update(ProducerAppendInfo(loaded))
        self.table.remove_expired(now_ms, self.producer_id_expiration_ms)

    def replay(self, segments: list[LogSegment], start_offset: int, end_offset: int) -> None:
        """Apply, unchecked, the batches in ``[start_offset, end_offset)`` of ``segments``."""
        for segment in segments:
            position = 0
            if segment.base_offset < start_offset:
                position = segment.offset_index.lookup(start_offset).position
            for _, header in segment.log.batch_headers(position):
                if header.base_offset >= end_offset:
                    break
                if header.last_offset < start_offset or header.producer_id < 0:
                    continue
                fields = header.header()
                replay_batch(
                    self.table,
                    fields.producer_id,
                    fields.producer_epoch,
                    fields.base_sequence,
                    fields.base_offset,
                    fields.last_offset_delta,
                    fields.max_timestamp,
                )


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
