"""Cost of a Prometheus scrape of a broker with many partitions: prints figures, asserts nothing.

Starts a broker (odradek.server) on a temporary directory with ``--partitions`` partitions
(topics of 100 partitions, a few records each), then fetches ``/metrics`` over HTTP
``--scrapes`` times as Prometheus does (asking for OpenMetrics), and prints the scrape time
(median, p90, max), the size of the answer and its number of series. It also prints the
broker's event-loop lag (overshoot of its 10 ms timer) idle and while scraped back to back:
the scrape runs on the metrics thread, so what it costs the broker is the GIL it holds.

Usage: ``.venv/bin/python bench/metrics.py [--partitions 1000] [--scrapes 50]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from odradek.client.event_loop_thread import EventLoopThread
from odradek.config.broker_config_loader import load_broker_config
from odradek.record.record_batch_builder import build_batch
from odradek.server.broker import Broker
from odradek.topic_partition import TopicPartition

PARTITIONS_PER_TOPIC = 100
RECORDS_PER_PARTITION = 10
LAG = "odradek_event_loop_lag_seconds"
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
"""What Prometheus 2.x asks for: it gets OpenMetrics text, as a real scrape does."""


def fill(broker: Broker, partitions: int) -> None:
    """Create the topics and append a batch to every partition."""
    manager = broker.log_manager
    now = int(time.time() * 1000)
    records = build_batch([(now, b"key", b"value", ())] * RECORDS_PER_PARTITION)
    for first in range(0, partitions, PARTITIONS_PER_TOPIC):
        topic = f"bench-{first // PARTITIONS_PER_TOPIC}"
        count = min(PARTITIONS_PER_TOPIC, partitions - first)
        for tp in broker.topic_admin.create_topic(topic, count):
            log = manager.get_log(tp)
            log.append(records)
            log.update_high_watermark(log.log_end_offset)
    assert manager.get_log(TopicPartition("bench-0", 0)).log_end_offset == RECORDS_PER_PARTITION


def scrape(url: str) -> tuple[float, bytes]:
    request = urllib.request.Request(url, headers={"Accept": PROMETHEUS_ACCEPT})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return time.perf_counter() - start, body


def lag_figures(broker: Broker) -> tuple[float, float]:
    """The event-loop lag histogram's (count, sum) so far."""
    registry = broker.metrics.registry
    return (
        registry.get_sample_value(f"{LAG}_count") or 0.0,
        registry.get_sample_value(f"{LAG}_sum") or 0.0,
    )


def mean_lag_ms(before: tuple[float, float], after: tuple[float, float]) -> float:
    count, total = after[0] - before[0], after[1] - before[1]
    return 1000 * total / max(count, 1)


def report(partitions: int, scrapes: int, url: str, broker: Broker) -> None:
    idle_start = lag_figures(broker)
    time.sleep(1.0)
    idle_end = lag_figures(broker)
    times = []
    body = b""
    for _ in range(scrapes):
        seconds, body = scrape(url)
        times.append(seconds)
    scraped_end = lag_figures(broker)
    series = sum(len(f.samples) for f in text_string_to_metric_families(body.decode()))
    times.sort()
    print(f"{partitions} partitions: {series} series, {len(body) / 1024:,.0f} KiB a scrape")
    print(
        f"scrape time over {scrapes} scrapes: median {1000 * statistics.median(times):.1f} ms, "
        f"p90 {1000 * times[int(0.9 * (len(times) - 1))]:.1f} ms, max {1000 * times[-1]:.1f} ms"
    )
    print(
        f"event-loop lag: idle {mean_lag_ms(idle_start, idle_end):.2f} ms mean, while scraped "
        f"back to back {mean_lag_ms(idle_end, scraped_end):.2f} ms mean"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--scrapes", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-metrics-bench-") as directory:
        overrides = {"log.dirs": str(Path(directory)), "port": "0", "metrics.port": "0"}
        loop_thread = EventLoopThread(name="broker-loop")
        broker = loop_thread.call(Broker, load_broker_config(overrides=overrides))
        loop_thread.run(broker.start(), timeout=60)
        try:
            fill(broker, args.partitions)
            url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
            report(args.partitions, args.scrapes, url, broker)
        finally:
            loop_thread.run(broker.stop(), timeout=120)


if __name__ == "__main__":
    main()
