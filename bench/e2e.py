"""End-to-end latency through odradek's own clients: Producer -> broker -> Consumer.

Runs ``odradek serve`` in its own process (as ``bench/broker.py`` does) and, for acks=all and
acks=1, sends ``--rate`` records a second for ``--seconds`` with ``linger_ms=0`` while a
consumer long-polls (``fetch_max_wait_ms=500``) the same partition. Each record carries the
time it was sent; the consumer's receipt minus that is its latency ("acked": until the
producer has the broker's answer). Prints p50, p99, p99.9 and the maximum. Asserts nothing.

``--clients`` picks the paths, measured in turn in each round:

- ``raw``: the broker's own path with no client library (Produce frames written on a socket,
  a long-polling Fetch loop on a second connection, both on one event loop): the reference
  for the clients;
- ``fsync``: a small append and its fdatasync in the broker's log directory at the same rate,
  no broker at all: the disk, the floor under acks=all;
- ``async``: AsyncProducer and AsyncConsumer as two tasks on one event loop;
- ``sync``: the blocking Producer and Consumer from two threads (they share the client's
  background event loop).

``--rounds N`` interleaves everything N times and prints the medians of the rounds with their
ranges. Each run also prints this process's full GC collections and its stalls (runs of
records over 20 ms): when, how many records, the worst.

``--data-root DIR`` puts the broker's log directory (and the fsync probe's file) under DIR,
e.g. a file system on a device whose flush is fast, to tell odradek's acks=all path from
the disk under it.

Usage: ``python bench/e2e.py [--seconds 60] [--rate 1000] [--rounds 1] [--clients raw async]
[--data-root DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from functools import partial
from pathlib import Path

import uvloop
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker import BrokerProcess, create_topic, frame_of  # noqa: E402
from client_trace import ClientTrace, summary  # noqa: E402

from odradek.client import AsyncConsumer, AsyncProducer, Consumer, Producer  # noqa: E402
from odradek.protocol.api_keys import ApiKey  # noqa: E402
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.frame import decode_frame  # noqa: E402
from odradek.protocol.header import ResponseHeader  # noqa: E402
from odradek.protocol.messages import decode_response  # noqa: E402
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.memory_records import MemoryRecords  # noqa: E402
from odradek.record.record_batch_builder import build_batch  # noqa: E402
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


async def read_frame(reader: asyncio.StreamReader):
    size = int.from_bytes(await reader.readexactly(4), "big")
    return decode_frame(await reader.readexactly(size))


async def run_raw(port: int, topic: str, acks: str, rate: int, seconds: float):
    """The broker's own path with no client library, on one event loop as the clients run:
    one record a Produce frame written on a socket (its answers read by a task), and a
    long-polling Fetch loop on a second connection that decodes what it gets. The reference
    the clients are measured against."""
    total = int(rate * seconds)
    received: list[tuple[float, float]] = []
    produce_reader, produce_writer = await asyncio.open_connection("127.0.0.1", port)
    fetch_reader, fetch_writer = await asyncio.open_connection("127.0.0.1", port)
    wire_acks = Acks.ALL if acks == "all" else Acks.LEADER
    sent_at: dict[int, float] = {}

    async def read_acks() -> None:
        for _ in range(total):
            frame = await read_frame(produce_reader)
            correlation_id = ResponseHeader.from_header(frame.header).correlation_id
            ACKED.append(time.perf_counter() - sent_at.pop(correlation_id))

    async def fetch() -> None:
        offset = 0
        correlation_id = 0
        while len(received) < total:
            request = FetchRequest(
                (FetchPartition(topic, 0, offset, 1 << 20),), max_wait_ms=LONG_POLL_MS
            )
            fetch_writer.write(frame_of(request, correlation_id))
            correlation_id += 1
            response = decode_response(ApiKey.FETCH, await read_frame(fetch_reader))
            for batch in MemoryRecords(response.partitions[0].records).batches():
                for record in batch.records():
                    if record.offset >= offset:
                        sent = float(record.value)
                        received.append((sent, time.perf_counter() - sent))
                        offset = record.offset + 1

    async def produce() -> None:
        pacer = Pacer(rate, total)
        sent = 0
        while sent < total:
            while sent < pacer.due():
                at = time.perf_counter()
                batch = build_batch([(int(time.time() * 1000), None, b"%.9f" % at, ())])
                request = ProduceRequest((ProducePartitionData(topic, 0, batch),), wire_acks)
                sent_at[sent] = at
                produce_writer.write(frame_of(request, sent))
                sent += 1
            await asyncio.sleep(TICK_S)

    await asyncio.gather(read_acks(), fetch(), produce())
    for writer in (produce_writer, fetch_writer):
        writer.close()
    return received


def run_fsync(data_dir: Path, rate: int, seconds: float):
    """The floor under acks=all: a 150-byte append and its fdatasync at ``rate`` a second in
    the broker's log directory, each timed as a record would be. No broker, no client."""
    total = int(rate * seconds)
    received: list[tuple[float, float]] = []
    path = data_dir / "e2e-fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        pacer = Pacer(rate, total)
        sent = 0
        while sent < total:
            while sent < pacer.due():
                at = time.perf_counter()
                os.write(fd, b"x" * 150)
                os.fdatasync(fd)
                received.append((at, time.perf_counter() - at))
                ACKED.append(time.perf_counter() - at)
                sent += 1
            time.sleep(TICK_S)
    finally:
        os.close(fd)
        path.unlink()
    return received


class GcPauses:
    """The collector's pauses in this process while the bench runs (gc.callbacks): when each
    started (perf_counter), how long it took, and which generation it collected."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
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
            elapsed = time.perf_counter() - self._started
            self.pauses.append((self._started, elapsed, info["generation"]))


def broker_histograms(broker: BrokerProcess) -> dict[str, dict[float, float]]:
    """Two of the broker's own histograms, as cumulative counts by bucket bound: "produce",
    Produce request latency (arrival to response queued, fdatasync included for acks=all),
    and "flush", the time its log flushes spend in fdatasync (the disk under acks=all)."""
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    histograms: dict[str, dict[float, float]] = {"produce": {}, "flush": {}}
    for family in text_string_to_metric_families(text):
        if family.name == "odradek_request_latency_seconds":
            buckets = histograms["produce"]
            samples = [s for s in family.samples if "roduce" in s.labels.get("api", "")]
        elif family.name == "odradek_log_flush_seconds":
            buckets = histograms["flush"]
            samples = family.samples
        else:
            continue
        for sample in samples:
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return histograms


def broker_side(before: dict[str, dict[float, float]], after: dict[str, dict[float, float]]) -> str:
    """How many Produce requests the broker itself took over 25 and over 100 ms, and how many
    of its log flushes took over 10 and over 25 ms."""

    def over(name: str, bounds: tuple[float, ...]) -> tuple[float, dict[float, float]]:
        start, end = before[name], after[name]
        total = end.get(float("inf"), 0) - start.get(float("inf"), 0)
        return total, {b: total - (end.get(b, 0) - start.get(b, 0)) for b in bounds}

    produces, slow_produces = over("produce", (0.025, 0.1))
    flushes, slow_flushes = over("flush", (0.01, 0.025))
    return (
        f"the broker took {slow_produces[0.025]:.0f} of its {produces:.0f} Produce requests "
        f"over 25 ms, {slow_produces[0.1]:.0f} over 100 ms; {slow_flushes[0.01]:.0f} of its "
        f"{flushes:.0f} log flushes over 10 ms, {slow_flushes[0.025]:.0f} over 25 ms"
    )


def stalls(received: list[tuple[float, float]], first: float) -> list[tuple[float, float, int]]:
    """Runs of records slower than SLOW_MS sent within 100 ms of each other: (when the first
    was sent, in s from the start; the worst latency, ms; how many records)."""
    episodes: list[list[float]] = []
    for sent, latency in sorted(received):
        if latency * 1000 <= SLOW_MS:
            continue
        if episodes and sent - episodes[-1][3] < 0.1:
            episode = episodes[-1]
            episode[1] = max(episode[1], latency * 1000)
            episode[2] += 1
            episode[3] = sent
        else:
            episodes.append([sent, latency * 1000, 1, sent])
    return [(start - first, worst, count) for start, worst, count, _ in episodes]


def one_run(
    broker: BrokerProcess,
    data_dir: Path,
    clients: str,
    acks: str,
    rate: int,
    seconds: float,
    name: str,
    trace: bool = False,
):
    if clients != "fsync":
        create_topic(broker.port, name)
    ACKED.clear()
    histograms_before = broker_histograms(broker)
    client_trace = ClientTrace() if trace and clients in ("async", "sync") else None
    with GcPauses() as gc_pauses, client_trace or contextlib.nullcontext():
        if clients == "async":
            received = uvloop.run(run_async(broker.bootstrap, name, acks, rate, seconds))
        elif clients == "fsync":
            received = run_fsync(data_dir, rate, seconds)
        elif clients == "raw":
            received = uvloop.run(run_raw(broker.port, name, acks, rate, seconds))
        else:
            received = run_sync(broker.bootstrap, name, acks, rate, seconds)
    latencies = sorted(latency * 1000 for _, latency in received)
    first = min(sent for sent, _ in received)
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
    full = [
        (at - first, pause * 1000) for at, pause, generation in gc_pauses.pauses if generation == 2
    ]
    gc_summary = (
        f"GC {len(gc_pauses.pauses)} collections, longest "
        f"{max((p for _, p, _ in gc_pauses.pauses), default=0.0) * 1000:.1f} ms; full ones at "
        + (", ".join(f"{at:.2f} s ({pause:.1f} ms)" for at, pause in full) or "none")
    )
    if clients != "fsync":
        gc_summary += "; " + broker_side(histograms_before, broker_histograms(broker))
    if client_trace is not None:
        gc_summary += "\n" + "\n".join(summary(client_trace.breakdown(received)))
    return figures, stalls(received, first), len(latencies), gc_summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--clients",
        nargs="+",
        choices=("async", "sync", "raw", "fsync"),
        default=["raw", "async"],
        help="raw: frames on sockets, the broker's path alone (the reference); fsync: an "
        "fdatasync a record in the log directory, the disk alone (acks=all only)",
    )
    parser.add_argument("--acks", nargs="+", default=["all", "1"])
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() before the runs (what a latency-sensitive application can do after "
        "start-up): the collector then leaves the objects made so far alone",
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="split each client record's time into send->written->acked->fetched->delivered "
        "(bench/client_trace.py) and print where the slowest 1%% spent theirs",
    )
    parser.add_argument(
        "--data-root",
        type=Path,
        default=None,
        help="make the broker's log directory and the fsync probe's file under this directory "
        "(default: the system's temporary directory)",
    )
    args = parser.parse_args()
    if args.gc_freeze:
        gc.collect()
        gc.freeze()
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="odradek-e2e-", dir=args.data_root) as root:
        data_dir = Path(root) / "data"
        broker = BrokerProcess(data_dir)
        try:
            for round_number in range(args.rounds):
                for acks in args.acks:
                    for clients in args.clients:
                        if clients == "fsync" and acks != "all":
                            continue
                        name = f"e2e-{clients}-{acks}-{round_number}"
                        figures, episodes, count, gc_summary = one_run(
                            broker,
                            data_dir,
                            clients,
                            acks,
                            args.rate,
                            args.seconds,
                            name,
                            args.trace,
                        )
                        results.setdefault((clients, acks), []).append(figures)
                        line = ", ".join(f"{k} {v:.2f} ms" for k, v in figures.items())
                        print(
                            f"round {round_number + 1} {clients} acks={acks} ({count:,} "
                            f"records at {args.rate:,}/s): {line}",
                            flush=True,
                        )
                        print(f"    {gc_summary}")
                        for at, worst, records in episodes[:12]:
                            print(
                                f"    stall at {at:.2f} s: {records} records over "
                                f"{SLOW_MS:.0f} ms, worst {worst:.1f} ms"
                            )
                        if len(episodes) > 12:
                            print(f"    ... {len(episodes) - 12} more stalls")
        finally:
            broker.stop()
    if args.rounds > 1:
        for (clients, acks), rounds in results.items():
            parts = []
            for key in rounds[0]:
                values = [r[key] for r in rounds]
                parts.append(
                    f"{key} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
                )
            print(
                f"{clients} acks={acks}, median (range) of {args.rounds} rounds, ms: "
                + ", ".join(parts)
            )


if __name__ == "__main__":
    main()
