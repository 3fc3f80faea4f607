"""LogManager background tasks: retention, flush, checkpoints."""

from __future__ import annotations

import logging
from dataclasses import replace

from log_helpers import append, batch
from log_manager_helpers import broker_config, running, topic_admin, wait_until

from odradek.clock import MockClock
from odradek.storage.log_manager import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    LogManager,
)
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)


def checkpoint(tmp_path, log_dir, name):
    return OffsetCheckpointFile(tmp_path / log_dir / name).read()


def fill_segments(log: UnifiedLog, segments: int) -> None:
    while log.number_of_segments < segments:
        append(log, batch(1, value_size=300))


def test_cleanup_logs_applies_retention_to_every_log(tmp_path):
    clock = MockClock()
    with running(broker_config(tmp_path, log_segment_bytes=1024), clock) as manager:
        topic_admin(manager).create_topic("orders", 2, {"retention.ms": "1000"})
        logs = [manager.get_log(tp) for tp in manager.partitions("orders")]
        for log in logs:
            fill_segments(log, 3)
        assert manager.cleanup_logs() == 0
        clock.sleep(2000)
        assert manager.cleanup_logs() == 6
        assert all(log.number_of_segments == 1 for log in logs)
        assert all(log.log_start_offset == log.log_end_offset > 0 for log in logs)


def test_a_failing_partition_does_not_stop_retention_of_the_others(tmp_path, caplog, monkeypatch):
    clock = MockClock()
    with running(broker_config(tmp_path, log_segment_bytes=1024), clock) as manager:
        topic_admin(manager).create_topic("orders", 2, {"retention.ms": "1000"})
        broken, healthy = (manager.get_log(tp) for tp in (ORDERS_0, ORDERS_1))
        fill_segments(healthy, 3)

        def fail() -> int:
            raise OSError("simulated")

        monkeypatch.setattr(broken, "delete_old_segments", fail)
        clock.sleep(2000)
        with caplog.at_level(logging.ERROR):
            assert manager.cleanup_logs() == 3
    assert "[orders-0] retention check failed" in caplog.text


def test_flush_dirty_logs_flushes_logs_past_their_flush_ms(tmp_path):
    clock = MockClock()
    with running(broker_config(tmp_path), clock) as manager:
        topic_admin(manager).create_topic("slow", 1, {"flush.ms": "1000"})
        topic_admin(manager).create_topic("never", 1)
        slow, never = (manager.get_log(TopicPartition(t, 0)) for t in ("slow", "never"))
        append(slow, batch(3))
        append(never, batch(3))
        clock.sleep(999)
        manager.flush_dirty_logs()
        assert slow.recovery_point == 0
        clock.sleep(1)
        manager.flush_dirty_logs()
        assert slow.recovery_point == 3 and slow.last_flush_time == clock.milliseconds()
        assert never.recovery_point == 0


def test_checkpoint_tasks_write_each_dir_from_its_logs(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2)
        first, second = manager.get_log(ORDERS_0), manager.get_log(ORDERS_1)
        append(first, batch(5))
        first.append(batch(2))
        first.flush(4)
        first.delete_records(3)
        append(second, batch(1))
        manager.checkpoint_log_recovery_offsets()
        manager.checkpoint_log_start_offsets()
        manager.checkpoint_high_watermarks()
        assert checkpoint(tmp_path, "d0", RECOVERY_POINT_CHECKPOINT_FILE) == {ORDERS_0: 4}
        assert checkpoint(tmp_path, "d0", LOG_START_OFFSET_CHECKPOINT_FILE) == {ORDERS_0: 3}
        assert checkpoint(tmp_path, "d0", HIGH_WATERMARK_CHECKPOINT_FILE) == {ORDERS_0: 5}
        assert checkpoint(tmp_path, "d1", HIGH_WATERMARK_CHECKPOINT_FILE) == {ORDERS_1: 1}


def test_scheduler_runs_the_tasks_on_their_intervals(tmp_path):
    config = broker_config(
        tmp_path,
        dirs=1,
        log_segment_bytes=1024,
        log_retention_check_interval_ms=20,
        log_flush_scheduler_interval_ms=20,
        log_flush_offset_checkpoint_interval_ms=20,
        log_flush_start_offset_checkpoint_interval_ms=20,
        replica_high_watermark_checkpoint_interval_ms=20,
    )
    clock = MockClock()
    with running(config, clock, initial_task_delay_ms=0) as manager:
        topic_admin(manager).create_topic("orders", 1, {"retention.ms": "1000"})
        topic_admin(manager).create_topic("flushed", 1, {"flush.ms": "0"})
        log, flushed = manager.get_log(ORDERS_0), manager.get_log(TopicPartition("flushed", 0))
        fill_segments(log, 3)
        append(flushed, batch(2))
        log.update_high_watermark(log.log_end_offset)
        clock.sleep(2000)
        wait_until(
            lambda: (
                checkpoint(tmp_path, "d0", HIGH_WATERMARK_CHECKPOINT_FILE).get(ORDERS_0)
                == log.log_end_offset
            )
        )
        wait_until(lambda: log.number_of_segments == 1)
        wait_until(lambda: flushed.recovery_point == 2)
        wait_until(
            lambda: (
                checkpoint(tmp_path, "d0", LOG_START_OFFSET_CHECKPOINT_FILE).get(ORDERS_0)
                == log.log_start_offset
            )
        )
        wait_until(
            lambda: (
                checkpoint(tmp_path, "d0", RECOVERY_POINT_CHECKPOINT_FILE).get(
                    TopicPartition("flushed", 0)
                )
                == 2
            )
        )


def test_the_first_retention_check_waits_for_log_initial_task_delay_ms(tmp_path):
    """Kafka's ``log.initial.task.delay.ms``: how long after start-up the periodic tasks first
    run (30 s by default; tests comparing with Kafka set it to 0 on both brokers)."""
    config = broker_config(
        tmp_path, dirs=1, log_segment_bytes=1024, log_retention_check_interval_ms=20
    )
    clock = MockClock()
    manager = LogManager(replace(config, log_initial_task_delay_ms=0), clock=clock)
    manager.startup()
    try:
        topic_admin(manager).create_topic("orders", 1, {"retention.ms": "1000"})
        log = manager.get_log(ORDERS_0)
        fill_segments(log, 3)
        clock.sleep(2000)
        wait_until(lambda: log.number_of_segments == 1)
    finally:
        manager.shutdown()
    assert config.log_initial_task_delay_ms == 30_000
