"""PartitionCollector: each partition's offsets and size, read from the LogManager per scrape."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from odradek.storage.log_manager import LogManager

PARTITION_GAUGES = (
    ("odradek_log_start_offset", "First offset visible to readers.", "log_start_offset"),
    ("odradek_log_end_offset", "Offset the next appended record will get.", "log_end_offset"),
    ("odradek_high_watermark", "Offset up to which records are committed.", "high_watermark"),
    ("odradek_log_size_bytes", "Bytes of the partition's segments.", "size_in_bytes"),
    ("odradek_log_segments", "Segments of the partition's log.", "number_of_segments"),
)
"""(metric name, help, UnifiedLog attribute) of each per-partition gauge."""


class PartitionCollector(Collector):
    """Each online partition's offsets, size and segment count, read at scrape time, so a
    deleted topic's series disappear with it and nothing is kept per partition in between."""

    def __init__(self, log_manager: LogManager) -> None:
        self._log_manager = log_manager

    def collect(self) -> Iterator[Metric]:
        logs = self._log_manager.all_logs()
        labels = [[log.topic_partition.topic, str(log.topic_partition.partition)] for log in logs]
        for name, documentation, attribute in PARTITION_GAUGES:
            family = GaugeMetricFamily(name, documentation, labels=["topic", "partition"])
            for log, values in zip(logs, labels, strict=True):
                family.add_metric(values, getattr(log, attribute))
            yield family
