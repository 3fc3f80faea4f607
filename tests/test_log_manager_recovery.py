"""LogManager start-up and shutdown: discovery, checkpoints, clean and unclean restarts."""

from __future__ import annotations

import logging
import shutil
import threading

import pytest
from log_helpers import append, batch, read_all
from log_manager_helpers import broker_config, running, topic_admin

from odradek.config.log_config import LogConfig
from odradek.errors import KafkaStorageError
from odradek.storage import log_file_names as names
from odradek.storage import log_manager as log_manager_module
from odradek.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE_NAME,
    HIGH_WATERMARK_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    LogManager,
)
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

ORDERS_0 = TopicPartition("orders", 0)


def corrupt_last_byte(segment_file):
    with open(segment_file, "r+b") as file:
        file.seek(-1, 2)
        last = file.read(1)
        file.seek(-1, 2)
        file.write(bytes([last[0] ^ 0xFF]))


def test_shutdown_writes_checkpoints_and_clean_markers(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 2)
        append(manager.get_log(ORDERS_0), batch(4))
    for log_dir in ("d0", "d1"):
        assert (tmp_path / log_dir / CLEAN_SHUTDOWN_FILE_NAME).exists()
    checkpoint = tmp_path / "d0" / RECOVERY_POINT_CHECKPOINT_FILE
    assert checkpoint.read_text() == "0\n1\norders 0 4\n"
    assert OffsetCheckpointFile(tmp_path / "d0" / HIGH_WATERMARK_CHECKPOINT_FILE).read() == {
        ORDERS_0: 4
    }


def test_startup_removes_the_clean_markers(tmp_path):
    config = broker_config(tmp_path)
    with running(config):
        pass
    with running(config):
        assert not list(tmp_path.glob(f"d*/{CLEAN_SHUTDOWN_FILE_NAME}"))


def test_clean_start_skips_recovery_and_unclean_start_recovers(tmp_path):
    config = broker_config(tmp_path, dirs=1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(ORDERS_0)
        append(log, batch(3))
        append(log, batch(2))
        segment = names.log_file(log.dir, 0)
    corrupt_last_byte(segment)

    with running(config) as manager:
        log = manager.get_log(ORDERS_0)
        assert log.log_end_offset == 5
        assert manager.load_summary.recovered_segments == 0
        assert manager.load_summary.truncated_bytes == 0
    (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE_NAME).unlink()

    with running(config) as manager:
        log = manager.get_log(ORDERS_0)
        assert log.log_end_offset == 3
        assert [r.offset for r in read_all(log)] == [0, 1, 2]
        summary = manager.load_summary
        assert (summary.partitions, summary.recovered_segments) == (1, 1)
        assert summary.truncated_bytes > 0 and summary.recovered_bytes > 0


def test_unclean_start_recovers_only_from_the_recovery_point(tmp_path):
    config = broker_config(tmp_path, dirs=1, log_segment_bytes=1024)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(ORDERS_0)
        for _ in range(8):
            append(log, batch(1, value_size=300))
        segments = log.number_of_segments
    assert segments > 2
    (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE_NAME).unlink()
    with running(config) as manager:
        assert manager.load_summary.recovered_segments == 1
        assert manager.get_log(ORDERS_0).log_end_offset == 8
    (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE_NAME).unlink()
    (tmp_path / "d0" / RECOVERY_POINT_CHECKPOINT_FILE).unlink()
    with running(config) as manager:
        assert manager.load_summary.recovered_segments == segments


def test_a_leader_epoch_that_cannot_be_written_keeps_the_shutdown_unclean(tmp_path):
    """No flush waits for the leader-epoch-checkpoint; a clean shutdown writes it, since a
    clean start recovers nothing and so reassigns no epoch. When it cannot be written the
    shutdown is not clean, and the next start assigns the epoch again from the records."""
    config = broker_config(tmp_path, dirs=1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(ORDERS_0)
        (log.dir / "leader-epoch-checkpoint.tmp").mkdir()  # the atomic write's temp file
        log.append(batch(3), leader_epoch=7)
        log.flush()
        assert log.leader_epoch_cache.unflushed
        assert log.recovery_point == 3
    assert not (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE_NAME).exists()
    (log.dir / "leader-epoch-checkpoint.tmp").rmdir()
    with running(config) as manager:
        log = manager.get_log(ORDERS_0)
        assert log.log_end_offset == 3
        assert log.end_offset_for_epoch(7, 7) == (7, 3)


def test_log_start_offset_and_high_watermark_come_back_from_the_checkpoints(tmp_path):
    config = broker_config(tmp_path, dirs=1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(ORDERS_0)
        append(log, batch(5))
        log.append(batch(3))  # above the high watermark
        log.delete_records(2)
    with running(config) as manager:
        log = manager.get_log(ORDERS_0)
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (2, 5, 8)


def test_corrupt_checkpoints_are_logged_and_ignored(tmp_path, caplog):
    config = broker_config(tmp_path, dirs=1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
        append(manager.get_log(ORDERS_0), batch(5))
    for name in log_manager_module.LOG_CHECKPOINTS:
        (tmp_path / "d0" / name).write_text("0\n7\ngarbage\n")
    with caplog.at_level(logging.WARNING), running(config) as manager:
        log = manager.get_log(ORDERS_0)
        assert (log.log_start_offset, log.log_end_offset) == (0, 5)
    assert "malformed checkpoint" in caplog.text


def test_partition_dirs_copied_in_are_loaded_and_other_entries_ignored(tmp_path):
    config = broker_config(tmp_path, dirs=2)
    with running(broker_config(tmp_path / "elsewhere", dirs=1)) as other:
        topic_admin(other).create_topic("moved", 1)
        append(other.get_log(TopicPartition("moved", 0)), batch(4))
    with running(config):
        pass
    shutil.copytree(tmp_path / "elsewhere" / "d0" / "moved-0", tmp_path / "d1" / "moved-0")
    (tmp_path / "d0" / "notes.txt").write_text("not a partition")
    (tmp_path / "d0" / "lost+found").mkdir()
    (tmp_path / "d0" / "backup").mkdir()
    with running(config) as manager:
        assert manager.topics() == ["moved"]
        log = manager.get_log(TopicPartition("moved", 0))
        assert log.dir.parent == tmp_path / "d1"
        assert [r.offset for r in read_all(log, upper="end")] == [0, 1, 2, 3]
    assert (tmp_path / "d0" / "backup").is_dir() and (tmp_path / "d0" / "notes.txt").exists()


def test_deleted_partition_dirs_found_at_startup_are_removed(tmp_path):
    config = broker_config(tmp_path, dirs=1)
    leftover = tmp_path / "d0" / "orders-0.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"x" * 100)
    look_alikes = [tmp_path / "d0" / name for name in ("backup-delete", "orders-0-delete")]
    for directory in look_alikes:
        directory.mkdir()
    with running(config) as manager:
        assert manager.topics() == []
    assert not leftover.exists()
    assert all(directory.is_dir() for directory in look_alikes)


def test_a_partition_in_two_dirs_stops_the_start_and_unlocks(tmp_path):
    config = broker_config(tmp_path, dirs=2)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
    shutil.copytree(tmp_path / "d0" / "orders-0", tmp_path / "d1" / "orders-0")
    with pytest.raises(KafkaStorageError, match="orders-0 is stored twice"):
        LogManager(config).startup()
    shutil.rmtree(tmp_path / "d1" / "orders-0")
    with running(config) as manager:
        assert manager.partitions("orders") == [ORDERS_0]


def test_each_dir_loads_with_its_own_recovery_threads(tmp_path, monkeypatch):
    config = broker_config(tmp_path, dirs=2, num_recovery_threads_per_data_dir=2)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 8)
    all_four_loading = threading.Barrier(4, timeout=5)
    threads: set[str] = set()
    real_open = UnifiedLog.open

    def open_together(directory, *args, **kwargs):
        threads.add(threading.current_thread().name)
        all_four_loading.wait()
        return real_open(directory, *args, **kwargs)

    monkeypatch.setattr(UnifiedLog, "open", open_together)
    with running(config) as manager:
        assert len(manager.partitions("orders")) == 8
    assert len(threads) == 4
    assert {name.rsplit("_", 1)[0] for name in threads} == {
        f"log-recovery-{tmp_path / 'd0'}",
        f"log-recovery-{tmp_path / 'd1'}",
    }


def test_load_summary_counts_partitions_and_segments(tmp_path, caplog):
    config = broker_config(tmp_path, dirs=2, log_segment_bytes=1024)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 3)
        log = manager.get_log(ORDERS_0)
        for _ in range(4):
            append(log, batch(1, value_size=300))
        expected_segments = sum(
            manager.get_log(tp).number_of_segments for tp in manager.partitions("orders")
        )
    with caplog.at_level(logging.INFO), running(config) as manager:
        summary = manager.load_summary
    assert (summary.partitions, summary.segments) == (3, expected_segments)
    assert summary.seconds >= 0
    assert "loaded 3 partitions with" in caplog.text


def test_topic_config_applies_to_loaded_logs(tmp_path):
    config = broker_config(tmp_path, dirs=1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1, {"segment.bytes": "4194304"})
    with running(config) as manager:
        assert manager.get_log(ORDERS_0).config == LogConfig.from_props(
            {"segment.bytes": "4194304"}, config.log_config()
        )


def test_the_first_start_on_an_empty_directory_is_no_unclean_shutdown(tmp_path, caplog):
    config = broker_config(tmp_path, dirs=1)
    with caplog.at_level(logging.INFO, logger="odradek.storage.log_manager"):
        with running(config) as manager:
            topic_admin(manager).create_topic("orders", 1)
        assert "a new log directory" in caplog.text
        assert "unclean" not in caplog.text
        caplog.clear()
        with running(config):
            pass
        assert "(clean shutdown)" in caplog.text and "new log directory" not in caplog.text
