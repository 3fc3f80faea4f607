"""ProducerStateManager: one partition's producer map, its snapshots and its recovery (Kafka's
``ProducerStateManager``).

The map holds, per producer id, its epoch and its last five batches (ProducerStateEntry); the
log checks every append with a producer id against it (ProducerAppendInfo) and applies the
update once the batches are written. Snapshots (``<offset>.snapshot``, Kafka's format, see
producer_snapshot_file) record the map at a log end offset: one at every segment roll and one
at clean shutdown. Loading takes the newest readable snapshot at or below the log end (after an
unclean shutdown, at or below the recovery point: what lies above it may be gone) and replays
the batches after it; a corrupt snapshot is logged, deleted, and the next older one (or the log
from its start) used instead. Idle producers expire after ``producer.id.expiration.ms``.

Not thread-safe: the owning Log calls it under its lock.
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path

from odradek.record.record_batch import LOG_OVERHEAD
from odradek.storage.batch_metadata import INT32_MAX
from odradek.storage.log_segment import LogSegment
from odradek.storage.producer_append_info import (
    BATCH_PRODUCER_FIELDS,
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

logger = logging.getLogger(__name__)
_unpack_fields = BATCH_PRODUCER_FIELDS.unpack_from

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
_NO_BATCH = (-1, -1, 0)  # a producer with no batch, Kafka's empty row: seq, offset, delta
NEXT_BATCH = ProducerAppendInfo({})
"""What :meth:`ProducerStateManager.analyze` answers for the common case: the batch it
noted is added to its producer's entry by :meth:`update`."""


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
        self.producers: dict[int, ProducerStateEntry] = {}
        self._next_batch: tuple[ProducerStateEntry, tuple[int, int, int, int]] | None = None

    # --- the append path ---------------------------------------------------------------------

    def analyze(self, records: bytes | bytearray | memoryview) -> ProducerAppendInfo:
        """Check a client's batches (offsets assigned); see ProducerAppendInfo. The answer
        goes to :meth:`update` once the batches are written, before any other analysis."""
        # The common case, checked first and inline (a call costs a tenth of this path): one
        # batch that goes on where its known producer left off (same epoch, the next
        # sequence). Such a batch cannot be a retry and passes every rule, so it needs no
        # copy of the entry and no duplicate scan, only the batch to add once written.
        base_offset, batch_length, last_offset_delta, max_timestamp, producer_id, epoch, seq = (
            _unpack_fields(records, 0)
        )
        entry = self.producers.get(producer_id)
        if (
            entry is not None
            and batch_length + LOG_OVERHEAD == len(records)
            and epoch == entry.producer_epoch
            and entry.batches
            and seq == entry.batches[-1][0] + 1
            and seq <= INT32_MAX - last_offset_delta
        ):
            self._next_batch = (
                entry,
                (
                    seq + last_offset_delta,
                    base_offset + last_offset_delta,
                    last_offset_delta,
                    max_timestamp,
                ),
            )
            return NEXT_BATCH  # no allocation on the common path
        return analyze_producer_state(self.producers, records, self._name)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Apply a written append's producer updates."""
        if append_info is NEXT_BATCH:
            entry, batch = self._next_batch
            entry.batches.append(batch)  # a bounded deque: the oldest of five goes
            entry.last_timestamp = batch[3]
        else:
            self.producers.update(append_info.updated)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def last_data_offsets(self) -> dict[int, int]:
        """Each live producer's last written offset (the cleaner keeps those batches)."""
        return {pid: entry.last_data_offset for pid, entry in self.producers.items()}

    # --- expiration --------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; how many went."""
        expired = [pid for pid, entry in self.producers.items() if self._is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        if expired:
            logger.info("[%s] expired %d idle producer ids", self._name, len(expired))
        return len(expired)

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot_bytes(self) -> bytes:
        """The map in Kafka's snapshot format (taken under the log lock, written later): a row
        per retained batch of each producer, oldest first (see producer_snapshot_file)."""
        return encode_snapshot(
            SnapshotEntry(pid, entry.producer_epoch, last_seq, last_offset, offset_delta, timestamp)
            for pid, entry in self.producers.items()
            for last_seq, last_offset, offset_delta, timestamp in (
                entry.batches or ((*_NO_BATCH, entry.last_timestamp),)
            )
        )

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
        self.producers = {}
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
        """Rows of one producer follow each other, oldest first; Kafka's snapshots have one."""
        for row in entries:
            entry = self.producers.get(row.producer_id)
            if entry is None or entry.producer_epoch != row.producer_epoch:
                batches: deque[tuple[int, int, int, int]] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
                entry = ProducerStateEntry(row.producer_id, row.producer_epoch, batches)
                self.producers[row.producer_id] = entry
            if row.last_offset >= 0:
                entry.batches.append(
                    (row.last_sequence, row.last_offset, row.offset_delta, row.timestamp)
                )
            entry.last_timestamp = row.timestamp
        for pid in [pid for pid, e in self.producers.items() if self._is_expired(e, now_ms)]:
            del self.producers[pid]

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
                    self.producers,
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
