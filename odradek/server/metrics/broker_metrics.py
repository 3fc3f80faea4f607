"""The broker's Prometheus metrics, served at ``/metrics`` on the metrics port.

odradek's own figures have the ``odradek_`` prefix; ``docs/metrics.md`` lists them with the
Kafka metric each mirrors. Request, network and event-loop figures are kept by the server as
it runs; per-partition, start-up and cleaner figures are read at scrape time by collectors, so
a deleted topic's series disappear with it. Each broker has its own registry, so several
brokers can live in one process (tests); flush and retention figures are process-wide
(:mod:`odradek.storage.log_stats`) and appear in every broker's registry, as do the process's
own (``process_*``: memory, CPU, open file descriptors).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from time import perf_counter
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    start_http_server,
)

from odradek.cleaner.log_cleaner import LogCleaner
from odradek.errors import NONE, error_name_for
from odradek.network.network_bytes import NetworkBytes
from odradek.network.network_metrics import COPIED, SENDFILE
from odradek.server.metrics.cleaner_collector import CleanerCollector
from odradek.server.metrics.log_manager_collector import LogManagerCollector
from odradek.server.metrics.partition_collector import PartitionCollector
from odradek.server.metrics.request_stats import Latencies, RequestStats, Tally
from odradek.storage.log_manager import LogManager
from odradek.storage.log_stats import LOG_STATS

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



class BrokerMetrics:
    """The metric objects the server updates, registered in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.request_stats = RequestStats(LATENCY_BUCKETS)
        registry.register(self.request_stats)
        self.partition_errors = Counter(
            "odradek_partition_errors",
            "Per-partition errors in responses, by API and error.",
            ["api", "error"],
            registry=registry,
        )
        self.network = NetworkBytes()
        registry.register(self.network)
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
        self.request_memory = Gauge(
            "odradek_request_memory_bytes",
            "Memory reserved now for requests being received or handled; at "
            "queued.max.request.bytes the broker stops reading sockets.",
            registry=registry,
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
        for collector in LOG_STATS:
            registry.register(collector)
        ProcessCollector(registry=registry)  # memory, CPU, open files against their limit
        self._recorders: dict[str, RequestRecorder] = {}

    def request_recorder(self, protocol: str, api_name: Callable[[int], str]) -> RequestRecorder:
        """Where connections of ``protocol`` count their requests (``api_name`` names an API
        key for the labels); one for all of them."""
        recorder = self._recorders.get(protocol)
        if recorder is None:
            recorder = self._recorders[protocol] = RequestRecorder(self, protocol, api_name)
        return recorder

    def watch(self, log_manager: LogManager) -> None:
        """Report the partitions, last start-up and offline directories of ``log_manager`` at
        every scrape."""
        self.registry.register(PartitionCollector(log_manager))
        self.registry.register(LogManagerCollector(log_manager))

    def watch_cleaner(self, cleaner: LogCleaner) -> None:
        """Report the figures of the broker's log cleaner at every scrape."""
        self.registry.register(CleanerCollector(cleaner))

    def serve(self, host: str, port: int) -> WSGIServer:
        """Serve ``/metrics`` on ``host:port`` (0 picks a free port) from a daemon thread."""
        server, _thread = start_http_server(port, host, self.registry)
        return server


class RequestRecorder:
    """Counts one wire protocol's requests and their latency, with each API's series bound
    once (RequestStats: plain numbers, exported at scrape time)."""

    def __init__(
        self, metrics: BrokerMetrics, protocol: str, api_name: Callable[[int], str]
    ) -> None:
        self._stats = metrics.request_stats
        self.bounds = metrics.request_stats.bounds
        """The latency histogram's bounds: ``bisect_left`` of a latency in them is its bucket."""
        self._protocol = protocol
        self._api_name = api_name
        self.bound: dict[int, tuple[Tally, Latencies]] = {}
        """The series of each API's successes, by API key, made on first use (``bind``): a
        connection answering at once adds to them itself, as ``record_since`` would."""

    def record(self, api_key: int, error_code: int, seconds: float) -> None:
        """One request of ``api_key`` answered with ``error_code`` (0 when it succeeded)
        after ``seconds``: ``record_since`` with a clock that read 0 at its arrival."""
        self.record_since(api_key, error_code, 0.0, lambda: seconds)

    def record_since(
        self,
        api_key: int,
        error_code: int,
        received: float,
        clock: Callable[[], float] = perf_counter,
    ) -> None:
        """``record`` for a request that arrived when ``clock()`` read ``received``: a
        connection binds it as its ``_record``, so a request costs one call to count."""
        seconds = clock() - received
        try:
            succeeded, latencies = self.bound[api_key]
        except KeyError:
            succeeded, latencies = self.bind(api_key)
        if error_code:
            api, error = self._api_name(api_key), error_name_for(error_code)
            self._stats.tally(api, error, self._protocol).value += 1
        else:
            succeeded.value += 1
        latencies.buckets[bisect_left(self.bounds, seconds)] += 1
        latencies.total_seconds += seconds

    def bind(self, api_key: int) -> tuple[Tally, Latencies]:
        """The series a success of ``api_key`` adds to: its count and its latencies."""
        stats, api = self._stats, self._api_name(api_key)
        bound = (
            stats.tally(api, error_name_for(NONE), self._protocol),
            stats.latencies(api, self._protocol),
        )
        if api != "unknown":  # unknown keys share one label: binding each would grow without end
            self.bound[api_key] = bound
        return bound
