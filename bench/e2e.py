"""End-to-end latency through odradek's own clients: Producer -> broker -> Consumer.

Runs ``odradek serve`` in its own process (as ``bench/broker.py`` does) and, for acks=all and
acks=1, sends ``--rate`` records a second for ``--seconds`` with ``linger_ms=0`` while a
consumer long-polls (``fetch_max_wait_ms=500``) the same partition. Each record carries the
time it was sent; the consumer's receipt minus that is its latency. Prints p50, p99, p99.9 and
the maximum, and the gaps over 20 ms with when they happened in the run. Asserts nothing.

``--clients async`` runs AsyncProducer and AsyncConsumer as two tasks on one event loop;
``--clients sync`` runs the blocking Producer and Consumer from two threads of the process (they
share the client's background event loop). ``--rounds N`` interleaves the acks settings N times
and prints the medians of the rounds with their ranges.

Usage: ``python bench/e2e.py [--seconds 60] [--rate 1000] [--rounds 1] [--clients async]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker import BrokerProcess, create_topic  # noqa: E402

from odradek.client import AsyncConsumer, AsyncProducer, Consumer, Producer  # noqa: E402
from odradek.topic_partition import TopicPartition  # noqa: E402

TICK_S = 0.001
LONG_POLL_MS = 500
SLOW_MS = 20.0


ACKED: list[float] = []  # send -> acknowledgement, s


def note_ack(sent_at: float, _future: object) -> None:
    ACKED.append(time.perf_counter() - sent_at)


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


class Pacer:
    """How many records are due by now, at ``rate`` a second from the start."""

    def __init__(self, rate: int, total: int) -> None:
        self.rate = rate
        self.total = total
        self.started = time.perf_counter()

    def due(self) -> int:
        return min(self.total, int((time.perf_counter() - self.started) * self.rate) + 1)


async def run_async(bootstrap: str, topic: str, acks: str, rate: int, seconds: float):
    tp = TopicPartition(topic, 0)
    total = int(rate * seconds)
    received: list[tuple[float, float]] = []  # (sent at, latency)

    async def consume() -> None:
        async with AsyncConsumer(
            bootstrap_servers=bootstrap, fetch_max_wait_ms=LONG_POLL_MS
        ) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            while len(received) < total:
                for record in await consumer.poll(1000):
                    sent = float(record.value)
                    received.append((sent, time.perf_counter() - sent))

    async def produce() -> None:
        async with AsyncProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0) as producer:
            pacer = Pacer(rate, total)
            sent = 0
            while sent < total:
                while sent < pacer.due():
                    at = time.perf_counter()
                    future = producer.send(topic, b"%.9f" % at, partition=0)
                    future.add_done_callback(partial(note_ack, at))
                    sent += 1
                await asyncio.sleep(TICK_S)
            await producer.flush()

    await asyncio.gather(consume(), produce())
    return received


def run_sync(bootstrap: str, topic: str, acks: str, rate: int, seconds: float):
    tp = TopicPartition(topic, 0)
    total = int(rate * seconds)
    received: list[tuple[float, float]] = []

    def consume() -> None:
        with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=LONG_POLL_MS) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            while len(received) < total:
                for record in consumer.poll(1000):
                    sent = float(record.value)
                    received.append((sent, time.perf_counter() - sent))

    consumer_thread = threading.Thread(target=consume)
    consumer_thread.start()
    with Producer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0) as producer:
        pacer = Pacer(rate, total)
        sent = 0
        while sent < total:
            while sent < pacer.due():
                at = time.perf_counter()
                future = producer.send(topic, b"%.9f" % at, partition=0)
                future.add_done_callback(partial(note_ack, at))
                sent += 1
            time.sleep(TICK_S)
        producer.flush()
    consumer_thread.join()
    return received


class GcPauses:
    """The collector's pauses in this process while the bench runs (gc.callbacks)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)


def one_run(broker: BrokerProcess, clients: str, acks: str, rate: int, seconds: float, name: str):
    create_topic(broker.port, name)
    ACKED.clear()
    with GcPauses() as gc_pauses:
        if clients == "async":
            received = uvloop.run(run_async(broker.bootstrap, name, acks, rate, seconds))
        else:
            received = run_sync(broker.bootstrap, name, acks, rate, seconds)
    latencies = sorted(latency * 1000 for _, latency in received)
    first = min(sent for sent, _ in received)
    slow = sorted(
        (sent - first, latency * 1000) for sent, latency in received if latency * 1000 > SLOW_MS
    )
    figures = {
        "p50": statistics.median(latencies),
        "p99": percentile(latencies, 0.99),
        "p99.9": percentile(latencies, 0.999),
        "max": latencies[-1],
    }
    acked = sorted(latency * 1000 for latency in ACKED)
    figures["acked p99"] = percentile(acked, 0.99)
    figures["acked p99.9"] = percentile(acked, 0.999)
    figures["acked max"] = acked[-1]
    longest_gc = max(gc_pauses.pauses, default=0.0) * 1000
    return figures, slow, len(latencies), len(gc_pauses.pauses), longest_gc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--clients", choices=("async", "sync"), default="async")
    parser.add_argument("--acks", nargs="+", default=["all", "1"])
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {acks: [] for acks in args.acks}
    with tempfile.TemporaryDirectory(prefix="odradek-e2e-") as root:
        broker = BrokerProcess(Path(root) / "data")
        try:
            for round_number in range(args.rounds):
                for acks in args.acks:
                    name = f"e2e-{acks}-{round_number}"
                    figures, slow, count, collections, longest_gc = one_run(
                        broker, args.clients, acks, args.rate, args.seconds, name
                    )
                    results[acks].append(figures)
                    line = ", ".join(f"{k} {v:.2f} ms" for k, v in figures.items())
                    print(
                        f"round {round_number + 1} acks={acks} ({args.clients}, {count:,} "
                        f"records at {args.rate:,}/s): {line}; GC {collections} collections, "
                        f"longest {longest_gc:.1f} ms",
                        flush=True,
                    )
                    for at, latency in slow[:10]:
                        print(f"    {latency:.1f} ms for a record sent at {at:.3f} s")
                    if len(slow) > 10:
                        print(f"    ... {len(slow) - 10} more over {SLOW_MS:.0f} ms")
        finally:
            broker.stop()
    if args.rounds > 1:
        for acks, rounds in results.items():
            parts = []
            for key in rounds[0]:
                values = [r[key] for r in rounds]
                parts.append(
                    f"{key} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
                )
            print(f"acks={acks}, median (range) of {args.rounds} rounds, ms: " + ", ".join(parts))


if __name__ == "__main__":
    main()
