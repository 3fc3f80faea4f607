"""QuotaCollector: each quota sensor's rate, quota and throttling, read at scrape time
(Kafka's ``kafka.server:type=Produce|Fetch|Request,user=...,client-id=...`` metrics)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from odradek.server.quota.client_quotas import ClientQuotas

QUOTA_TYPES = {"producer_byte_rate": "Produce", "consumer_byte_rate": "Fetch"}
REQUEST = "Request"
LABELS = ["quota_type", "user", "client_id"]


class QuotaCollector(Collector):
    def __init__(self, quotas: ClientQuotas) -> None:
        self._quotas = quotas

    def collect(self) -> Iterator[Metric]:
        rate = GaugeMetricFamily(
            "odradek_quota_rate",
            "Measured usage of each quota'd user and/or client id: bytes per second (Produce, "
            "Fetch) or percent of the event loop (Request).",
            labels=LABELS,
        )
        limit = GaugeMetricFamily(
            "odradek_quota_limit", "The quota that applies to it, in the same unit.", labels=LABELS
        )
        throttle = CounterMetricFamily(
            "odradek_quota_throttle_time_seconds",
            "Throttle time given to it (its connections were muted that long).",
            labels=LABELS,
        )
        throttled = CounterMetricFamily(
            "odradek_quota_throttled_requests",
            "Its requests answered with a throttle time.",
            labels=LABELS,
        )
        now_ms = time.monotonic() * 1000.0
        for manager in self._quotas.managers():
            quota_type = QUOTA_TYPES.get(manager.quota_key, REQUEST)
            for sensor in manager.sensors():
                labels = [quota_type, sensor.user, sensor.client_id]
                rate.add_metric(labels, sensor.rate.measure(now_ms))
                limit.add_metric(labels, sensor.quota)
                throttle.add_metric(labels, sensor.throttle_ms_total / 1000.0)
                throttled.add_metric(labels, sensor.throttled)
        yield from (rate, limit, throttle, throttled)
