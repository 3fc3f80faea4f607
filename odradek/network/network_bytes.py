"""NetworkBytes: bytes received from and sent to clients, read by Prometheus at scrape time.

Counted in plain integers by the broker's event loop, the only thread that reads or writes
client sockets, and exported by a collector as the counters ``odradek_network_bytes_in`` and
``odradek_network_bytes_out``: a Prometheus counter takes a lock on every ``inc()``, and these
are counted on every socket read and every response written.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector


class NetworkBytes(Collector):
    """``received`` and ``sent``: add to them from the event loop alone."""

    def __init__(self) -> None:
        self.received = 0
        self.sent = 0
        self._created = time.time()

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "odradek_network_bytes_in",
            "Bytes received from clients.",
            value=self.received,
            created=self._created,
        )
        yield CounterMetricFamily(
            "odradek_network_bytes_out",
            "Bytes sent to clients.",
            value=self.sent,
            created=self._created,
        )
