"""The broker's Prometheus metrics, served at ``/metrics`` on the metrics port.

Every name has the ``odradek_`` prefix. Request, network and event-loop figures are kept by the
server as it runs; per-partition figures are read from the LogManager at scrape time by
:class:`PartitionCollector`, so a deleted topic's series disappear with it. Each broker has its
own registry, so several brokers can live in one process (tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from odradek.storage.log_manager import LogManager

LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
)
LAG_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)

SENDFILE = "sendfile"
COPIED = "copied"


class BrokerMetrics:
    """The metric objects the server updates, registered in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            "odradek_requests",
            "Requests answered, by API and request-level error (NONE when the request succeeded).",
            ["api", "error"],
            registry=registry,
        )
        self.partition_errors = Counter(
            "odradek_partition_errors",
            "Per-partition errors in responses, by API and error.",
            ["api", "error"],
            registry=registry,
        )
        self.request_latency = Histogram(
            "odradek_request_latency_seconds",
            "Time from a request's arrival to its response being queued for the socket.",
            ["api"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.bytes_in = Counter(
            "odradek_network_bytes_in", "Bytes received from clients.", registry=registry
        )
        self.bytes_out = Counter(
            "odradek_network_bytes_out", "Bytes sent to clients.", registry=registry
        )
        self.fetch_bytes = Counter(
            "odradek_fetch_bytes",
            "Record bytes sent in fetch responses, by path: sendfile (zero copy) or copied "
            "(read into memory and written, the fallback).",
            ["path"],
            registry=registry,
        )
        self.open_connections = Gauge(
            "odradek_open_connections", "Client connections open now.", registry=registry
        )
        self.rejected_connections = Counter(
            "odradek_rejected_connections",
            "Connections closed at accept because max.connections were open.",
            registry=registry,
        )
        self.closed_connections = Counter(
            "odradek_closed_connections",
            "Connections the broker closed, by reason.",
            ["reason"],
            registry=registry,
        )
        self.event_loop_lag = Histogram(
            "odradek_event_loop_lag_seconds",
            "How late the event loop wakes a periodic timer: time other work held the loop.",
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        for path in (SENDFILE, COPIED):
            self.fetch_bytes.labels(path)

    def watch(self, log_manager: LogManager) -> None:
        """Report the partitions of ``log_manager`` at every scrape."""
        self.registry.register(PartitionCollector(log_manager))

    def serve(self, host: str, port: int) -> WSGIServer:
        """Serve ``/metrics`` on ``host:port`` (0 picks a free port) from a daemon thread."""
        server, _thread = start_http_server(port, host, self.registry)
        return server


class PartitionCollector(Collector):
    """Each online partition's offsets, size and segment count, read at scrape time."""

    _GAUGES = (
        ("odradek_log_start_offset", "First offset visible to readers.", "log_start_offset"),
        ("odradek_log_end_offset", "Offset the next appended record will get.", "log_end_offset"),
        ("odradek_high_watermark", "Offset up to which records are committed.", "high_watermark"),
        ("odradek_log_size_bytes", "Bytes of the partition's segments.", "size_in_bytes"),
        ("odradek_log_segments", "Segments of the partition's log.", "number_of_segments"),
    )

    def __init__(self, log_manager: LogManager) -> None:
        self._log_manager = log_manager

    def collect(self) -> Iterator[Metric]:
        logs = self._log_manager.all_logs()
        for name, documentation, attribute in self._GAUGES:
            family = GaugeMetricFamily(name, documentation, labels=["topic", "partition"])
            for log in logs:
                tp = log.topic_partition
                family.add_metric([tp.topic, str(tp.partition)], getattr(log, attribute))
            yield family
