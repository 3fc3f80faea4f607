"""RequestStats exports, series for series, what Prometheus' own Counter and Histogram would."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from odradek.errors import error_code_for, error_name_for
from odradek.server.metrics.broker_metrics import LATENCY_BUCKETS, BrokerMetrics
from odradek.server.metrics.request_stats import LATENCY, LATENCY_HELP, REQUESTS, REQUESTS_HELP

API_NAMES = {0: "Produce", 1: "Fetch", 3: "Metadata"}
errors = st.sampled_from([0, 0, 0, error_code_for(ValueError()), 35])
latencies = st.one_of(
    st.sampled_from([*LATENCY_BUCKETS, 0.0, 1e-9, 31.0]),
    st.floats(0, 40, allow_nan=False),
)
requests = st.lists(
    st.tuples(st.sampled_from(sorted(API_NAMES)), errors, latencies, st.sampled_from(["m", "k"])),
    max_size=40,
)


def without_created(exposition: bytes) -> list[str]:
    """The exposition's lines but the creation times (when each series was made), sorted."""
    return sorted(
        line for line in exposition.decode().splitlines() if not re.search(r"_created\b", line)
    )


@settings(max_examples=examples(100))
@given(answered=requests)
def test_the_export_is_what_prometheus_counter_and_histogram_give(answered) -> None:
    metrics = BrokerMetrics()
    recorders = {p: metrics.request_recorder(p, API_NAMES.__getitem__) for p in ("m", "k")}
    reference = CollectorRegistry()
    counter = Counter(REQUESTS, REQUESTS_HELP, ["api", "error", "protocol"], registry=reference)
    histogram = Histogram(
        LATENCY, LATENCY_HELP, ["api", "protocol"], buckets=LATENCY_BUCKETS, registry=reference
    )
    for api_key, error_code, seconds, protocol in answered:
        recorders[protocol].record(api_key, error_code, seconds)
        api = API_NAMES[api_key]
        counter.labels(api, error_name_for(error_code), protocol).inc()
        histogram.labels(api, protocol).observe(seconds)
        if error_code:  # the recorder binds an API's success series with its first request
            counter.labels(api, "NONE", protocol)
    ours = CollectorRegistry()
    ours.register(metrics.request_stats)
    assert without_created(generate_latest(ours)) == without_created(generate_latest(reference))


def test_every_series_has_its_creation_time() -> None:
    metrics = BrokerMetrics()
    metrics.request_recorder("msgpack", API_NAMES.__getitem__).record(1, 0, 0.002)
    text = generate_latest(metrics.registry).decode()
    assert re.search(
        r'^odradek_requests_created\{api="Fetch",error="NONE",protocol="msgpack"\} ', text, re.M
    )
    assert re.search(
        r'^odradek_request_latency_seconds_created\{api="Fetch",protocol="msgpack"\} ', text, re.M
    )


def test_a_request_counted_from_its_arrival_time_is_counted_as_from_its_latency() -> None:
    """record_since (a connection's _record) and record export the same series."""
    exports = []
    for from_arrival in (True, False):
        metrics = BrokerMetrics()
        recorder = metrics.request_recorder("kafka", API_NAMES.__getitem__)
        recorder.record(3, 35, 0.5)
        arrived = time.perf_counter() - 0.003  # 3 ms ago: the 0.005 bucket, clock or not
        for api_key, error_code in ((0, 0), (3, 35)):
            if from_arrival:
                recorder.record_since(api_key, error_code, arrived)
            else:
                recorder.record(api_key, error_code, 0.003)
        registry = CollectorRegistry()
        registry.register(metrics.request_stats)
        exports.append(
            [  # the sums differ by what the clock advanced
                re.sub(r"_sum(\{.*\}) \S+", r"_sum\1", line)
                for line in without_created(generate_latest(registry))
            ]
        )
    assert exports[0] == exports[1]
    assert any(line.startswith("odradek_requests_total") for line in exports[0])
