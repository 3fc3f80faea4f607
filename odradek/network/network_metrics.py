"""NetworkMetrics: the metrics the network layer updates, as a type the server's metrics meet.

The connections count requests, bytes, opened, refused and closed connections and the fetch
bytes sent by sendfile or copied; the server's BrokerMetrics owns those metric objects and
registers them. This Protocol lets the network layer name what it needs without importing the
server (dependencies point one way: server -> network).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from prometheus_client import Counter, Gauge

from odradek.network.network_bytes import NetworkBytes

SENDFILE = "sendfile"
"""The ``fetch_bytes`` label of record bytes sent with sendfile (zero copy)."""
COPIED = "copied"
"""The ``fetch_bytes`` label of record bytes read into memory and written (the fallback)."""


class RequestRecorder(Protocol):
    """Where a connection counts its requests: by API key, error code and latency."""

    bounds: Sequence[float]
    bound: dict[int, tuple[Any, Any]]
    """Each API's series of successes (its tally and latencies), by API key."""

    def record_since(self, api_key: int, error_code: int, received: float) -> None: ...

    def bind(self, api_key: int) -> tuple[Any, Any]: ...


class NetworkMetrics(Protocol):
    """The metric objects connections and the socket server update."""

    network: NetworkBytes
    fetch_bytes: Counter
    open_connections: Gauge
    request_memory: Gauge
    rejected_connections: Counter
    closed_connections: Counter

    def request_recorder(
        self, protocol: str, api_name: Callable[[int], str]
    ) -> RequestRecorder: ...
