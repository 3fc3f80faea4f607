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
from its start) used instead. Idle producers expire after ``producer.id.expiration.ms``,
unless their transaction is open.

Transactions (Kafka's ``ongoingTxns`` and ``unreplicatedTxns``): a producer's first
transactional batch opens its transaction at that batch's first offset; the COMMIT or ABORT
marker the coordinator writes ends it, and it stays unstable until the high watermark passes
the marker. The first unstable offset is the smallest first offset among those, and the last
stable offset (what read_committed consumers may read) the smaller of it and the high watermark.
The first offsets of the open transactions and the coordinator epochs live here, beside the
producer table; the table knows of each producer only whether its transaction is open
(``set_in_transaction``), which is all its fast path needs: a batch that opens a transaction,
or a plain one while it is open, is declined there and decided here.

Not thread-safe: the owning UnifiedLog calls it under its lock.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from pathlib import Path

from odradek.errors import KafkaError
from odradek.int_limits import INT64_MAX
from odradek.record.control_record import EndTransactionMarker
from odradek.record.record_batch import (
    CONTROL_FLAG_MASK,
    TRANSACTIONAL_FLAG_MASK,
    RecordBatch,
)
from odradek.storage.active_producer import ActiveProducer
from odradek.storage.atomic_file import write_atomically
from odradek.storage.completed_txn import CompletedTxn
from odradek.storage.log_segment import LogSegment
from odradek.storage.producer_append_info import (
    ProducerAppendInfo,
    analyze_end_txn_marker,
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
from odradek.storage.producer_state_entry import (
    NO_COORDINATOR_EPOCH,
    NO_TXN_FIRST_OFFSET,
    NUM_BATCHES_TO_RETAIN,
    ProducerStateEntry,
)
from odradek.storage.producer_table import ProducerTable, ProducerTableType
from odradek.storage.transaction_index import AbortedTxn

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
        self.ongoing_txns: dict[int, int] = {}
        """The first offset of each producer's open transaction, by producer id, ascending."""
        self.unreplicated_txns: list[CompletedTxn] = []
        """Ended transactions whose marker the high watermark has not passed yet (purged by
        :meth:`first_unstable_offset`)."""
        self.unstable = False
        """Whether a transaction is open, or ended by a marker the high watermark may not have
        passed: only then may the last stable offset be below the high watermark (a flag
        the read paths check first, in one step)."""
        self._coordinator_epochs: dict[int, int] = {}
        """The coordinator epoch of each producer's last marker (producers with one only)."""
        self._snapshot_write_lock = threading.Lock()

    # --- the append path ---------------------------------------------------------------------

    def analyze(self, records: bytes | bytearray | memoryview) -> ProducerAppendInfo:
        """Check a client's batches (offsets assigned); see ProducerAppendInfo. The answer
        goes to :meth:`update` once the batches are written, before any other analysis.

        The common request, one batch going on where its producer left off, is answered
        sooner by ``table.try_next`` (then ``table.commit_next`` once written); this is the
        answer for any request, that one included."""
        return analyze_producer_state(self.entry, records, self._name)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Apply a written append's producer updates (a transaction a batch opened included)."""
        put = self.table.put
        ongoing = self.ongoing_txns
        for pid, entry in append_info.updated.items():
            put(pid, entry.producer_epoch, entry.last_timestamp, tuple(entry.batches))
            first_offset = entry.current_txn_first_offset
            if first_offset != NO_TXN_FIRST_OFFSET and pid not in ongoing:
                ongoing[pid] = first_offset
                self.table.set_in_transaction(pid, True)
                self.unstable = True

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        """A copy of one producer's entry, or None if the partition does not know it."""
        found = self.table.get(producer_id)
        if found is None:
            return None
        epoch, last_timestamp, batches = found
        return ProducerStateEntry(
            producer_id,
            epoch,
            deque(batches, maxlen=NUM_BATCHES_TO_RETAIN),
            last_timestamp,
            self._coordinator_epochs.get(producer_id, NO_COORDINATOR_EPOCH),
            self.ongoing_txns.get(producer_id, NO_TXN_FIRST_OFFSET),
        )

    # --- transactions ------------------------------------------------------------------------

    def analyze_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: EndTransactionMarker,
        offset: int,
        timestamp: int,
    ) -> tuple[ProducerStateEntry, CompletedTxn | None]:
        """Check a marker to be written at ``offset`` (see producer_append_info); the entry it
        leaves (for :meth:`update_end_txn_marker` once written) and the transaction it ends."""
        entry = self.entry(producer_id) or ProducerStateEntry(producer_id)
        completed = analyze_end_txn_marker(
            entry, marker, producer_epoch, offset, timestamp, self._name
        )
        return entry, completed

    def update_end_txn_marker(
        self, entry: ProducerStateEntry, completed: CompletedTxn | None
    ) -> None:
        """Apply a written marker: the producer's entry, and its transaction ended (unstable
        until the high watermark passes the marker: :meth:`first_unstable_offset`)."""
        self.table.put(
            entry.producer_id, entry.producer_epoch, entry.last_timestamp, tuple(entry.batches)
        )
        self._coordinator_epochs[entry.producer_id] = entry.coordinator_epoch
        if completed is not None:
            self.complete_txn(completed)

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The transaction ``completed`` ended (Kafka's ``completeTxn``)."""
        if self.ongoing_txns.pop(completed.producer_id, None) is None:
            raise ValueError(
                f"[{self._name}] no open transaction of producer {completed.producer_id} "
                f"to complete at offset {completed.last_offset}"
            )
        self.table.set_in_transaction(completed.producer_id, False)
        self.unreplicated_txns.append(completed)
        self.unstable = True

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The last stable offset once ``completed`` ends, for its .txnindex entry (Kafka's
        ``lastStableOffset(CompletedTxn)``): the first offset of the earliest transaction of
        another producer still open, or the offset after the marker."""
        for pid, first_offset in self.ongoing_txns.items():
            if pid != completed.producer_id:
                return first_offset
        return completed.last_offset + 1

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget the ended transactions whose marker is below ``high_watermark``: they are
        stable (Kafka's ``onHighWatermarkUpdated``)."""
        unreplicated = self.unreplicated_txns
        if unreplicated:
            unreplicated[:] = [txn for txn in unreplicated if txn.last_offset >= high_watermark]
            self.unstable = bool(unreplicated or self.ongoing_txns)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction that is open or whose marker is not
        below ``high_watermark`` (the others are forgotten first); None when every
        transaction is stable."""
        self.on_high_watermark_updated(high_watermark)
        first = None
        for first_offset in self.ongoing_txns.values():
            first = first_offset
            break
        for txn in self.unreplicated_txns:
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def coordinator_epoch(self, producer_id: int) -> int:
        return self._coordinator_epochs.get(producer_id, NO_COORDINATOR_EPOCH)

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer's row for DescribeProducers, in the order they came."""
        rows = []
        for pid in self.table.producer_ids():
            entry = self.entry(pid)
            if entry is not None:
                rows.append(
                    ActiveProducer(
                        pid,
                        entry.producer_epoch,
                        entry.last_seq,
                        entry.last_timestamp,
                        entry.coordinator_epoch,
                        entry.current_txn_first_offset,
                    )
                )
        return rows

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """A copy of every producer's entry, in the order they came (for inspection)."""
        return {pid: self.entry(pid) for pid in self.table.producer_ids()}  # type: ignore[misc]

    def clear(self) -> None:
        """Forget every producer (the log was emptied)."""
        self.table.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        self._coordinator_epochs.clear()
        self.unstable = False

    def last_data_offsets(self) -> dict[int, int]:
        """Each live producer's last written offset (the cleaner keeps those batches)."""
        return self.table.last_data_offsets()

    # --- expiration --------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``, except those whose
        transaction is open (Kafka's ``isProducerExpired``); how many went."""
        expired = self._remove_expired(now_ms)
        if expired:
            logger.info("[%s] expired %d idle producer ids", self._name, expired)
        return expired

    def _remove_expired(self, now_ms: int) -> int:
        """The table keeps a producer whose transaction is open; the coordinator epochs of
        the producers it removed go with them."""
        expired = self.table.remove_expired(now_ms, self.producer_id_expiration_ms)
        if expired:
            epochs = self._coordinator_epochs
            for pid in [pid for pid in epochs if pid not in self.table]:
                del epochs[pid]
        return expired

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot_bytes(self) -> bytes:
        """The map in Kafka's snapshot format (taken under the log lock, written later): a row
        per retained batch of each producer, oldest first, and a producer without a batch as
        Kafka's empty row (see producer_snapshot_file)."""
        epochs, ongoing = self._coordinator_epochs, self.ongoing_txns
        return encode_snapshot(
            SnapshotEntry(
                *row,
                epochs.get(row[0], NO_COORDINATOR_EPOCH),
                ongoing.get(row[0], NO_TXN_FIRST_OFFSET),
            )
            for row in self.table.rows()
        )

    def write_snapshot(self, offset: int, data: bytes, *, sync_directory: bool = True) -> None:
        """Write ``data`` (``snapshot_bytes``, taken under the log's lock) as the snapshot at
        ``offset``, unless one is there already (Kafka's takeSnapshot). A roll's snapshot is
        written by its background flush, a close's by the closer; both at the log end, so
        they may name the same file: one writes it."""
        with self._snapshot_write_lock:
            path = snapshot_file(self.dir, offset)
            if not path.exists():
                write_atomically(path, data, sync_directory=sync_directory)

    def snapshot_offsets(self) -> list[int]:
        return snapshot_offsets(self.dir)

    def delete_snapshots(self, *, below: int = -1, above: int = INT64_MAX) -> None:
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
        self.clear()
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
            entry.coordinator_epoch = row.coordinator_epoch
            entry.current_txn_first_offset = row.current_txn_first_offset
        for entry in loaded.values():
            if entry.coordinator_epoch != NO_COORDINATOR_EPOCH:
                self._coordinator_epochs[entry.producer_id] = entry.coordinator_epoch
        self.update(ProducerAppendInfo(loaded))
        # The open transactions in the order they were opened (kept in the same dict).
        opened = sorted(self.ongoing_txns.items(), key=lambda item: item[1])
        self.ongoing_txns.clear()
        self.ongoing_txns.update(opened)
        self._remove_expired(now_ms)

    def replay(self, segments: list[LogSegment], start_offset: int, end_offset: int) -> None:
        """Apply, unchecked, the batches in ``[start_offset, end_offset)`` of ``segments``:
        data batches, the transactions they open and the markers that end them. Each
        segment's .txnindex is rebuilt from ``start_offset`` on (its entries for markers
        below stay), so recovery restores the aborted transactions a crash cut from it."""
        for segment in segments:
            position = 0
            if segment.base_offset < start_offset:
                position = segment.offset_index.lookup(start_offset).position
            txn_index = segment.txn_index
            txn_index.truncate_to(start_offset)
            for batch_position, header in segment.log.batch_headers(position):
                if header.base_offset >= end_offset:
                    break
                if header.last_offset < start_offset or header.producer_id < 0:
                    continue
                fields = header.header()
                attributes = fields.attributes
                if attributes & CONTROL_FLAG_MASK:
                    self._replay_marker(segment, batch_position, header)
                    continue
                replay_batch(
                    self.table,
                    fields.producer_id,
                    fields.producer_epoch,
                    fields.base_sequence,
                    fields.base_offset,
                    fields.last_offset_delta,
                    fields.max_timestamp,
                )
                if attributes & TRANSACTIONAL_FLAG_MASK and fields.producer_id not in (
                    self.ongoing_txns
                ):
                    self.ongoing_txns[fields.producer_id] = fields.base_offset
                    self.table.set_in_transaction(fields.producer_id, True)
                    self.unstable = True

    def _replay_marker(self, segment: LogSegment, position: int, header: RecordBatch) -> None:
        """A control batch read back: a marker ends its producer's transaction (and an abort
        goes to the segment's .txnindex); other control records (none in a partition's log)
        and unreadable ones are skipped with a warning."""
        batch = RecordBatch(segment.log.read(position, header.size_in_bytes))
        try:
            marker = EndTransactionMarker.from_record(next(iter(batch.records())))
        except (StopIteration, KafkaError) as error:
            logger.warning(
                "[%s] control batch at offset %d holds no transaction marker (%s): skipped",
                self._name,
                header.base_offset,
                error,
            )
            return
        entry = self.entry(header.producer_id) or ProducerStateEntry(header.producer_id)
        completed = analyze_end_txn_marker(
            entry,
            marker,
            header.producer_epoch,
            header.base_offset,
            header.max_timestamp,
            self._name,
            checked=False,
        )
        self.update_end_txn_marker(entry, completed)
        if completed is not None and completed.is_aborted:
            segment.txn_index.append(
                AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    self.last_stable_offset_after(completed),
                )
            )


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
