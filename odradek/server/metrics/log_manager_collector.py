"""LogManagerCollector: the log directories' state and space, and the last start-up's load and
recovery."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from odradek.storage.log_manager import LogManager

STARTUP_GAUGES = (
    ("odradek_startup_partitions", "Partitions loaded at the last start-up.", "partitions"),
    ("odradek_startup_segments", "Segments loaded at the last start-up.", "segments"),
    (
        "odradek_startup_recovered_segments",
        "Segments recovered (scanned and re-indexed) at the last start-up; 0 after a clean "
        "shutdown.",
        "recovered_segments",
    ),
    (
        "odradek_startup_recovered_bytes",
        "Bytes scanned by recovery at the last start-up.",
        "recovered_bytes",
    ),
    (
        "odradek_startup_truncated_bytes",
        "Bytes recovery cut off at the last start-up: torn or corrupt tails and the segments "
        "after them.",
        "truncated_bytes",
    ),
    ("odradek_startup_seconds", "Time the last start-up took to load the logs.", "seconds"),
)
"""(metric name, help, LogLoadSummary attribute) of each start-up gauge."""


class LogManagerCollector(Collector):
    """What the LogManager knows of itself, read at scrape time."""

    def __init__(self, log_manager: LogManager) -> None:
        self._log_manager = log_manager

    def collect(self) -> Iterator[Metric]:
        offline = self._log_manager.offline_log_dirs
        yield GaugeMetricFamily(
            "odradek_offline_log_dirs",
            "Log directories taken offline by an I/O error; their partitions are unavailable.",
            value=len(offline),
        )
        yield from self._disk_space(offline)
        summary = self._log_manager.load_summary
        if summary is not None:
            for name, documentation, attribute in STARTUP_GAUGES:
                yield GaugeMetricFamily(name, documentation, value=getattr(summary, attribute))

    def _disk_space(self, offline: frozenset[Path]) -> Iterator[Metric]:
        """Free and total bytes of each online log directory's filesystem: a full disk fails
        every append to it (KAFKA_STORAGE_ERROR) while the directory stays online."""
        free = GaugeMetricFamily(
            "odradek_log_dir_free_bytes",
            "Bytes still available to the broker on each online log directory's filesystem.",
            labels=["log_dir"],
        )
        total = GaugeMetricFamily(
            "odradek_log_dir_total_bytes",
            "Size of each online log directory's filesystem.",
            labels=["log_dir"],
        )
        for log_dir in self._log_manager.log_dirs:
            if log_dir in offline:
                continue
            try:
                usage = shutil.disk_usage(log_dir)
            except OSError:
                continue
            free.add_metric([str(log_dir)], usage.free)
            total.add_metric([str(log_dir)], usage.total)
        yield free
        yield total
