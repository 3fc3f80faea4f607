"""The figures /metrics reads from storage, the cleaner and the process: flush latency,
retention deletions, the last start-up's recovery, log directories' space and state, the log
cleaner's runs, open file descriptors."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from cleaner_helpers import compact_config, latest_records, write
from log_helpers import append, batch, open_log, read_all
from log_manager_helpers import broker_config, running, topic_admin
from server_helpers import running_broker

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.log_cleaner import LogCleaner
from odradek.clock import MockClock
from odradek.config.broker_config import BrokerConfig
from odradek.config.log_config import LogConfig
from odradek.server.metrics.broker_metrics import BrokerMetrics
from odradek.storage import log_file_names as names
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME
from odradek.topic_partition import TopicPartition

FAST_CLEANER = CleanerConfig(dedupe_buffer_size=1 << 20, backoff_ms=20)


def sample(metrics: BrokerMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    assert value is not None, f"no sample {name}{labels}"
    return value


def test_flushes_are_timed(tmp_path: Path) -> None:
    metrics = BrokerMetrics()
    before = sample(metrics, "odradek_log_flush_seconds_count")
    with open_log(tmp_path / "t-0") as log:
        append(log, batch(3))
        log.flush()
        log.flush()  # nothing new to flush: not a flush
    assert sample(metrics, "odradek_log_flush_seconds_count") == before + 1


def test_retention_deletions_are_counted_by_rule(tmp_path: Path) -> None:
    metrics = BrokerMetrics()
    clock = MockClock()
    config = LogConfig(segment_bytes=300, retention_ms=60_000, retention_bytes=600)

    def deleted(rule: str) -> tuple[float, float]:
        return (
            sample(metrics, "odradek_retention_deleted_segments_total", rule=rule),
            sample(metrics, "odradek_retention_deleted_bytes_total", rule=rule),
        )

    before = {rule: deleted(rule) for rule in ("time", "size")}
    with open_log(tmp_path / "t-0", config, clock=clock) as log:
        for _ in range(6):
            append(log, batch(1, value_size=200, timestamp=clock.milliseconds()))
        sizes = [segment.size for segment in log.segments.values()]
        assert len(sizes) == 6  # a batch a segment
        assert log.delete_old_segments() == 3  # the oldest segments over 600 bytes
        by_size = deleted("size")
        clock.sleep(120_000)
        assert log.delete_old_segments() == 3  # the rest (a new active segment is rolled)
    assert by_size == (before["size"][0] + 3, before["size"][1] + sum(sizes[:3]))
    assert deleted("time") == (before["time"][0] + 3, before["time"][1] + sum(sizes[3:]))


def test_a_broker_reports_its_last_start_up_and_its_cleaner(tmp_path: Path) -> None:
    config = BrokerConfig(log_dirs=(str(tmp_path / "data"),))
    with running(config) as manager:
        topic_admin(manager).create_topic("torn", 2)
        log = manager.get_log(TopicPartition("torn", 0))
        append(log, batch(5))
        segment = names.log_file(log.dir, 0)
    with segment.open("ab") as file:
        file.write(b"\x00torn tail")
    (tmp_path / "data" / CLEAN_SHUTDOWN_FILE_NAME).unlink()

    with running_broker(tmp_path) as broker:
        figures = broker.metrics()
    assert figures["odradek_startup_partitions"] == 2
    assert figures["odradek_startup_segments"] == 2
    assert figures["odradek_startup_recovered_segments"] == 2
    assert figures["odradek_startup_truncated_bytes"] == len(b"\x00torn tail")
    assert figures["odradek_startup_recovered_bytes"] > len(b"\x00torn tail")
    assert figures["odradek_startup_seconds"] > 0
    assert figures["odradek_offline_log_dirs"] == 0
    assert figures["odradek_cleaner_dead_threads"] == 0
    assert 0 < figures["process_open_fds"] < figures["process_max_fds"]


def test_log_dirs_report_their_space_until_they_go_offline(tmp_path: Path) -> None:
    metrics = BrokerMetrics()
    with running(broker_config(tmp_path, dirs=2)) as manager:
        metrics.watch(manager)
        usage = shutil.disk_usage(tmp_path / "d1")
        d1 = {"log_dir": str(tmp_path / "d1")}
        assert sample(metrics, "odradek_log_dir_total_bytes", **d1) == usage.total
        assert 0 < sample(metrics, "odradek_log_dir_free_bytes", **d1) <= usage.total
        assert sample(metrics, "odradek_offline_log_dirs") == 0
        manager.failure_channel.maybe_add_offline_log_dir(tmp_path / "d1", "disk gone")
        assert sample(metrics, "odradek_offline_log_dirs") == 1
        assert metrics.registry.get_sample_value("odradek_log_dir_free_bytes", d1) is None
        d0 = {"log_dir": str(tmp_path / "d0")}
        assert sample(metrics, "odradek_log_dir_free_bytes", **d0) > 0


def test_cleaner_figures_follow_its_last_run(tmp_path: Path) -> None:
    metrics = BrokerMetrics()
    with open_log(tmp_path / "compacted-0", compact_config()) as log:
        write(log, [(b"key-%d" % (n % 4), b"value-%d" % n) for n in range(40)])
        log.roll()
        before = read_all(log)
        cleaner = LogCleaner(FAST_CLEANER, lambda: [log])
        metrics.watch_cleaner(cleaner)
        assert sample(metrics, "odradek_cleaner_last_run_records_read") == 0
        cleaner.startup()
        try:
            assert cleaner.await_cleaned(log.topic_partition, log.log_end_offset, 20)
            deadline = time.monotonic() + 30
            while sample(metrics, "odradek_cleaner_max_dirty_percent") > 0:
                assert time.monotonic() < deadline, "the cleaner never found the log clean"
                time.sleep(0.01)
            (report,) = cleaner.last_reports
            figures = {
                name: sample(metrics, f"odradek_cleaner_{name}")
                for name in (
                    "last_run_records_read",
                    "last_run_records_kept",
                    "last_run_bytes_read",
                    "last_run_bytes_written",
                    "last_run_seconds",
                    "recopy_percent",
                    "max_clean_time_seconds",
                    "max_buffer_utilization_percent",
                    "time_since_last_run_seconds",
                    "dead_threads",
                    "uncleanable_partitions",
                )
            }
        finally:
            cleaner.shutdown()
        assert read_all(log) == latest_records(before)
    assert (figures["last_run_records_read"], figures["last_run_records_kept"]) == (40, 4)
    assert figures["last_run_bytes_read"] == report.bytes_read
    assert 0 < figures["last_run_bytes_written"] < figures["last_run_bytes_read"]
    assert figures["recopy_percent"] == pytest.approx(100 * report.recopy_ratio)
    assert figures["max_clean_time_seconds"] == figures["last_run_seconds"] == report.seconds
    assert 0 < figures["max_buffer_utilization_percent"] < 100
    assert 0 <= figures["time_since_last_run_seconds"] < 5
    assert figures["dead_threads"] == figures["uncleanable_partitions"] == 0
