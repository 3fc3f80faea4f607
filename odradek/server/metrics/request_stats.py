"""RequestStats: the requests answered and their latency, read by Prometheus at scrape time.

Counted in plain numbers by the broker's event loop, the only thread that answers requests,
and exported by a collector as the counter ``odradek_requests`` and the histogram
``odradek_request_latency_seconds``, series for series what a Prometheus Counter and Histogram
would export: those take a lock and a few calls on every ``inc()`` and ``observe()``, and
these are recorded for every request (a third of the Python calls of an empty fetch).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from itertools import accumulate

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

REQUESTS = "odradek_requests"
REQUESTS_HELP = (
    "Requests answered, by API, request-level error (NONE when the request succeeded) "
    "and wire protocol (msgpack or kafka)."
)
LATENCY = "odradek_request_latency_seconds"
LATENCY_HELP = (
    "Time from a request's arrival to its response being queued for the socket, by API "
    "and wire protocol."
)


class Tally:
    """One series of the requests counter: add to ``value`` from the event loop alone."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0
        self.created = time.time()


class Latencies:
    """One series of the latency histogram: ``buckets[i]`` counts the requests that took
    at most ``bounds[i]`` and more than the bound before (the last bound is +Inf), and
    ``total_seconds`` their sum; add to them from the event loop alone."""

    __slots__ = ("buckets", "created", "total_seconds")

    def __init__(self, bucket_count: int) -> None:
        self.buckets = [0] * bucket_count
        self.total_seconds = 0.0
        self.created = time.time()


class RequestStats(Collector):
    """Every series of the two families, made on first use and kept."""

    def __init__(self, latency_bounds: Sequence[float]) -> None:
        self.bounds = (*latency_bounds, math.inf)
        """The histogram's upper bounds, +Inf last: ``bisect_left`` of a latency in them
        is its bucket."""
        self._le = [floatToGoString(bound) for bound in self.bounds]
        self._tallies: dict[tuple[str, str, str], Tally] = {}
        self._latencies: dict[tuple[str, str], Latencies] = {}

    def tally(self, api: str, error: str, protocol: str) -> Tally:
        """The requests counter of ``api`` answered with ``error`` over ``protocol``."""
        key = (api, error, protocol)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = Tally()
        return tally

    def latencies(self, api: str, protocol: str) -> Latencies:
        """The latency histogram of ``api`` over ``protocol``."""
        key = (api, protocol)
        latencies = self._latencies.get(key)
        if latencies is None:
            latencies = self._latencies[key] = Latencies(len(self.bounds))
        return latencies

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(REQUESTS, REQUESTS_HELP, labels=["api", "error", "protocol"])
        for labels, tally in dict(self._tallies).items():  # a copy: the loop may add one
            requests.add_metric(labels, tally.value, created=tally.created)
        yield requests
        latency = HistogramMetricFamily(LATENCY, LATENCY_HELP, labels=["api", "protocol"])
        for (api, protocol), latencies in dict(self._latencies).items():
            counts = list(accumulate(latencies.buckets))
            total = latencies.total_seconds
            latency.add_metric([api, protocol], list(zip(self._le, counts, strict=True)), total)
            latency.samples.append(
                Sample(f"{LATENCY}_created", {"api": api, "protocol": protocol}, latencies.created)
            )
        yield latency
