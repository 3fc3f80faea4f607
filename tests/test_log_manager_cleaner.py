"""The LogManager and an attached log cleaner never work on one log at once (design §11, 12)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from log_helpers import BASE_TIME_MS, read_all
from log_manager_helpers import broker_config, running, topic_admin, wait_until

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_offset_checkpoints import CLEANER_OFFSET_CHECKPOINT_FILE
from odradek.cleaner.log_cleaner import LogCleaner
from odradek.clock import MockClock
from odradek.record.record_batch_builder import build_batch
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition


class RecordingCleaner:
    """A CleaningControl that records calls and pauses the logs it is told to."""

    def __init__(self, pausable: list[UnifiedLog] | None = None) -> None:
        self.pausable = pausable or []
        self.calls: list[tuple[str, object]] = []

    def pause_cleaning_for_non_compacted_partitions(self) -> list[UnifiedLog]:
        self.calls.append(("pause", [log.topic_partition for log in self.pausable]))
        return self.pausable

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        self.calls.append(("resume", list(tps)))

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.calls.append(("abort", tp))

    def handle_log_dir_failure(self, log_dir: Path) -> None:
        self.calls.append(("offline", log_dir))


def fill(log: UnifiedLog, batches: int, timestamp: int = BASE_TIME_MS) -> None:
    for n in range(batches):
        log.append(build_batch([(timestamp, f"k{n % 3}".encode(), b"v" * 200, ())]))
    log.update_high_watermark(log.log_end_offset)


def test_retention_runs_only_on_logs_the_cleaner_paused_and_resumes_them(tmp_path: Path) -> None:
    clock = MockClock(BASE_TIME_MS)
    config = broker_config(tmp_path, dirs=1, log_segment_bytes=1024, log_retention_ms=1000)
    with running(config, clock) as manager:
        topic_admin(manager).create_topic("kept", 1)
        topic_admin(manager).create_topic("expired", 1)
        for topic in ("kept", "expired"):
            fill(manager.get_log(TopicPartition(topic, 0)), 20)
        clock.sleep(10_000)
        expired = manager.get_log(TopicPartition("expired", 0))
        cleaner = RecordingCleaner([expired])
        manager.attach_cleaner(cleaner)
        assert manager.cleanup_logs() > 0
        assert manager.get_log(TopicPartition("kept", 0)).log_start_offset == 0
        assert expired.log_start_offset > 0
        assert cleaner.calls == [
            ("pause", [TopicPartition("expired", 0)]),
            ("resume", [TopicPartition("expired", 0)]),
        ]


def test_deleting_a_topic_aborts_its_cleaning_first(tmp_path: Path) -> None:
    with running(broker_config(tmp_path, dirs=1)) as manager:
        topic_admin(manager).create_topic("gone", 2)
        cleaner = RecordingCleaner()
        manager.attach_cleaner(cleaner)
        topic_admin(manager).delete_topic("gone")
        assert ("abort", TopicPartition("gone", 0)) in cleaner.calls
        assert ("abort", TopicPartition("gone", 1)) in cleaner.calls


def test_a_real_cleaner_compacts_a_topic_of_the_log_manager(tmp_path: Path) -> None:
    config = broker_config(tmp_path, dirs=1, log_segment_bytes=1024, log_cleaner_backoff_ms=50)
    with running(config, MockClock(BASE_TIME_MS)) as manager:
        topic_admin(manager).create_topic(
            "compacted", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
        )
        log = manager.get_log(TopicPartition("compacted", 0))
        fill(log, 30)
        log.roll()
        cleaner = LogCleaner(CleanerConfig.from_broker_config(config), manager.all_logs)
        manager.attach_cleaner(cleaner)
        cleaner.startup()
        try:
            wait_until(lambda: bool(cleaner.last_reports), timeout_s=30)
            manager.cleanup_logs()  # retention and cleaning side by side
        finally:
            cleaner.shutdown()
        records = read_all(log)
        assert len(records) < 30  # older values of the three keys were dropped
        assert {r.key: r.offset for r in records} == {b"k0": 27, b"k1": 28, b"k2": 29}
        assert [r.offset for r in records] == sorted(r.offset for r in records)
        assert cleaner.manager.first_dirty_offset(TopicPartition("compacted", 0)) > 0


def test_a_real_cleaner_gives_a_tombstone_the_horizon_of_its_clock(tmp_path: Path) -> None:
    """The cleaner thread plans each run at its clock's time: a kept tombstone's batch gets
    that time plus the topic's delete.retention.ms as its delete horizon (Kafka's KIP-534)."""
    clock = MockClock(BASE_TIME_MS + 7_000)
    config = broker_config(tmp_path, dirs=1, log_segment_bytes=1024, log_cleaner_backoff_ms=50)
    with running(config, clock) as manager:
        configs = {
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "5000",
        }
        topic_admin(manager).create_topic("compacted", 1, configs)
        log = manager.get_log(TopicPartition("compacted", 0))
        fill(log, 30)
        log.append(build_batch([(BASE_TIME_MS, b"k0", None, ())]))
        log.update_high_watermark(log.log_end_offset)
        log.roll()
        cleaner = LogCleaner(
            CleanerConfig.from_broker_config(config), manager.all_logs, clock=clock
        )
        cleaner.startup()
        try:
            wait_until(lambda: bool(cleaner.last_reports), timeout_s=30)
        finally:
            cleaner.shutdown()
        batches = [b for segment in log.segments.values() for _, b in segment.log.batches()]
        assert [(b.base_offset, b.delete_horizon_ms) for b in batches if b.delete_horizon_ms] == [
            (30, BASE_TIME_MS + 7_000 + 5_000)
        ]
        assert read_all(log)[-1].timestamp == BASE_TIME_MS


def test_the_cleaner_owns_its_checkpoint_per_dir_and_drops_a_deleted_topic(tmp_path: Path) -> None:
    config = broker_config(tmp_path, dirs=2)
    orders_0, orders_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 2)
        topic_admin(manager).create_topic("keep", 1)
        keep = TopicPartition("keep", 0)
        cleaner = LogCleaner(CleanerConfig.from_broker_config(config), manager.all_logs)
        manager.attach_cleaner(cleaner)
        checkpoints = cleaner.manager.checkpoints
        checkpoints.update_cleaner_offsets({orders_0: 10, orders_1: 20})
        checkpoints.update_cleaner_offsets({keep: 5, TopicPartition("gone", 0): 1})
        assert checkpoints.cleaner_offsets() == {orders_0: 10, orders_1: 20, keep: 5}
        orders_1_dir = manager.get_log(orders_1).dir.parent
        assert _checkpoint(orders_1_dir).get(orders_1) == 20
        topic_admin(manager).delete_topic("orders")  # the cleaner forgets them
        assert checkpoints.cleaner_offsets() == {keep: 5}
        assert orders_1 not in _checkpoint(orders_1_dir)
        assert not any(
            (log_dir / "cleaner-offset-checkpoint").exists() and orders_0 in _checkpoint(log_dir)
            for log_dir in manager.log_dirs
        )


def test_a_deleted_topic_leaves_the_checkpoint_even_before_the_cleaner_read_it(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, dirs=1)
    orders_0, keep = TopicPartition("orders", 0), TopicPartition("keep", 0)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
        topic_admin(manager).create_topic("keep", 1)
        checkpoints = LogCleaner(CleanerConfig(), manager.all_logs).manager.checkpoints
        checkpoints.update_cleaner_offsets({orders_0: 10, keep: 5})
    with running(config) as manager:  # a restart: nothing read the file yet
        manager.attach_cleaner(LogCleaner(CleanerConfig(), manager.all_logs))
        topic_admin(manager).delete_topic("orders")
        topic_admin(manager).create_topic("orders", 1)  # a new topic of the same name starts clean
        assert _checkpoint(manager.log_dirs[0]) == {keep: 5}


def test_cleaner_offsets_are_written_from_memory_and_read_back_after_a_restart(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, dirs=1)
    orders_0, orders_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 2)
        checkpoints = LogCleaner(CleanerConfig(), manager.all_logs).manager.checkpoints
        checkpoints.update_cleaner_offsets({orders_0: 10, orders_1: 20})
        path = manager.get_log(orders_0).dir.parent / CLEANER_OFFSET_CHECKPOINT_FILE
        path.write_text("0\n2\norders 0 999\nghost 0 7\n")  # the file is not read back
        checkpoints.update_cleaner_offsets({orders_0: 11})
        assert OffsetCheckpointFile(path).read() == {orders_0: 11, orders_1: 20}
    with running(config) as manager:
        checkpoints = LogCleaner(CleanerConfig(), manager.all_logs).manager.checkpoints
        assert checkpoints.cleaner_offsets() == {orders_0: 11, orders_1: 20}


def test_the_log_manager_writes_no_cleaner_checkpoint(tmp_path: Path) -> None:
    """One owner: without a cleaner, nothing writes ``cleaner-offset-checkpoint``."""
    with running(broker_config(tmp_path, dirs=1)) as manager:
        topic_admin(manager).create_topic("orders", 1, {"cleanup.policy": "compact"})
        manager.checkpoint_log_recovery_offsets()
        topic_admin(manager).delete_topic("orders")
        assert not (manager.log_dirs[0] / CLEANER_OFFSET_CHECKPOINT_FILE).exists()


def _checkpoint(log_dir: Path) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE).read()
