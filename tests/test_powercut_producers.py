"""Power cuts at random instants under idempotent producers, on the power-cut file system
(tests/powercut_fs.py): producer snapshots (``<offset>.snapshot``) and the
``leader-epoch-checkpoint`` never claim what was not made durable, and a producer retrying its
unacknowledged batches after the cut, with the same producer id, epoch and sequences, gets
each one written exactly once.

A LogManager in this process takes batches of several idempotent producers (up to five in
flight each, acknowledged by the flush acks=all waits for) across segment rolls, clean
shutdowns and leader epochs, until the power goes at a random instant. After each restart the
partition is checked against the log itself: every producer's records are its sequences 0..n
in order, once (n at least what was acknowledged); every snapshot on disk holds what the log
says at its offset; the leader epochs start where the log's batches say. Then each producer
retries what it had in flight: a batch the log holds must be answered as a duplicate with its
offsets, one it lost must be written. ``POWERCUT_CUTS`` and ``POWERCUT_SEED`` as in
tests/test_powercut.py.
"""

from __future__ import annotations

import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from odradek.config.broker_config import BrokerConfig
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch_builder import build_batch
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.leader_epoch_file_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    decode_checkpoint,
)
from odradek.storage.log_manager import LogManager
from odradek.storage.producer_snapshot_file import (
    SnapshotEntry,
    is_snapshot_file,
    read_snapshot,
)
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition
from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import SEED, CutTimer, abandon, powercut_fs  # noqa: F401
from tests.test_powercut import broker_config, cuts, started

TP = TopicPartition("idem", 0)
MAX_IN_FLIGHT = 5  # what an idempotent producer may have unacknowledged (Kafka's limit)


@dataclass
class SentBatch:
    producer_id: int
    epoch: int
    first_seq: int
    data: bytes

    @property
    def count(self) -> int:
        return MemoryRecords(self.data).batches().__next__().records_count


@dataclass
class IdempotentProducer:
    """One producer id: its epoch, next sequence, the batches it has in flight (sent, no
    answer yet) and how many of its records were acknowledged in the current epoch."""

    producer_id: int
    epoch: int = 0
    next_seq: int = 0
    acked: int = 0
    in_flight: list[SentBatch] = field(default_factory=list)

    def next_batch(self, count: int) -> SentBatch:
        """Records valued ``pid:epoch:seq``, so a lost, repeated or misplaced one shows."""
        now_ms = int(time.time() * 1000)
        records = [
            (now_ms, None, f"{self.producer_id}:{self.epoch}:{seq}".encode(), ())
            for seq in range(self.next_seq, self.next_seq + count)
        ]
        batch = SentBatch(
            self.producer_id,
            self.epoch,
            self.next_seq,
            build_batch(
                records,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                base_sequence=self.next_seq,
            ),
        )
        self.next_seq += count
        self.in_flight.append(batch)  # before the append: the cut may come in the middle
        return batch

    def all_acknowledged(self) -> None:
        self.acked = self.next_seq
        self.in_flight.clear()


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    producer_id: int
    epoch: int
    first_seq: int
    max_timestamp: int
    leader_epoch: int
    values: tuple[bytes, ...]


def stored_batches(log: UnifiedLog) -> list[StoredBatch]:
    """Every batch from the log start to the log end: whole, CRC right, offsets contiguous."""
    found: list[StoredBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
        assert info.records is not None, f"nothing read at {offset} below {log.log_end_offset}"
        batches = list(MemoryRecords(info.records.read_bytes()).batches())
        assert batches, f"no whole batch at offset {offset}"
        for batch in batches:
            batch.ensure_valid()
            if batch.last_offset < offset:
                continue
            assert batch.base_offset == offset, f"batch at {batch.base_offset}, {offset} due"
            found.append(
                StoredBatch(
                    batch.base_offset,
                    batch.last_offset,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    batch.max_timestamp,
                    batch.partition_leader_epoch,
                    tuple(record.value for record in batch.records()),
                )
            )
            offset = batch.last_offset + 1
    return found


def check_records(batches: list[StoredBatch], producers: list[IdempotentProducer], where: str):
    """Each producer's records in the current epoch are its sequences 0..n, in order, once,
    with n at least what was acknowledged; the offset of each (pid, epoch, first seq)."""
    seqs: dict[tuple[int, int], list[int]] = {}
    where_is: dict[tuple[int, int, int], StoredBatch] = {}
    for batch in batches:
        where_is[(batch.producer_id, batch.epoch, batch.first_seq)] = batch
        for n, value in enumerate(batch.values):
            pid, epoch, seq = map(int, value.split(b":"))
            assert (pid, epoch) == (batch.producer_id, batch.epoch), f"{where}: {value!r}"
            assert seq == batch.first_seq + n, f"{where}: {value!r} in a batch from {batch}"
            seqs.setdefault((pid, epoch), []).append(seq)
    for producer in producers:
        found = seqs.get((producer.producer_id, producer.epoch), [])
        assert found == list(range(len(found))), (
            f"{where}: producer {producer.producer_id} epoch {producer.epoch}: records lost in "
            f"the middle, repeated or out of order: {found[:50]}"
        )
        assert len(found) >= producer.acked, (
            f"{where}: producer {producer.producer_id} lost acknowledged records: "
            f"{len(found)} stored, {producer.acked} acknowledged"
        )
    return where_is


def check_snapshots(
    log: UnifiedLog, batches: list[StoredBatch], where: str, damaged: set[str] = frozenset()
) -> None:
    """Every snapshot left holds, per producer, its last five batches below its offset (in
    its latest epoch), as the log has them: one that claimed records the log lost, or a
    torn one, would show. (The ``damaged`` ones the test tore stay until loading tries
    them.)"""
    for path in sorted(log.dir.iterdir()):
        if not is_snapshot_file(path.name) or path.name in damaged:
            continue
        offset = int(path.stem)
        assert offset <= log.log_end_offset, f"{where}: {path.name} above the log end"
        last: dict[int, list[SnapshotEntry]] = {}
        for batch in batches:
            if batch.last_offset < offset and batch.producer_id >= 0:
                rows = last.setdefault(batch.producer_id, [])
                if rows and rows[-1].producer_epoch != batch.epoch:
                    rows.clear()
                delta = batch.last_offset - batch.base_offset
                rows.append(
                    SnapshotEntry(
                        batch.producer_id,
                        batch.epoch,
                        batch.first_seq + delta,
                        batch.last_offset,
                        delta,
                        batch.max_timestamp,
                    )
                )
        expected = sorted(row for rows in last.values() for row in rows[-MAX_IN_FLIGHT:])
        assert sorted(read_snapshot(path)) == expected, f"{where}: {path.name}"


def check_leader_epochs(log: UnifiedLog, batches: list[StoredBatch], where: str) -> None:
    """The leader epochs start where the log's batches say: the first batch of each epoch."""
    truth: list[EpochEntry] = []
    for batch in batches:
        if not truth or batch.leader_epoch > truth[-1].epoch:
            truth.append(EpochEntry(batch.leader_epoch, batch.base_offset))
    assert log.leader_epoch_cache.entries == truth, f"{where}: leader epochs"


def epoch_file_is_whole(directory: Path) -> None:
    path = directory / LEADER_EPOCH_CHECKPOINT_FILE
    if path.exists():
        decode_checkpoint(path.read_text())  # raises on a torn file


def retry_in_flight(
    log: UnifiedLog,
    producers: list[IdempotentProducer],
    where_is: dict[tuple[int, int, int], StoredBatch],
    leader_epoch: int,
    where: str,
) -> int:
    """Each producer sends again what it had in flight, in order, with the same producer id,
    epoch and sequences: a batch the log holds is answered as a duplicate with its offsets,
    one it lost is written; then the flush acknowledges them. The duplicates answered."""
    duplicates = 0
    for producer in producers:
        for batch in producer.in_flight:
            stored = where_is.get((batch.producer_id, batch.epoch, batch.first_seq))
            info = log.append(batch.data, leader_epoch=leader_epoch)
            if stored is not None:
                assert (info.record_count, info.first_offset, info.last_offset) == (
                    0,
                    stored.base_offset,
                    stored.last_offset,
                ), f"{where}: the retry of {stored} was not answered as its duplicate: {info}"
                duplicates += 1
            else:
                assert info.record_count == batch.count, f"{where}: retry of {batch} not written"
    log.flush(log.log_end_offset)
    for producer in producers:
        producer.all_acknowledged()
    return duplicates


def tear_or_drop_a_snapshot(directory: Path, rng: random.Random, damaged: set[str]) -> str:
    """What the disk may do to a file the code made durable: cut it short, or lose it."""
    snapshots = sorted(p for p in directory.iterdir() if is_snapshot_file(p.name))
    if not snapshots:
        return "none"
    victim = rng.choice(snapshots)
    damaged.add(victim.name)
    if rng.random() < 0.5:
        victim.unlink()
        return "dropped"
    size = victim.stat().st_size
    with open(victim, "r+b") as file:
        file.truncate(rng.randrange(size))
    return "torn"


class Workload:
    """Producers appending batches to the partition of a LogManager, acknowledged by the
    flush acks=all waits for; now and then a clean shutdown and restart (after which the
    producers retry what they had in flight, as a client whose connection went would)."""

    def __init__(
        self,
        config: BrokerConfig,
        manager: LogManager,
        producers: list[IdempotentProducer],
        rng: random.Random,
        leader_epoch: int,
        damaged: set[str],
    ) -> None:
        self.damaged = damaged
        self.config = config
        self.manager = manager
        self.producers = producers
        self.rng = rng
        self.leader_epoch = leader_epoch
        self.clean_restarts = 0

    def run(self, stop) -> None:
        log = self.manager.get_log(TP)
        while not stop.is_set():
            producer = self.rng.choice(self.producers)
            roll = self.rng.random()
            if roll < 0.02:
                self.manager.shutdown()
                self.manager = started(self.config)
                self.clean_restarts += 1
                log = self.manager.get_log(TP)
                where = f"clean restart {self.clean_restarts}"
                batches = stored_batches(log)
                where_is = check_records(batches, self.producers, where)
                check_snapshots(log, batches, where, self.damaged)
                retry_in_flight(log, self.producers, where_is, self.leader_epoch, where)
            elif len(producer.in_flight) < MAX_IN_FLIGHT and roll < 0.75:
                batch = producer.next_batch(self.rng.randint(1, 6))
                info = log.append(batch.data, leader_epoch=self.leader_epoch)
                assert info.record_count > 0, f"a new batch taken for a duplicate: {info}"
            else:
                log.flush(log.log_end_offset)  # what acks=all waits for (GroupCommit)
                for each in self.producers:
                    each.all_acknowledged()


def test_idempotent_producers_retrying_after_power_cuts_store_every_record_once(
    fs: PowerCutFS,
) -> None:
    """Idempotent producers across segment rolls, clean shutdowns and new leader epochs, cut
    at random instants (keeping a random share of the unsynced pages, as a disk may), and
    now and then a snapshot torn or lost on top: nothing acknowledged is lost, no retry is
    written twice, no snapshot or leader epoch claims what the log does not hold."""
    rng = random.Random(SEED + 2508)
    damage: dict[str, int] = {}
    clean_restarts = retries = duplicates = 0
    for round_number in range(cuts(4)):
        data = fs.mount / f"data-{round_number}"
        config = broker_config(fs, log_dirs=(str(data),))
        producers = [IdempotentProducer(7000 + round_number * 10 + n) for n in range(3)]
        damaged_files: set[str] = set()
        for cut in range(9):
            manager = started(config)
            if cut == 0:
                TopicAdmin(manager, manager.config).create_topic(TP.topic, 1)
            log = manager.get_log(TP)
            where = f"round {round_number} cut {cut}"
            batches = stored_batches(log)
            where_is = check_records(batches, producers, where)
            check_snapshots(log, batches, where, damaged_files)
            check_leader_epochs(log, batches, where)
            leftovers = [p.name for p in log.dir.iterdir() if p.name.endswith(".tmp")]
            assert not leftovers, f"{where}: temporary files left: {leftovers}"
            retries += sum(len(p.in_flight) for p in producers)
            duplicates += retry_in_flight(log, producers, where_is, cut, where)
            if rng.random() < 0.3:  # a new epoch: sequences start again at 0
                bumped = rng.choice(producers)
                bumped.epoch += 1
                bumped.next_seq = bumped.acked = 0
            workload = Workload(config, manager, producers, rng, cut, damaged_files)
            with CutTimer(workload.run) as timer:
                time.sleep(rng.uniform(0, 0.08))
                fs.cut(
                    keep_unsynced=rng.choice([0.0, 0.0, 0.5, 1.0]),
                    seed=rng.randrange(1 << 30),
                    abandon=lambda: (timer.join(), abandon(workload.manager)),  # noqa: B023
                )
            clean_restarts += workload.clean_restarts
            directory = data / TP.dir_name
            for path in directory.iterdir():  # made durable whole, or not at all
                if is_snapshot_file(path.name) and path.name not in damaged_files:
                    read_snapshot(path)
            epoch_file_is_whole(directory)
            if rng.random() < 0.25:
                kind = tear_or_drop_a_snapshot(directory, rng, damaged_files)
                damage[kind] = damage.get(kind, 0) + 1
        shutil.rmtree(data)
    print(
        f"batches retried after a cut: {retries}, {duplicates} of them answered as duplicates; "
        f"clean restarts {clean_restarts}; snapshots damaged on top of the cut: {damage}"
    )
    assert duplicates > 0, "no cut fell between an append and its acknowledgement"


# --- regressions -------------------------------------------------------------------------------


def test_every_batch_in_flight_at_a_clean_shutdown_is_a_duplicate_after_the_restart(
    tmp_path: Path,
) -> None:
    """Regression: a snapshot held only each producer's last batch (as Kafka's do), so after
    a restart from it the retry of any other batch the producer still had in flight was
    refused with OUT_OF_ORDER_SEQUENCE_NUMBER (its records were written: a client giving up
    on it, or its user sending it again, stored them twice). Snapshots now keep the five
    batches a producer may have in flight."""
    config = BrokerConfig(log_dirs=(str(tmp_path / "data"),))
    manager = started(config)
    TopicAdmin(manager, manager.config).create_topic(TP.topic, 1)
    producer = IdempotentProducer(42, epoch=3)
    sent = [producer.next_batch(2) for _ in range(MAX_IN_FLIGHT)]
    offsets = [manager.get_log(TP).append(batch.data) for batch in sent]
    manager.shutdown()  # the answers never reached the producer
    manager = started(config)
    try:
        log = manager.get_log(TP)
        for batch, first in zip(sent, offsets, strict=True):
            info = log.append(batch.data)
            assert (info.record_count, info.first_offset) == (0, first.first_offset)
        assert log.log_end_offset == 2 * MAX_IN_FLIGHT
    finally:
        manager.shutdown()


def open_log_on(fs: PowerCutFS, recovery_point: int = 0) -> UnifiedLog:
    """A log on the power-cut file system whose scheduler never runs (no background write),
    opened after an unclean shutdown with ``recovery_point`` checkpointed."""
    from odradek.config.log_config import LogConfig
    from odradek.storage.scheduler import Scheduler

    return UnifiedLog.open(
        fs.mount / "idem-0",
        LogConfig(segment_bytes=1 << 20),
        Scheduler(),
        recovery_point=recovery_point,
    )


def epoch_batch(value: int) -> bytes:
    return build_batch([(int(time.time() * 1000), None, str(value).encode(), ())])


def test_a_leader_epoch_outlives_a_power_cut_once_its_records_are_flushed(fs: PowerCutFS) -> None:
    """Regression: a new leader epoch's checkpoint was written only in the background, so a
    cut could keep the epoch's acknowledged records and lose where the epoch starts (the next
    append then recorded a later start). It is now written before a recovery-point
    checkpoint passes it (no flush waits for it)."""
    log = open_log_on(fs)  # (its scheduler never runs: no background write)
    log.append(epoch_batch(0), leader_epoch=2)
    log.append(epoch_batch(1), leader_epoch=3)
    log.flush()
    assert log.leader_epoch_cache.unflushed  # the flush did not wait for it
    recovery_point = log.recovery_point_to_checkpoint()  # what the checkpoint holds next
    assert recovery_point == 2  # recovery skips both epochs' records
    fs.cut(abandon=log.close_handlers)
    log = open_log_on(fs, recovery_point)
    try:
        assert log.leader_epoch_cache.entries == [EpochEntry(2, 0), EpochEntry(3, 1)]
    finally:
        log.close()


def test_leader_epochs_of_records_written_back_before_the_cut_are_recovered(
    fs: PowerCutFS,
) -> None:
    """Regression: records the operating system wrote back (acks=1, no flush) survived a cut
    while the epoch they started did not: recovery now assigns the epochs of the batches
    above the recovery point again, as Kafka's does."""
    from odradek.storage.atomic_file import fsync_directory, fsync_file_if_exists

    log = open_log_on(fs)
    log.append(epoch_batch(0), leader_epoch=4)
    log.append(epoch_batch(1), leader_epoch=6)
    fsync_file_if_exists(log.active_segment.log.path)  # the write-back, before any flush
    fsync_directory(log.dir)
    fs.cut(abandon=log.close_handlers)
    log = open_log_on(fs)
    try:
        assert log.log_end_offset == 2
        assert log.leader_epoch_cache.entries == [EpochEntry(4, 0), EpochEntry(6, 1)]
    finally:
        log.close()


def test_a_leader_epoch_whose_records_a_cut_took_is_forgotten(fs: PowerCutFS) -> None:
    """Regression: the background write made an epoch durable whose first records were not
    (acks=1); after the cut the cache said the epoch started at an offset the log did not
    reach, and the records then appended in it were taken for the previous epoch's. Loading
    now truncates the cache to the log end, as Kafka's does."""
    log = open_log_on(fs)
    log.append(epoch_batch(0), leader_epoch=1)
    log.flush()
    log.append(epoch_batch(1), leader_epoch=5)
    log.leader_epoch_cache.flush()  # what the background write does
    fs.cut(abandon=log.close_handlers)
    log = open_log_on(fs)
    try:
        assert log.log_end_offset == 1
        assert log.leader_epoch_cache.entries == [EpochEntry(1, 0)]
        log.append(epoch_batch(1), leader_epoch=5)
        assert log.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(5, 1)]
    finally:
        log.close()


def test_a_snapshot_a_truncation_deleted_stays_deleted_after_a_cut(fs: PowerCutFS) -> None:
    """Regression: truncating the active segment deleted the snapshots above the new end
    without syncing the directory; a cut brought one back, describing records the
    truncation removed, and once the recovery point passed its offset again, loading took
    the producer state from it (a retry of a removed batch answered as a duplicate: lost)."""
    from odradek.storage.producer_snapshot_file import snapshot_file

    log = open_log_on(fs)
    producer = IdempotentProducer(11)
    for _ in range(4):
        log.append(producer.next_batch(2).data)
    log.flush()
    log.write_leader_epochs()  # (as a shutdown does: no later write of it syncs the directory)
    log.close()  # a clean stop: a snapshot at the log end, 8
    assert snapshot_file(log.dir, 8).exists()
    log = open_log_on(fs, recovery_point=8)
    log.flush()  # the directory as loading left it
    log.truncate_to(4)  # the last two batches go, and the snapshot at 8 with them
    assert not snapshot_file(log.dir, 8).exists()
    other = IdempotentProducer(12)
    for _ in range(3):
        log.append(other.next_batch(2).data)
    log.flush()
    recovery_point = log.recovery_point
    assert recovery_point == 10
    fs.cut(abandon=log.close_handlers)
    log = open_log_on(fs, recovery_point)
    try:
        assert not snapshot_file(log.dir, 8).exists()
        lost = producer.in_flight[2]  # removed by the truncation: a retry must write it
        assert log.append(lost.data).record_count == lost.count
    finally:
        log.close()


def transaction_batch(producer_id: int, sequence: int) -> bytes:
    return build_batch(
        [(int(time.time() * 1000), None, b"t%d-%d" % (producer_id, sequence), ())],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=True,
    )


def test_an_abort_and_an_open_transaction_made_durable_outlive_a_power_cut(fs: PowerCutFS) -> None:
    """An ABORT marker flushed (as the coordinator's write waits for) and a snapshot taken
    after it: the cut keeps the marker's .txnindex entry (synced with the segment, its name
    with the directory: the replay from the snapshot does not pass it again) and the
    transaction the snapshot holds open."""
    from odradek.storage.transaction_index import AbortedTxn

    log = open_log_on(fs)
    log.append(transaction_batch(7, 0))  # 0
    log.append(transaction_batch(7, 1))  # 1
    log.append(epoch_batch(0))  # 2
    log.flush()  # the segment's files are durable: the .txnindex comes later
    log.append_end_txn_marker(7, 0, 0, committed=False)  # 3
    log.append(transaction_batch(8, 0))  # 4, still open
    log.flush()
    log.take_producer_snapshot()  # at 5: the restart replays nothing
    recovery_point = log.recovery_point_to_checkpoint()
    assert recovery_point == 5
    fs.cut(abandon=log.close_handlers)
    log = open_log_on(fs, recovery_point)
    try:
        assert log.active_segment.txn_index.all_aborted_txns() == [AbortedTxn(7, 0, 3, 4)]
        log.update_high_watermark(log.log_end_offset)
        assert log.first_unstable_offset == 4
        assert log.local_log.collect_aborted_transactions(0, 5) == [AbortedTxn(7, 0, 3, 4)]
    finally:
        log.close()
