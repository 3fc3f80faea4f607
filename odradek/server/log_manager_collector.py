"""LogManagerCollector: the last start-up's load and recovery, and offline log directories."""

from __future__ import annotations

from collections.abc import Iterator

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
        yield GaugeMetricFamily(
            "odradek_offline_log_dirs",
            "Log directories taken offline by an I/O error; their partitions are unavailable.",
            value=len(self._log_manager.offline_log_dirs),
        )
        summary = self._log_manager.load_summary
        if summary is None:
            return
        for name, documentation, attribute in STARTUP_GAUGES:
            yield GaugeMetricFamily(name, documentation, value=getattr(summary, attribute))
