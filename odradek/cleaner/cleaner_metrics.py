"""CleanerMetrics: Kafka's log cleaner gauges at one moment, for the metrics module."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CleanerMetrics:
    """``kafka.log:type=LogCleaner`` and ``type=LogCleanerManager`` gauges, by their names:
    the ``max_``/``recopy`` figures are over each thread's last run."""

    max_buffer_utilization_percent: float
    cleaner_recopy_percent: float
    max_clean_time_secs: float
    max_compaction_delay_secs: float
    dead_thread_count: int
    max_dirty_percent: float
    time_since_last_run_ms: int
    uncleanable_partitions_count: int
