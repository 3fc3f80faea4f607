"""CleanerCollector: the log cleaner's gauges (Kafka's ``LogCleaner`` and ``LogCleanerManager``)
and what its threads' last runs did, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from odradek.cleaner.log_cleaner import LogCleaner

CLEANER_GAUGES = (
    (
        "odradek_cleaner_max_dirty_percent",
        "Dirty ratio of the dirtiest compacted log at the last check, in percent.",
        lambda m: m.max_dirty_percent,
    ),
    (
        "odradek_cleaner_recopy_percent",
        "Bytes written over bytes read by the threads' last runs, in percent (100: nothing "
        "removed).",
        lambda m: m.cleaner_recopy_percent,
    ),
    (
        "odradek_cleaner_max_clean_time_seconds",
        "Longest of the threads' last runs.",
        lambda m: m.max_clean_time_secs,
    ),
    (
        "odradek_cleaner_max_buffer_utilization_percent",
        "Fullest offset map (dedupe buffer) of the threads' last runs, in percent.",
        lambda m: m.max_buffer_utilization_percent,
    ),
    (
        "odradek_cleaner_max_compaction_delay_seconds",
        "Longest time a compacted log has waited past max.compaction.lag.ms.",
        lambda m: m.max_compaction_delay_secs,
    ),
    (
        "odradek_cleaner_time_since_last_run_seconds",
        "Time since the cleaner last looked for a log to clean.",
        lambda m: m.time_since_last_run_ms / 1000,
    ),
    (
        "odradek_cleaner_dead_threads",
        "Cleaner threads that have died; compaction stalls when all have.",
        lambda m: m.dead_thread_count,
    ),
    (
        "odradek_cleaner_uncleanable_partitions",
        "Partitions the cleaner gave up on after failed runs (Kafka's "
        "uncleanable-partitions-count).",
        lambda m: m.uncleanable_partitions_count,
    ),
)
"""(metric name, help, figure of CleanerMetrics) of each cleaner gauge."""

LAST_RUN_GAUGES = (
    ("odradek_cleaner_last_run_bytes_read", "Log bytes read", "bytes_read"),
    ("odradek_cleaner_last_run_bytes_written", "Log bytes written", "bytes_written"),
    ("odradek_cleaner_last_run_records_read", "Records read", "records_read"),
    ("odradek_cleaner_last_run_records_kept", "Records kept", "records_kept"),
    ("odradek_cleaner_last_run_seconds", "Seconds spent", "seconds"),
)
"""(metric name, help, CleaningReport attribute) of each per-run figure, summed over threads."""


class CleanerCollector(Collector):
    """The figures of ``cleaner``: Kafka's gauges, and the sums over each thread's last run."""

    def __init__(self, cleaner: LogCleaner) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[Metric]:
        metrics = self._cleaner.metrics()
        for name, documentation, figure in CLEANER_GAUGES:
            yield GaugeMetricFamily(name, documentation, value=figure(metrics))
        yield CounterMetricFamily(
            "odradek_cleaner_worker_failures",
            "Cleaner worker processes that died, in a run or between runs (each is replaced; "
            "a run's partition is retried after a backoff).",
            value=metrics.worker_failures,
        )
        uncleanable = GaugeMetricFamily(
            "odradek_cleaner_uncleanable_partition",
            "1 for each partition the cleaner gave up on, labelled with the reason.",
            labels=["log_dir", "topic", "partition", "reason"],
        )
        for log_dir, tp, reason in metrics.uncleanable_partitions:
            uncleanable.add_metric([str(log_dir), tp.topic, str(tp.partition), reason], 1)
        yield uncleanable
        reports = self._cleaner.last_reports
        for name, what, attribute in LAST_RUN_GAUGES:
            yield GaugeMetricFamily(
                name,
                f"{what} by the cleaner threads' last runs (summed over threads).",
                value=sum(getattr(report, attribute) for report in reports),
            )
