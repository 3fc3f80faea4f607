"""Power cuts at random instants, on a file system that keeps only what was made durable
(tests/powercut_fs.py): acknowledged records and completed administration survive, recovery
never serves garbage.

Each scenario drives a LogManager in this process against the FUSE mount, cuts the power at a
random moment of its work, opens the durable state again and checks it against what was
acknowledged. ``POWERCUT_CUTS`` scales the number of cuts (``make soak`` runs thousands; CI,
``CI=true``, runs them at scale 1, a local run at half that, as Hypothesis's dev profile runs a
share of CI's examples) and ``POWERCUT_SEED`` varies them.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import stat
import statistics
import time
from pathlib import Path

import confluent_kafka
import pytest

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.log_cleaner import LogCleaner
from odradek.client.consumer import Consumer
from odradek.client.producer import Producer
from odradek.config.broker_config import BrokerConfig
from odradek.config.log_config import LogConfig
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch_builder import build_batch
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.storage.atomic_file import fsync_directory, fsync_file_if_exists
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME, LogManager
from odradek.storage.precreated_segment import PRECREATED_SEGMENT_FILE
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition
from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import SEED, CutTimer, abandon, log_values, powercut_fs  # noqa: F401
from tests.serve_process import ServeProcess

CUTS_SCALE = float(
    os.environ.get("POWERCUT_CUTS") or (1 if os.environ.get("CI") == "true" else 0.5)
)


def cuts(count: int) -> int:
    return max(1, int(count * CUTS_SCALE))


def broker_config(fs: PowerCutFS, **settings: object) -> BrokerConfig:
    settings.setdefault("log_segment_bytes", 4096)
    settings.setdefault("log_dirs", (str(fs.mount / "data"),))
    return BrokerConfig(**settings)


def value_batch(values: list[int], key: bytes | None = None) -> bytes:
    """Records whose values are ``values`` (so a lost or repeated one is seen), stamped now
    (so time retention leaves them)."""
    now_ms = int(time.time() * 1000)
    return build_batch([(now_ms, key, str(v).encode(), ()) for v in values])


def started(config: BrokerConfig) -> LogManager:
    manager = LogManager(config, initial_task_delay_ms=10)
    manager.startup()
    return manager


def test_acks_all_records_survive_cuts_across_segment_rolls(fs: PowerCutFS) -> None:
    """acks=all: every acknowledged record survives, once, in order, with contiguous offsets;
    the log directory, the topic and its new segments survive the first cut after their
    creation. Each round starts a new log directory, so creation is cut often and the log
    each cut rebuilds stays small."""
    rng = random.Random(SEED + 2501)
    rounds, cuts_per_round = cuts(8), 8
    for round_number in range(rounds):
        config = broker_config(
            fs,
            log_dirs=(str(fs.mount / f"data-{round_number}"),),
            log_preallocate=round_number % 2 == 1,  # segment files preallocated, zero-filled
        )
        acks_all_round(fs, config, rng, cuts_per_round)
        shutil.rmtree(fs.mount / f"data-{round_number}")


def acks_all_round(fs: PowerCutFS, config: BrokerConfig, rng: random.Random, count: int) -> None:
    tp = TopicPartition("pc", 0)
    survived: list[bytes] = []  # the log's values as the last recovery found them
    acked: list[bytes] = []
    next_value = 0
    for cut in range(count + 1):
        manager = started(config)
        if cut == 0:
            TopicAdmin(manager, manager.config).create_topic("pc", 2)
        else:
            values = log_values(manager.get_log(tp))
            assert values[: len(survived)] == survived, f"cut {cut}: records vanished"
            present = set(values)
            missing = [v for v in acked if v not in present]
            assert not missing, f"cut {cut}: acknowledged records lost: {missing[:5]}"
            new = values[len(survived) :]
            assert all(int(a) < int(b) for a, b in zip(new, new[1:], strict=False)), (
                f"cut {cut}: records duplicated or out of order"
            )
            survived = values
        if cut == count:
            manager.shutdown()
            return
        log = manager.get_log(tp)
        produced_from = next_value

        def produce(stop, log=log, produced_from=produced_from) -> None:
            value = produced_from
            while not stop.is_set():
                batch_values = list(range(value, value + rng.randint(1, 5)))
                value += len(batch_values)
                info = log.append(value_batch(batch_values))
                log.flush(info.last_offset + 1)  # what acks=all waits for (GroupCommit)
                acked.extend(str(v).encode() for v in batch_values)

        with CutTimer(produce) as workload:
            time.sleep(rng.uniform(0, 0.04))
            fs.cut(abandon=lambda: (workload.join(), abandon(manager)))  # noqa: B023
        next_value = produced_from + 10_000


# --- the value of each record is its offset: a lost, repeated or misplaced record shows --------


def offset_valued_append(log: UnifiedLog, count: int) -> int:
    """Append ``count`` records valued by the offsets they get (one producer); the end offset."""
    start = log.log_end_offset
    info = log.append(value_batch(list(range(start, start + count))))
    assert info.first_offset == start
    return info.last_offset + 1


def check_offset_valued(log: UnifiedLog, durable_end: int, where: str) -> None:
    """Every record's value is its offset (no garbage, duplicate or hole: ``log_values``
    checks batches and contiguity), and the log reaches ``durable_end``. (Retention may move
    the log start meanwhile: the records are matched to the offsets they were read at.)"""
    first = log.log_start_offset
    values = log_values(log, first)
    misplaced = [
        (offset, value)
        for offset, value in enumerate(values, start=first)
        if value != str(offset).encode()
    ]
    assert not misplaced, f"{where}: records not at their offsets: {misplaced[:3]}"
    assert log.log_end_offset >= durable_end, (
        f"{where}: the log ends at {log.log_end_offset}, below {durable_end} made durable"
    )


def marker_exists(config: BrokerConfig) -> bool:
    return (Path(config.log_dirs[0]) / CLEAN_SHUTDOWN_FILE_NAME).exists()


def test_acks_1_loses_at_most_the_unsynced_tail_and_never_serves_garbage(fs: PowerCutFS) -> None:
    """acks=1 with flushes now and then (flush.messages, flush.ms): a cut costs at most the
    records after the last flush; whatever share of the unsynced pages the disk kept (holes
    included), recovery cuts the log back to whole batches. Half the cycles end in a clean
    shutdown first, so a cut often meets a log that started after one (its marker removed)."""
    rng = random.Random(SEED + 2502)
    tp = TopicPartition("pc", 0)
    for round_number in range(cuts(6)):
        data = fs.mount / f"data-{round_number}"
        config = broker_config(fs, log_dirs=(str(data),), log_preallocate=round_number % 2 == 1)
        durable_end = 0
        for cut in range(9):
            manager = started(config)
            if cut == 0:
                TopicAdmin(manager, manager.config).create_topic("pc", 1)
            log = manager.get_log(tp)
            check_offset_valued(log, durable_end, f"round {round_number} cut {cut}")
            if rng.random() < 0.5:
                for _ in range(rng.randint(1, 40)):
                    offset_valued_append(log, rng.randint(1, 5))
                manager.shutdown()  # clean: flushes everything
                durable_end = log.log_end_offset
                manager = started(config)
                log = manager.get_log(tp)
            flushed = [durable_end]

            def produce(stop, log=log, flushed=flushed) -> None:
                while not stop.is_set():
                    end = offset_valued_append(log, rng.randint(1, 5))
                    if rng.random() < 0.1:
                        log.flush(end)
                        flushed[0] = end

            with CutTimer(produce) as workload:
                time.sleep(rng.uniform(0, 0.03))
                fs.cut(
                    keep_unsynced=rng.choice([0.0, 0.3, 0.8, 1.0]),
                    seed=rng.randrange(1 << 30),
                    abandon=lambda: (workload.join(), abandon(manager)),  # noqa: B023
                )
            durable_end = flushed[0]
        shutil.rmtree(data)


def test_a_clean_shutdown_cut_halfway_never_claims_what_was_not_made_durable(
    fs: PowerCutFS,
) -> None:
    """The clean-shutdown marker, if the cut left it, vouches for every record appended before
    the shutdown (recovery is skipped on its word); without it, recovery finds a sound log."""
    rng = random.Random(SEED + 2503)
    tp = TopicPartition("pc", 0)
    markers = cut_count = 0
    durations = [0.03]  # seconds the shutdowns the cut did not stop took
    for round_number in range(cuts(4)):
        data = fs.mount / f"data-{round_number}"
        config = broker_config(fs, log_dirs=(str(data),))
        durable_end = 0
        for cut in range(10):
            manager = started(config)
            if cut == 0:
                TopicAdmin(manager, manager.config).create_topic("pc", 1)
            log = manager.get_log(tp)
            check_offset_valued(log, durable_end, f"round {round_number} cut {cut}")
            for _ in range(rng.randint(1, 60)):
                end = offset_valued_append(log, rng.randint(1, 5))
            if rng.random() < 0.3:
                log.roll()

            def shut_down(stop, manager=manager) -> None:
                started_at = time.monotonic()
                manager.shutdown()
                durations.append(time.monotonic() - started_at)

            with CutTimer(shut_down) as workload:
                # Within twice the time a whole shutdown took lately: before, during, after.
                time.sleep(rng.uniform(0, 2 * statistics.median(durations[-5:])))
                fs.cut(
                    keep_unsynced=rng.choice([0.0, 0.5, 1.0]),
                    seed=rng.randrange(1 << 30),
                    abandon=lambda: (workload.join(), abandon(manager)),  # noqa: B023
                )
            cut_count += 1
            if marker_exists(config):
                markers += 1
                durable_end = end
            else:  # the cut came first: shutdowns may take longer than thought
                durations.append(1.5 * statistics.median(durations[-5:]))
        shutil.rmtree(data)
    print(f"clean-shutdown markers left by {markers} of {cut_count} cuts")
    assert 0 < markers < cut_count  # the cuts fell before, during and after the shutdown


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file's content (None for a directory) under ``root``, by relative path; the
    directory lock's holder (rewritten at each start) is left out."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.name != ".lock"
    }


def test_a_power_cut_after_a_clean_shutdown_loses_nothing(fs: PowerCutFS) -> None:
    """Regression: closing trimmed the active segment's indexes and added its last time index
    entry after the final flush, unsynced, and the clean-shutdown marker then vouched for
    them: after a cut the active segment's indexes were gone with no recovery to rebuild
    them."""
    config = broker_config(fs, log_segment_bytes=1 << 20, log_index_interval_bytes=64)
    manager = started(config)
    TopicAdmin(manager, manager.config).create_topic("pc", 2)
    for partition in (0, 1):
        log = manager.get_log(TopicPartition("pc", partition))
        for _ in range(50):
            offset_valued_append(log, 3)
    manager.shutdown()
    before = tree(fs.mount / "data")
    fs.cut()
    assert tree(fs.mount / "data") == before


def test_the_clean_shutdown_marker_is_gone_for_good_before_the_first_write(
    fs: PowerCutFS,
) -> None:
    """Regression: start-up unlinked the marker without an fsync of its directory, so a cut
    before the next directory fsync brought it back over records written meanwhile, and
    recovery of their torn tail was skipped on its word."""
    config = broker_config(fs)
    manager = started(config)
    TopicAdmin(manager, manager.config).create_topic("pc", 1)
    manager.shutdown()
    assert marker_exists(config)
    manager = LogManager(config, initial_task_delay_ms=60_000)  # no checkpoint fsyncs the dir
    manager.startup()
    offset_valued_append(manager.get_log(TopicPartition("pc", 0)), 5)
    fs.cut(abandon=lambda: abandon(manager))
    assert not marker_exists(config)


TopicState = tuple[int, dict[str, str]] | None  # (partitions, overrides), None when absent


def topic_state(manager: LogManager, topic: str) -> TopicState:
    partitions = manager.partitions(topic)
    if not partitions:
        return None
    return len(partitions), TopicAdmin(manager, manager.config).topic_overrides(topic)


def test_topic_creation_deletion_and_config_changes_survive_once_acknowledged(
    fs: PowerCutFS,
) -> None:
    """Every acknowledged create, delete and alter-configs holds after a cut; the one in
    flight has happened or not. (Creation is all or nothing; deletion of a topic of several
    partitions is not atomic yet: the one in flight may leave some of its partitions.)"""
    rng = random.Random(SEED + 2504)
    config = broker_config(fs)
    model: dict[str, TopicState] = {}
    outcomes = {"before": 0, "after": 0, "partial": 0}
    names = [f"t{n}" for n in range(6)]
    for cut in range(cuts(40)):
        manager = started(config)
        for topic, expected in model.items():
            assert topic_state(manager, topic) == expected, f"cut {cut}: topic {topic}"
        in_flight: list[tuple[str, TopicState, TopicState]] = []

        def administer(stop, manager=manager, in_flight=in_flight) -> None:
            while not stop.is_set():
                topic = rng.choice(names)
                before = model.get(topic)
                overrides = {"retention.ms": str(rng.randint(1, 10**9))}
                if before is None:
                    after: TopicState = (rng.randint(1, 3), overrides)
                    in_flight[:] = [(topic, before, after)]
                    TopicAdmin(manager, manager.config).create_topic(topic, after[0], overrides)
                elif rng.random() < 0.5:
                    after = None
                    in_flight[:] = [(topic, before, after)]
                    TopicAdmin(manager, manager.config).delete_topic(topic)
                else:
                    after = (before[0], overrides)
                    in_flight[:] = [(topic, before, after)]
                    TopicAdmin(manager, manager.config).alter_topic_config(topic, overrides)
                model[topic] = after
                in_flight.clear()

        with CutTimer(administer) as workload:
            time.sleep(rng.uniform(0, 0.05))
            fs.cut(abandon=lambda: (workload.join(), abandon(manager)))  # noqa: B023
        if in_flight:
            topic, before, after = in_flight[0]
            manager = started(config)
            found = topic_state(manager, topic)
            abandon_cleanly(manager)
            outcome = "before" if found == before else "after" if found == after else "partial"
            assert outcome != "partial" or partial(found, before, after), (
                f"cut {cut}: topic {topic} is {found}, neither {before} nor {after}"
            )
            outcomes[outcome] += 1
            model[topic] = found
    print(f"operations in flight at the cut: {outcomes}")


def partial(found: TopicState, before: TopicState, after: TopicState) -> bool:
    """A topic of several partitions cut halfway through its deletion: some of its
    partitions, with the overrides it had. A creation is never partial."""
    if found is None or before is None or after is not None:
        return False
    return found[0] < before[0] and found[1] in (before[1], {})


def abandon_cleanly(manager: LogManager) -> None:
    manager.shutdown()


def busy_broker_config(fs: PowerCutFS, data: Path, **settings: object) -> BrokerConfig:
    """Background tasks every few milliseconds, so cuts land in checkpoint writes,
    retention's renames and delayed deletes."""
    for name in (
        "log_retention_check_interval_ms",
        "log_flush_offset_checkpoint_interval_ms",
        "log_flush_start_offset_checkpoint_interval_ms",
        "replica_high_watermark_checkpoint_interval_ms",
        "log_segment_delete_delay_ms",
    ):
        settings.setdefault(name, 5)
    return broker_config(fs, log_dirs=(str(data),), **settings)


def test_retention_and_checkpoints_cut_at_random_instants_leave_a_whole_log(
    fs: PowerCutFS,
) -> None:
    """Retention deletes segments (rename to .deleted, delayed delete) and checkpoints are
    rewritten every few milliseconds while acks=all records arrive: after any cut the log is
    one contiguous run of records, each at its offset, up to the last acknowledged one, and
    its log start offset is where its first segment's records begin."""
    rng = random.Random(SEED + 2505)
    tp = TopicPartition("pc", 0)
    for round_number in range(cuts(5)):
        data = fs.mount / f"data-{round_number}"
        config = busy_broker_config(fs, data, log_retention_bytes=3 * 4096)
        acked_end = 0
        for cut in range(9):
            manager = started(config)
            if cut == 0:
                TopicAdmin(manager, manager.config).create_topic("pc", 1)
            log = manager.get_log(tp)
            check_offset_valued(log, acked_end, f"round {round_number} cut {cut}")
            acked = [acked_end]

            def produce(stop, log=log, acked=acked) -> None:
                while not stop.is_set():
                    end = offset_valued_append(log, rng.randint(1, 20))
                    log.flush(end)
                    log.update_high_watermark(end)  # retention deletes only below it
                    acked[0] = end

            with CutTimer(produce) as workload:
                time.sleep(rng.uniform(0.01, 0.08))
                fs.cut(abandon=lambda: (workload.join(), abandon(manager)))  # noqa: B023
            acked_end = acked[0]
        manager = started(config)
        log = manager.get_log(tp)
        check_offset_valued(log, acked_end, f"round {round_number} at its end")
        for _ in range(2000):  # a slow machine may not have got that far
            if log.log_start_offset > 0:
                break
            offset_valued_append(log, 20)
            log.update_high_watermark(log.log_end_offset)
            manager.cleanup_logs()
        manager.shutdown()
        assert log.log_start_offset > 0, "retention never deleted a segment"
        shutil.rmtree(data)


def test_compaction_and_its_segment_swap_cut_at_random_instants_keep_every_latest_value(
    fs: PowerCutFS,
) -> None:
    """The cleaner (its worker process writing ``.cleaned`` segments, the broker renaming them
    ``.swap`` and then into place) runs while keyed acks=all records arrive: after any cut
    every record is at its offset, in order, and the latest acknowledged record of every key
    is there or superseded by a later one; records of keys written once are never lost."""
    rng = random.Random(SEED + 2506)
    tp = TopicPartition("pc", 0)
    config = busy_broker_config(
        fs,
        fs.mount / "data",
        log_cleaner_enable=True,
        log_cleaner_backoff_ms=5,
        log_cleaner_min_cleanable_ratio=0.01,
        log_cleaner_dedupe_buffer_size=1 << 20,
    )
    acked_end = 0
    latest: dict[bytes, int] = {}  # key -> the offset of its last acknowledged record
    leftovers: dict[str, int] = {}  # what cuts left for recovery to finish or undo
    for cut in range(cuts(12)):
        if cut > 0:
            for path in (fs.mount / "data" / "pc-0").iterdir():
                for suffix in (".cleaned", ".swap", ".deleted"):
                    if path.name.endswith(".log" + suffix):
                        leftovers[suffix] = leftovers.get(suffix, 0) + 1
        manager = started(config)
        cleaner = LogCleaner(
            CleanerConfig.from_broker_config(config),
            manager.all_logs,
            on_dir_failure=manager.failure_channel.maybe_add_offline_log_dir,
        )
        manager.attach_cleaner(cleaner)
        cleaner.startup()
        if cut == 0:
            TopicAdmin(manager, manager.config).create_topic("pc", 1, {"cleanup.policy": "compact"})
        log = manager.get_log(tp)
        records = log_records(log)
        assert all(value == str(offset).encode() for offset, _, value in records), (
            f"cut {cut}: a record is not at its offset"
        )
        assert log.log_end_offset >= acked_end, f"cut {cut}: acknowledged records lost"
        newest = {key: offset for offset, key, _ in records}
        lost = [key for key, offset in latest.items() if newest.get(key, -1) < offset]
        assert not lost, f"cut {cut}: the latest values of {lost[:5]} are gone"
        acked = [acked_end]

        def produce(stop, log=log, acked=acked) -> None:
            while not stop.is_set():
                start = log.log_end_offset
                offsets = range(start, start + rng.randint(1, 10))
                info = log.append(keyed_batch(offsets))
                assert info.first_offset == start
                log.flush(info.last_offset + 1)
                log.update_high_watermark(info.last_offset + 1)  # the cleaner stays below it
                for offset in offsets:
                    latest[key_of(offset)] = offset
                acked[0] = info.last_offset + 1

        with CutTimer(produce) as workload:
            time.sleep(rng.uniform(0.05, 0.6))
            fs.cut(
                abandon=lambda: (workload.join(), cleaner.shutdown(), abandon(manager)),  # noqa: B023
            )
        acked_end = acked[0]
    # Without cuts, the log all those cuts left is cleaned like any other (on a slow machine
    # the cuts may have stopped every run before its swap).
    manager = started(config)
    cleaner = LogCleaner(
        CleanerConfig.from_broker_config(config),
        manager.all_logs,
        on_dir_failure=manager.failure_channel.maybe_add_offline_log_dir,
    )
    manager.attach_cleaner(cleaner)
    cleaner.startup()
    try:
        log = manager.get_log(tp)
        deadline = time.monotonic() + 60
        while not cleaner.last_reports and time.monotonic() < deadline:
            time.sleep(0.05)
        records = log_records(log)
    finally:
        cleaner.shutdown()
        manager.shutdown()
    cleaned = log.log_end_offset - log.log_start_offset - len(records)
    print(f"cleaned away {cleaned} records; segment files the cuts left: {leftovers}")
    assert all(value == str(offset).encode() for offset, _, value in records)
    assert cleaned > 0, "the cleaner never removed a record"


def key_of(offset: int) -> bytes:
    """Mostly five hot keys, overwritten all the time; every 37th record a key of its own."""
    return f"once-{offset}".encode() if offset % 37 == 0 else f"hot-{offset % 5}".encode()


def keyed_batch(offsets: range) -> bytes:
    now_ms = int(time.time() * 1000)
    return build_batch([(now_ms, key_of(o), str(o).encode(), ()) for o in offsets])


def log_records(log: UnifiedLog) -> list[tuple[int, bytes | None, bytes]]:
    """(offset, key, value) of every record from the log start to the log end: batches whole,
    CRCs right, offsets increasing (a compacted log has gaps)."""
    found: list[tuple[int, bytes | None, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
        assert info.records is not None, f"nothing read at {offset} below {log.log_end_offset}"
        batches = list(MemoryRecords(info.records.read_bytes()).batches())
        assert batches, f"no whole batch at offset {offset}"
        for batch in batches:
            batch.ensure_valid()
            for record in batch.records():
                if record.offset >= offset:
                    found.append((record.offset, record.key, record.value))
            offset = max(offset, batch.last_offset + 1)
    offsets = [o for o, _, _ in found]
    assert offsets == sorted(set(offsets)), "offsets repeat or go back"
    return found


@pytest.mark.slow
def test_a_broker_process_loses_no_acks_all_record_to_power_cuts(fs: PowerCutFS) -> None:
    """``odradek serve`` on the power-cut file system, fed by the project's producer with
    acks=all and read back by its consumer after each cut (the broker killed with the
    power): every acknowledged record is there once, offsets contiguous."""
    rng = random.Random(SEED + 2507)
    tp = TopicPartition("pc", 0)
    settings = ["--set", "log.segment.bytes=1048576", "--set", "num.partitions=2"]
    acked: set[bytes] = set()
    next_value = 0
    for cut in range(cuts(4)):
        broker = ServeProcess(fs.mount / "data", *settings)
        try:
            next_value = broker_round(fs, broker, rng, cut, acked, next_value)
        finally:
            broker.stop(signal.SIGKILL)
    assert len(acked) > 0
    broker = ServeProcess(fs.mount / "data", *settings)
    try:
        assert acked <= set(consume_all(broker.bootstrap, tp))
    finally:
        broker.stop()


def broker_round(
    fs: PowerCutFS,
    broker: ServeProcess,
    rng: random.Random,
    cut: int,
    acked: set[bytes],
    next_value: int,
) -> int:
    """Check what the last cut left, produce until the next one; the next value to send."""
    tp = TopicPartition("pc", 0)
    if cut > 0:
        values = consume_all(broker.bootstrap, tp)
        assert len(values) == len(set(values)), f"cut {cut}: records duplicated"
        missing = acked - set(values)
        assert not missing, f"cut {cut}: {len(missing)} acknowledged records lost"
    producer = Producer(
        bootstrap_servers=broker.bootstrap,
        acks="all",
        linger_ms=2,
        retries=0,  # a retry may repeat a record whose answer the cut swallowed
        request_timeout_ms=3000,
        delivery_timeout_ms=4000,
    )

    def produce(stop) -> None:
        value = next_value
        while not stop.is_set():
            sent = []
            for _ in range(rng.randint(1, 200)):
                record = f"v{value}:".ljust(600, "x").encode()  # rolls 1 MiB segments
                sent.append((record, producer.send("pc", record, partition=0)))
                value += 1
            for record, future in sent:
                try:
                    future.result(timeout=5)
                except Exception:
                    return  # the broker lost power: nothing after this is acknowledged
                acked.add(record)

    with CutTimer(produce) as workload:
        time.sleep(rng.uniform(0.3, 1.5))
        fs.cut(
            abandon=lambda: (
                broker.stop(signal.SIGKILL),
                workload.join(),
                producer.close(timeout=0),
            )
        )
    return next_value + 1_000_000


def test_a_broker_process_loses_no_acks_all_record_of_a_kafka_producer_to_power_cuts(
    fs: PowerCutFS,
) -> None:
    """The same with a Kafka client (librdkafka at acks=all, up to five requests in flight):
    its one-partition produce requests take the Kafka connection's acks=all answers that wait
    for their group commit without a task, each sent only once its fsync has ended."""
    rng = random.Random(SEED + 2508)
    tp = TopicPartition("pc", 0)
    settings = ["--set", "log.segment.bytes=1048576", "--set", "num.partitions=2"]
    acked: set[bytes] = set()
    next_value = 0
    for cut in range(cuts(4)):
        broker = ServeProcess(fs.mount / "data", *settings)
        try:
            next_value = kafka_producer_round(fs, broker, rng, cut, acked, next_value)
        finally:
            broker.stop(signal.SIGKILL)
    assert len(acked) > 0
    broker = ServeProcess(fs.mount / "data", *settings)
    try:
        assert acked <= set(consume_all(broker.bootstrap, tp))
    finally:
        broker.stop()


def kafka_producer_round(
    fs: PowerCutFS,
    broker: ServeProcess,
    rng: random.Random,
    cut: int,
    acked: set[bytes],
    next_value: int,
) -> int:
    """``broker_round`` with librdkafka's producer: what the last cut left, then produce
    until the next one; the next value to send."""
    tp = TopicPartition("pc", 0)
    if cut > 0:
        values = consume_all(broker.bootstrap, tp)
        assert len(values) == len(set(values)), f"cut {cut}: records duplicated"
        missing = acked - set(values)
        assert not missing, f"cut {cut}: {len(missing)} acknowledged records lost"
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "enable.idempotence": False,
            "retries": 0,  # a retry may repeat a record whose answer the cut swallowed
            "max.in.flight": 5,
            "request.timeout.ms": 3000,
            "message.timeout.ms": 4000,
        }
    )

    def delivered(error: object, message: confluent_kafka.Message) -> None:
        if error is None:
            acked.add(message.value())

    def produce(stop) -> None:
        value = next_value
        while not stop.is_set():
            for _ in range(rng.randint(1, 200)):
                record = f"k{value}:".ljust(600, "x").encode()  # rolls 1 MiB segments
                producer.produce("pc", record, partition=0, on_delivery=delivered)
                value += 1
            if producer.flush(5) > 0:
                return  # the broker lost power: nothing after this is acknowledged

    with CutTimer(produce) as workload:
        time.sleep(rng.uniform(0.3, 1.5))
        fs.cut(
            abandon=lambda: (
                broker.stop(signal.SIGKILL),
                workload.join(),
                producer.purge(),
            )
        )
    return next_value + 1_000_000


def consume_all(bootstrap: str, tp: TopicPartition) -> list[bytes]:
    """Every record value of ``tp`` from its beginning to its end, checking offsets run on."""
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        records: list = []
        deadline = time.monotonic() + 30
        while (not records or records[-1].offset < end - 1) and end > 0:
            assert time.monotonic() < deadline, "the consumer did not reach the log end"
            records += consumer.poll(500)
    offsets = [record.offset for record in records]
    assert offsets == list(range(offsets[0] if offsets else 0, end)), "offsets not contiguous"
    return [record.value for record in records]


def test_a_segment_whose_unflushed_tail_was_lost_leaves_no_hole_before_the_next(
    fs: PowerCutFS,
) -> None:
    """Regression (acks=1): the operating system wrote back a new segment's pages (and its
    name) before the rolled segment's unflushed tail, then the power went. Recovery found the
    rolled segment short and the next one whole, and served a log with a hole: records lost
    in the middle, later ones kept. It now cuts the log at the hole (everything after it was
    unflushed: a flush syncs the segments in order)."""
    directory = fs.mount / "pc-0"
    scheduler = Scheduler()  # never started: the flush a roll schedules does not run
    log = UnifiedLog.open(directory, LogConfig(segment_bytes=1 << 20), scheduler)
    flushed_end = offset_valued_append(log, 10)
    log.flush()
    offset_valued_append(log, 10)  # the rolled segment's tail, never flushed
    new_segment = log.roll()
    offset_valued_append(log, 10)
    fsync_file_if_exists(new_segment.log.path)  # the write-back that happened to come first
    fsync_directory(directory)
    fs.cut(abandon=log.close_handlers)
    log = UnifiedLog.open(directory, LogConfig(segment_bytes=1 << 20), scheduler)
    try:
        check_offset_valued(log, flushed_end, "after the cut")
        assert log.log_end_offset == flushed_end
    finally:
        log.close()


@contextlib.contextmanager
def counting_directory_fsyncs(synced: list[int]):
    """Adds to ``synced`` each directory fsync made meanwhile."""
    original = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            synced.append(fd)
        original(fd)

    os.fsync = fsync
    try:
        yield
    finally:
        os.fsync = original


class QueuedScheduler:
    """Keeps the tasks a UnifiedLog schedules, for the test to run when it chooses."""

    def __init__(self) -> None:
        self.tasks: list = []

    def schedule(self, name: str, function, delay_ms: int = 0, period_ms=None) -> None:
        self.tasks.append(function)

    def run_pending(self) -> None:
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task()


def test_a_roll_s_trim_of_a_preallocated_segment_is_durable_before_the_recovery_point_passes(
    fs: PowerCutFS,
) -> None:
    """Regression: an acks=all flush that ended exactly at a segment's end synced it with its
    preallocated zeros; the roll then trimmed it, and the next acks=all flush synced only the
    new segment and moved the recovery point past the rolled one. A cut before the roll's
    background flush brought the zeros back in a segment the next start, trusting the
    checkpointed recovery point, did not recover: reads served them (CORRUPT_MESSAGE)."""
    directory = fs.mount / "pc-0"
    scheduler = QueuedScheduler()  # the roll's background flush never runs
    config = LogConfig(segment_bytes=1 << 16, preallocate=True)
    log = UnifiedLog.open(directory, config, scheduler)
    rolled_end = offset_valued_append(log, 10)
    log.flush(rolled_end)  # the recovery point is the active segment's end
    rolled = log.segments.active_segment
    log.roll()  # trims the rolled segment's preallocated tail
    end = offset_valued_append(log, 10)
    log.flush(end)  # what acks=all waits for
    rolled_size = rolled.size
    checkpointed = log.recovery_point  # what the recovery-point checkpoint would say
    assert checkpointed == end
    fs.cut(abandon=log.close_handlers)
    assert rolled.log.path.stat().st_size == rolled_size  # its trim was made durable
    log = UnifiedLog.open(directory, config, scheduler, recovery_point=checkpointed)
    try:
        check_offset_valued(log, end, "after the cut")
        assert log.log_end_offset == end
    finally:
        log.close_handlers()


def test_a_segment_in_a_pre_created_file_survives_a_cut_that_undid_its_rename(
    fs: PowerCutFS,
) -> None:
    """A roll renames the pre-created segment file into place and the acks=all flush after it
    syncs no directory; the cut undoes the rename (the file is durable under its pre-created
    name only), and loading puts the segment back under its own name with every flushed
    record."""
    directory = fs.mount / "pc-0"
    scheduler = QueuedScheduler()
    config = LogConfig(segment_bytes=1 << 20)
    log = UnifiedLog.open(directory, config, scheduler)
    offset_valued_append(log, 10)
    log.roll()  # the first roll creates its files: its flush syncs the directory
    scheduler.run_pending()  # ... and pre-creates the next segment's file
    assert (directory / PRECREATED_SEGMENT_FILE).exists()
    offset_valued_append(log, 10)
    rolled = log.roll()  # takes the pre-created file
    assert not (directory / PRECREATED_SEGMENT_FILE).exists()
    end = offset_valued_append(log, 10)
    synced: list[int] = []
    with counting_directory_fsyncs(synced):
        log.flush(end)  # what acks=all waits for
    assert not synced, "the roll's segment needed a directory fsync"
    fs.cut(abandon=log.close_handlers)  # before the roll's background task ran
    assert (directory / PRECREATED_SEGMENT_FILE).exists()
    assert not rolled.log.path.exists()
    log = UnifiedLog.open(directory, config, scheduler)
    try:
        check_offset_valued(log, end, "after the cut")
        assert log.log_end_offset == end
        assert rolled.log.path.exists()
        assert not (directory / PRECREATED_SEGMENT_FILE).exists()
    finally:
        log.close()


def test_an_unused_pre_created_segment_file_left_by_a_cut_is_deleted(fs: PowerCutFS) -> None:
    """The pre-created file a cut (or any stop) leaves unused is deleted at load; rolls after
    it work as before, and every flushed record is there."""
    directory = fs.mount / "pc-0"
    scheduler = QueuedScheduler()
    config = LogConfig(segment_bytes=1 << 20)
    log = UnifiedLog.open(directory, config, scheduler)
    offset_valued_append(log, 10)
    log.roll()
    scheduler.run_pending()
    end = offset_valued_append(log, 10)
    log.flush(end)
    fs.cut(abandon=log.close_handlers)
    assert (directory / PRECREATED_SEGMENT_FILE).stat().st_size == 0
    log = UnifiedLog.open(directory, config, scheduler)
    try:
        assert not (directory / PRECREATED_SEGMENT_FILE).exists()
        check_offset_valued(log, end, "after the cut")
        log.roll()
        scheduler.run_pending()
        end = offset_valued_append(log, 10)
        log.flush(end)
        check_offset_valued(log, end, "after a roll")
        assert log.number_of_segments == 3
    finally:
        log.close()


@pytest.mark.slow
def test_a_broker_killed_with_pre_created_segment_files_restarts_with_every_record(
    tmp_path: Path,
) -> None:
    """SIGKILL (no power cut: the page cache survives) while segments roll into pre-created
    files: the restarted broker serves every acknowledged record once, with contiguous
    offsets, and leaves no pre-created file it did not make itself."""
    settings = ["--set", "log.segment.bytes=1048576", "--set", "num.partitions=1"]
    data = tmp_path / "data"
    tp = TopicPartition("pc", 0)
    broker = ServeProcess(data, *settings)
    try:
        producer = Producer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=2)
        sent = [f"v{n}:".ljust(20_000, "x").encode() for n in range(110)]  # two rolls
        futures = [producer.send("pc", value, partition=0) for value in sent]
        for future in futures:
            future.result(timeout=60)
        producer.close(timeout=0)
        deadline = time.monotonic() + 60
        while not (data / "pc-0" / PRECREATED_SEGMENT_FILE).exists():
            assert time.monotonic() < deadline, "no segment file was pre-created"
            time.sleep(0.05)
    finally:
        broker.stop(signal.SIGKILL)
    broker = ServeProcess(data, *settings)
    try:
        assert not (data / "pc-0" / PRECREATED_SEGMENT_FILE).exists()
        assert consume_all(broker.bootstrap, tp) == sent
    finally:
        broker.stop()
