"""Broker benchmark: CPU cost, throughput against raw baselines, client rates, latency, memory.

Runs ``odradek serve`` as its own process on a temporary data directory and prints figures; it
asserts nothing. Sections:

(a) broker CPU-seconds per 1M records (from /proc/<pid>/stat): produce 100 B and 1 KB records,
    consume 100 B records;
(b) throughput as ratios: produce of client-built 1 MB requests (acks=1) and fetch (sendfile from
    the page cache) against a raw loopback socket blast; acks=all against an fdatasync'd
    sequential file write; event-loop lag while a client reads cold data;
(c) records/s through the project's own Producer and Consumer (100 B records);
(d) end-to-end latency p50/p99 at 1,000 and 10,000 records/s; event-loop lag p99 under load;
    broker RSS with 1,000 partitions and 1,000 idle connections;
(e) the cost of a request: broker CPU per request and CPU-seconds per 1M records for 1, 10,
    100, 1,000 and 8,000 records of 100 B a produce request, over both wire protocols (raw
    client-built frames, 8 in flight), acks=1 and acks=all, and for a fetch that finds nothing
    new (max_wait 0); medians and ranges of interleaved rounds. With ``--baseline TREE`` the
    same cells also run, interleaved, against a second broker started from another checkout
    (its own ``.venv``), and the ratio of the two is printed. Every cell is also measured, in
    the same rounds, against the transport floor (``bench/transport_floor.py``: a bare uvloop
    server answering the same frames with a fixed small frame), and each broker's cost is
    printed as a multiple of it.

Usage: ``python bench/broker.py [--quick] [--sweep-only] [--rounds N] [--baseline TREE]``
(``--quick`` shrinks every volume tenfold).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import uvloop
from prometheus_client.parser import text_string_to_metric_families

from odradek.client import AsyncConsumer, AsyncProducer
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.header import RequestHeader
from odradek.protocol.kafka.message_codec import encode_parts, request_spec
from odradek.protocol.messages import encode_request
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.schema import Message
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.record_batch_builder import build_batch
from odradek.topic_partition import TopicPartition

MB = 1024 * 1024
BATCH_LIMIT = 1_000_000  # under the default max.message.bytes (1048588)
MAX_BATCH_RECORDS = 8000
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SERVING = re.compile(r"serving on (?:\w+://)?[^:]+:(\d+)[^(]*\(metrics on [^:]+:(\d+)\)")


# --- the broker process ----------------------------------------------------------------------


class BrokerProcess:
    """``odradek serve`` in a child process; its CPU time and RSS read from /proc.

    ``tree`` runs the broker of another checkout, with that checkout's own ``.venv``.
    ``copy_fetches`` makes ``os.sendfile`` fail as unsupported in the broker (as on a file
    system without it), so fetched records take the broker's copy path instead.
    """

    def __init__(
        self, data_dir: Path, *args: str, tree: Path | None = None, copy_fetches: bool = False
    ) -> None:
        python = sys.executable if tree is None else str(tree / ".venv" / "bin" / "python")
        launcher = ["-c", _COPY_FETCHES_LAUNCHER] if copy_fetches else ["-m", "odradek.cli.main"]
        command = [
            python,
            *launcher,
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "--metrics-port",
            "0",
            *args,
        ]
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=tree)
        for line in self.process.stderr:
            if match := SERVING.search(line):
                self.port, self.metrics_port = int(match.group(1)), int(match.group(2))
                break
        else:
            raise RuntimeError("the broker did not start")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime

    def cpu_ns(self) -> int:
        """On-CPU nanoseconds of every thread now alive (schedstat: finer than clock ticks)."""
        total = 0
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass  # a thread that ended meanwhile
        return total

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024

    def lag_histogram(self) -> dict[float, float]:
        """Cumulative counts of the broker's event-loop lag histogram, by bucket bound."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == "odradek_event_loop_lag_seconds":
                return {
                    float(s.labels["le"]): s.value
                    for s in family.samples
                    if s.name.endswith("_bucket")
                }
        raise RuntimeError("no event-loop lag histogram")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


_COPY_FETCHES_LAUNCHER = """
import errno, os, runpy, sys
def unsupported(*args):
    raise OSError(errno.EOPNOTSUPP, "sendfile turned off by the bench")
os.sendfile = unsupported
sys.argv[0] = "odradek"
runpy.run_module("odradek.cli.main", run_name="__main__")
"""


def lag_p99(before: dict[float, float], after: dict[float, float]) -> str:
    """The bucket holding the 99th percentile of the lag samples taken between two scrapes."""
    total = after[float("inf")] - before[float("inf")]
    for bound in sorted(after):
        if after[bound] - before[bound] >= 0.99 * total:
            return f"<= {bound * 1000:g} ms ({int(total)} samples)"
    return "n/a"


@contextmanager
def cpu_meter(broker: BrokerProcess, label: str, records: int) -> Iterator[None]:
    started, wall = broker.cpu_seconds(), time.perf_counter()
    yield
    used, elapsed = broker.cpu_seconds() - started, time.perf_counter() - wall
    per_million = used / records * 1e6
    rate = records / elapsed
    print(
        f"  {label}: {per_million:.3f} CPU-s per 1M records "
        f"({used:.2f} CPU-s, {records:,} records, {rate:,.0f} records/s)"
    )


class TransportFloorProcess:
    """``bench/transport_floor.py`` in a child process: a bare uvloop server answering every
    frame with a fixed small frame, the floor under any broker's cost of a request."""

    def __init__(self) -> None:
        script = Path(__file__).with_name("transport_floor.py")
        self.process = subprocess.Popen(
            [sys.executable, str(script)], stderr=subprocess.PIPE, text=True
        )
        for line in self.process.stderr:
            if match := FLOOR_SERVING.search(line):
                self.port = int(match.group(1))
                break
        else:
            raise RuntimeError("the transport floor did not start")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()

    cpu_ns = BrokerProcess.cpu_ns
    stop = BrokerProcess.stop


FLOOR_SERVING = re.compile(r"serving on 127\.0\.0\.1:(\d+)")


# --- a lean pipelined client: client-built frames, responses only counted --------------------


class PipelinedClient:
    """Sends pre-encoded request frames with up to ``window`` in flight; a reader thread counts
    the response frames and bytes without decoding them, so the client costs little."""

    def __init__(self, port: int, window: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self._slots = threading.Semaphore(window)
        self.received_bytes = 0
        self.frames = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._expected = 0
        self._done = threading.Event()

    def run(self, frames: list[bytes]) -> float:
        """Send every frame, wait for every response; return the elapsed seconds."""
        self._expected = len(frames)
        started = time.perf_counter()
        self._reader.start()
        for frame in frames:
            self._slots.acquire()
            self.sock.sendall(frame)
        self._done.wait()
        elapsed = time.perf_counter() - started
        self.sock.close()
        return elapsed

    def _read(self) -> None:
        buffer = bytearray(4 * MB)
        view = memoryview(buffer)
        pending = b""  # bytes of a frame-size prefix split across reads
        left_in_frame = 0
        while self.frames < self._expected:
            count = self.sock.recv_into(buffer)
            if not count:
                raise ConnectionError("the broker closed the connection")
            self.received_bytes += count
            position = 0
            while position < count:
                if left_in_frame:
                    step = min(left_in_frame, count - position)
                    left_in_frame -= step
                    position += step
                    if not left_in_frame:
                        self.frames += 1
                        self._slots.release()
                    continue
                need = 4 - len(pending)
                pending += bytes(view[position : position + need])
                position += min(need, count - position)
                if len(pending) == 4:
                    left_in_frame, pending = int.from_bytes(pending, "big"), b""
        self._done.set()


def frame_of(request: Message, correlation_id: int = 0) -> bytes:
    header = RequestHeader(request.api_key, 0, correlation_id, "bench")
    return b"".join(bytes(part) for part in encode_request(header, request))


def records_batch(value_size: int) -> tuple[bytes, int]:
    """One batch of ``value_size``-byte records as large as a request may carry."""
    count = min(MAX_BATCH_RECORDS, BATCH_LIMIT // (value_size + 8))
    now = int(time.time() * 1000)
    value = b"v" * value_size
    return build_batch([(now, None, value, ())] * count), count


def produce_frames(topic: str, batch: bytes, requests: int, acks: Acks) -> list[bytes]:
    request = ProduceRequest((ProducePartitionData(topic, 0, batch),), acks=acks)
    frame = frame_of(request)
    return [frame] * requests


def fetch_frames(
    topic: str, records_per_batch: int, batch_size: int, batches: int, batches_per_fetch: int
) -> list[bytes]:
    """Fetches that each return exactly ``batches_per_fetch`` whole batches."""
    size = batch_size * batches_per_fetch
    return [
        frame_of(
            FetchRequest(
                (FetchPartition(topic, 0, first * records_per_batch, size),),
                max_wait_ms=0,
                max_bytes=size,
            )
        )
        for first in range(0, batches, batches_per_fetch)
    ]


def admin_call(port: int, request: Message) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(frame_of(request))
        sock.recv(1 << 16)


def create_topic(port: int, topic: str, partitions: int = 1, **configs: str) -> None:
    admin_call(port, CreateTopicsRequest((CreatableTopic(topic, partitions, configs),)))


# --- baselines -------------------------------------------------------------------------------


def raw_loopback_mb_s(total_mb: int) -> float:
    """MB/s of one sender process blasting 1 MB writes at a sink process that discards."""
    sink = subprocess.Popen(
        [sys.executable, "-c", _SINK],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(sink.stdout.readline())
    payload = b"x" * MB
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.perf_counter()
        for _ in range(total_mb):
            sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        sink.stdout.readline()
        elapsed = time.perf_counter() - started
    sink.wait()
    return total_mb / elapsed


_SINK = """
import socket
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
buffer = bytearray(4 << 20)
while conn.recv_into(buffer):
    pass
print("done", flush=True)
"""


def page_cache_write_mb_s(directory: Path, total_mb: int) -> float:
    """MB/s of sequential 1 MB pwrites into a new file: the page cache's pace, no fsync."""
    path = directory / "page-cache-baseline"
    payload = b"x" * MB
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for number in range(total_mb):
            os.pwrite(fd, payload, number * MB)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
    return total_mb / elapsed


def fdatasync_write_mb_s(directory: Path, total_mb: int) -> float:
    """MB/s of sequential 1 MB writes, each fdatasync'ed, in the broker's filesystem."""
    path = directory / "fdatasync-baseline"
    payload = b"x" * MB
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for _ in range(total_mb):
            os.write(fd, payload)
            os.fdatasync(fd)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
    return total_mb / elapsed


# --- sections --------------------------------------------------------------------------------


def section_a_and_b(broker: BrokerProcess, data_dir: Path, scale: float) -> None:
    print("(a) broker CPU per 1M records, (b) throughput against raw baselines")
    raw = raw_loopback_mb_s(int(1000 * scale))
    print(f"  raw loopback blast: {raw:,.0f} MB/s")
    page_cache = page_cache_write_mb_s(data_dir, int(400 * scale))
    print(f"  1 MB pwrites into a new file (page cache, no fsync): {page_cache:,.0f} MB/s")
    requests = max(10, int(400 * scale))
    batch, per_batch = records_batch(100)
    produce_mb_s = produce(broker, "p100", batch, per_batch, requests)
    print(
        f"  produce 1 MB requests (acks=1): {produce_mb_s:,.0f} MB/s "
        f"= {produce_mb_s / raw:.0%} of raw loopback, "
        f"{produce_mb_s / page_cache:.0%} of page-cache writes"
    )
    produce(broker, "p1k", *records_batch(1000), requests)
    fetch_mb_s = consume(broker, "p100", len(batch), per_batch, requests)
    print(
        f"  fetch from the page cache: {fetch_mb_s:,.0f} MB/s = {fetch_mb_s / raw:.0%} of raw "
        "loopback"
    )
    durable(broker, data_dir, batch, max(10, int(200 * scale)))
    cold_read_lag(broker, data_dir, "p100", len(batch), per_batch, requests)


def produce(
    broker: BrokerProcess, topic: str, batch: bytes, per_batch: int, requests: int
) -> float:
    """Produce ``requests`` 1 MB requests of ``batch`` (8 in flight); MB/s."""
    create_topic(broker.port, topic, **{"segment.bytes": str(256 * MB)})
    frames = produce_frames(topic, batch, requests, Acks.LEADER)
    lag_before = broker.lag_histogram()
    with cpu_meter(broker, f"produce {topic[1:]} B records, acks=1", per_batch * requests):
        elapsed = PipelinedClient(broker.port, 8).run(frames)
    print(f"  event-loop lag p99 meanwhile: {lag_p99(lag_before, broker.lag_histogram())}")
    return len(batch) * requests / MB / elapsed


def consume(
    broker: BrokerProcess, topic: str, batch_size: int, per_batch: int, batches: int
) -> float:
    """Fetch the whole topic, 4 batches a response, 4 responses in flight; MB/s."""
    frames = fetch_frames(topic, per_batch, batch_size, batches, 4)
    client = PipelinedClient(broker.port, 4)
    lag_before = broker.lag_histogram()
    with cpu_meter(broker, f"consume {topic[1:]} B records (sendfile)", per_batch * batches):
        elapsed = client.run(frames)
    print(f"  event-loop lag p99 meanwhile: {lag_p99(lag_before, broker.lag_histogram())}")
    return client.received_bytes / MB / elapsed


def durable(broker: BrokerProcess, data_dir: Path, batch: bytes, requests: int) -> None:
    reference = fdatasync_write_mb_s(data_dir, requests)
    print(f"  fdatasync'd 1 MB sequential writes: {reference:,.0f} MB/s")
    create_topic(broker.port, "durable", **{"segment.bytes": str(256 * MB)})
    for window in (1, 8):
        frames = produce_frames("durable", batch, requests, Acks.ALL)
        elapsed = PipelinedClient(broker.port, window).run(frames)
        mb_s = len(batch) * requests / MB / elapsed
        print(
            f"  produce acks=all, {window} in flight: {mb_s:,.0f} MB/s "
            f"= {mb_s / reference:.0%} of fdatasync'd writes"
        )


def cold_read_lag(
    broker: BrokerProcess, data_dir: Path, topic: str, batch_size: int, per_batch: int, batches: int
) -> None:
    """Another process's ping round trips while a client reads a topic warm, then cold."""
    frames = fetch_frames(topic, per_batch, batch_size, batches, 4)
    for state in ("warm", "cold"):
        if state == "cold":
            for path in (data_dir / f"{topic}-0").glob("*.log"):
                drop_page_cache(path)
        pinger = subprocess.Popen(
            [sys.executable, "-c", _PINGER, str(broker.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        pinger.stdout.readline()  # connected and pinging
        lag_before = broker.lag_histogram()
        client = PipelinedClient(broker.port, 4)
        elapsed = client.run(frames)
        lag = lag_p99(lag_before, broker.lag_histogram())
        round_trips, _ = pinger.communicate("")
        print(
            f"  {state} read of {client.received_bytes / MB:,.0f} MB at "
            f"{client.received_bytes / MB / elapsed:,.0f} MB/s: another client's round trips "
            f"{round_trips.strip()}; broker loop lag p99 {lag}"
        )


_PINGER = """
import socket, sys, threading, time
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.header import RequestHeader
from odradek.protocol.kafka.message_codec import encode_parts, request_spec
from odradek.protocol.messages import encode_request
header = RequestHeader(ApiVersionsRequest.api_key, 0, 0, "ping")
frame = b"".join(bytes(p) for p in encode_request(header, ApiVersionsRequest()))
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("pinging", flush=True)
times = []
while not stop.is_set():
    started = time.perf_counter()
    sock.sendall(frame)
    sock.recv(65536)
    times.append(time.perf_counter() - started)
    time.sleep(0.001)
times.sort()
p50, p99 = times[len(times) // 2] * 1e3, times[int(len(times) * 0.99)] * 1e3
print(f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {times[-1] * 1e3:.2f} ms ({len(times)} pings)")
"""


def drop_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def section_c(broker: BrokerProcess, scale: float) -> None:
    print("(c) records/s through the project's Producer and Consumer (100 B records)")
    count = max(10_000, int(500_000 * scale))
    create_topic(broker.port, "clients", **{"segment.bytes": str(256 * MB)})

    async def produce() -> float:
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap,
            acks="1",
            linger_ms=5,
            batch_size=512 * 1024,
            buffer_memory=256 * MB,  # room for every record: measures sending, not blocking
        ) as producer:
            await producer.send("clients", b"warm-up", partition=0)  # metadata, connection
            value = b"v" * 100
            started = time.perf_counter()
            last = None
            for _ in range(count):
                last = producer.send("clients", value, partition=0)
            await producer.flush()
            await last
            return time.perf_counter() - started

    async def consume() -> float:
        tp = TopicPartition("clients", 0)
        async with AsyncConsumer(
            bootstrap_servers=broker.bootstrap, max_poll_records=100_000
        ) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            started = time.perf_counter()
            received = 0
            while received < count:
                received += len(await consumer.poll(1000))
            return time.perf_counter() - started

    elapsed = uvloop.run(produce())
    print(f"  Producer: {count / elapsed:,.0f} records/s ({count:,} records, acks=1)")
    elapsed = uvloop.run(consume())
    print(f"  Consumer: {count / elapsed:,.0f} records/s")
    print("  (both pure-Python clients spend their time building and parsing records; the")
    print("  broker is mostly idle meanwhile, see the report)")


def section_d(broker: BrokerProcess, scale: float) -> None:
    print("(d) end-to-end latency, event-loop lag, memory")
    for rate in (1_000, 10_000):
        latencies = uvloop.run(end_to_end(broker, f"latency-{rate}", rate, 3.0))
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99)] * 1000
        print(
            f"  {rate:,} records/s: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
            f"({len(latencies):,} records, Producer linger_ms=0 -> Consumer long poll)"
        )
    rss_with_partitions_and_connections(broker)


async def end_to_end(broker: BrokerProcess, topic: str, rate: int, seconds: float) -> list[float]:
    create_topic(broker.port, topic)
    tp = TopicPartition(topic, 0)
    latencies: list[float] = []
    total = int(rate * seconds)

    async def consume() -> None:
        async with AsyncConsumer(
            bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=500
        ) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            while len(latencies) < total:
                for record in await consumer.poll(1000):
                    latencies.append(time.perf_counter() - float(record.value))

    async def produce() -> None:
        async with AsyncProducer(
            bootstrap_servers=broker.bootstrap, acks="1", linger_ms=0
        ) as producer:
            tick = 0.001
            per_tick = rate * tick
            started = time.perf_counter()
            sent = 0
            while sent < total:
                due = int((time.perf_counter() - started) / tick * per_tick) + 1
                while sent < min(due, total):
                    producer.send(topic, b"%.9f" % time.perf_counter(), partition=0)
                    sent += 1
                await asyncio.sleep(tick)
            await producer.flush()

    await asyncio.gather(consume(), produce())
    return latencies


def rss_with_partitions_and_connections(broker: BrokerProcess) -> None:
    before = broker.rss_mb()
    create_topic(broker.port, "wide", 1000)
    with_partitions = broker.rss_mb()
    sockets = []
    frame = frame_of(ApiVersionsRequest())
    for _ in range(1000):
        sock = socket.create_connection(("127.0.0.1", broker.port))
        sock.sendall(frame)
        sock.recv(1 << 16)
        sockets.append(sock)
    time.sleep(0.5)
    with_connections = broker.rss_mb()
    for sock in sockets:
        sock.close()
    print(
        f"  broker RSS: {before:.0f} MB before, {with_partitions:.0f} MB with 1,000 more "
        f"partitions, {with_connections:.0f} MB with 1,000 idle connections too"
    )


SWEEP_RECORDS = (1, 10, 100, 1_000, 8_000)
SWEEP_RECORD_CPU_US = 1.0
"""A guess of the broker CPU per record, to size each cell at about SWEEP_CELL_CPU_S."""
SWEEP_REQUEST_CPU_US = 60.0
SWEEP_CELL_CPU_S = 0.25
SWEEP_WINDOW = 8
SWEEP_WARM_UP_REQUESTS = 50
"""Sent before each cell is measured: the partition's first requests open its files."""
KAFKA_PRODUCE_VERSION = 9
KAFKA_FETCH_VERSION = 12


def kafka_frame(api_key: int, version: int, values: dict, correlation_id: int = 0) -> bytes:
    """A Kafka request frame (size prefix, header v1 or v2, body) encoded from ``values``."""
    spec = request_spec(api_key, version)
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"bench"
    if spec.flexible:
        header += b"\x00"
    body = b"".join(bytes(part) for part in encode_parts(spec, values))
    return struct.pack(">i", len(header) + len(body)) + header + body


def sweep_produce_frame(protocol: str, topic: str, batch: bytes, acks: Acks) -> bytes:
    if protocol == "msgpack":
        return frame_of(ProduceRequest((ProducePartitionData(topic, 0, batch),), acks=acks))
    values = {
        "acks": int(acks),
        "timeout": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    return kafka_frame(0, KAFKA_PRODUCE_VERSION, values)


def sweep_empty_fetch_frame(protocol: str, topic: str) -> bytes:
    """A fetch at the end of an empty partition that may not wait: it answers at once."""
    if protocol == "msgpack":
        return frame_of(FetchRequest((FetchPartition(topic, 0, 0),), max_wait_ms=0))
    values = {
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 50 * MB,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": MB}],
            }
        ],
    }
    return kafka_frame(1, KAFKA_FETCH_VERSION, values)


def delete_topic(port: int, topic: str) -> None:
    admin_call(port, DeleteTopicsRequest((topic,)))


def idle_cpu_us_per_s(broker: BrokerProcess, seconds: float = 2.0) -> float:
    """The broker's own CPU while nothing is asked of it (timers): subtracted from each cell."""
    started, wall = broker.cpu_ns(), time.perf_counter()
    time.sleep(seconds)
    return (broker.cpu_ns() - started) / 1e3 / (time.perf_counter() - wall)


@dataclass(frozen=True)
class SweepCell:
    """One workload of the sweep: what every request is, how many of them."""

    label: str
    protocol: str
    records: int  # per request; 0 for the empty fetch
    acks: Acks | None
    requests: int


def sweep_cells(scale: float) -> list[SweepCell]:
    cells = []
    for protocol in ("msgpack", "kafka"):
        for acks in (Acks.LEADER, Acks.ALL):
            for records in SWEEP_RECORDS:
                cost_us = SWEEP_REQUEST_CPU_US + records * SWEEP_RECORD_CPU_US
                requests = max(20, int(SWEEP_CELL_CPU_S * 1e6 / cost_us * scale))
                acks_name = "1" if acks is Acks.LEADER else "all"
                label = f"{protocol:<8} produce acks={acks_name:<3} {records:>5,} rec/req"
                cells.append(SweepCell(label, protocol, records, acks, requests))
        requests = max(200, int(SWEEP_CELL_CPU_S * 1e6 / SWEEP_REQUEST_CPU_US * scale))
        cells.append(SweepCell(f"{protocol:<8} fetch, nothing new", protocol, 0, None, requests))
    return cells


def cell_frame(cell: SweepCell, topic: str) -> bytes:
    """The request ``cell`` sends over and over, to ``topic``."""
    if cell.acks is None:
        return sweep_empty_fetch_frame(cell.protocol, topic)
    batch = build_batch([(int(time.time() * 1000), None, b"v" * 100, ())] * cell.records)
    return sweep_produce_frame(cell.protocol, topic, batch, cell.acks)


def cpu_us_per_request(
    server: BrokerProcess | TransportFloorProcess, frame: bytes, requests: int, idle_us_per_s: float
) -> float:
    """Server CPU microseconds per ``frame`` answered (its idle timers' share taken off)."""
    PipelinedClient(server.port, SWEEP_WINDOW).run([frame] * SWEEP_WARM_UP_REQUESTS)
    started, wall = server.cpu_ns(), time.perf_counter()
    PipelinedClient(server.port, SWEEP_WINDOW).run([frame] * requests)
    used_us = (server.cpu_ns() - started) / 1e3
    used_us -= idle_us_per_s * (time.perf_counter() - wall)
    return used_us / requests


def run_cell(broker: BrokerProcess, cell: SweepCell, idle_us_per_s: float, serial: int) -> float:
    """Broker CPU microseconds per request of ``cell`` (its idle timers' share taken off)."""
    topic = f"sweep-{serial}"
    create_topic(broker.port, topic, **{"segment.bytes": str(1024 * MB)})
    try:
        return cpu_us_per_request(broker, cell_frame(cell, topic), cell.requests, idle_us_per_s)
    finally:
        delete_topic(broker.port, topic)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} [{min(values):.1f} .. {max(values):.1f}]"


def section_e(
    brokers: dict[str, BrokerProcess],
    floor: TransportFloorProcess,
    scale: float,
    rounds: int,
    cells_matching: str,
) -> None:
    print(
        f"(e) the cost of a request: broker CPU us per request and CPU-s per 1M records of "
        f"100 B, raw frames, {SWEEP_WINDOW} in flight; median [min .. max] of {rounds} "
        "interleaved rounds; the transport floor is a bare uvloop BufferedProtocol answering "
        "the same frames with a fixed 20 B frame, measured in the same rounds"
    )
    idle = {name: idle_cpu_us_per_s(broker) for name, broker in brokers.items()}
    for name, us_per_s in idle.items():
        print(f"  {name}: idle broker {us_per_s / 1e4:.2f}% of a core (taken off every cell)")
    floor_idle = idle_cpu_us_per_s(floor)
    cells = [cell for cell in sweep_cells(scale) if re.search(cells_matching, cell.label)]
    costs: dict[tuple[str, str], list[float]] = {}
    serial = 0
    order = list(brokers)
    for round_number in range(rounds):
        for cell in cells:
            for name in order if round_number % 2 == 0 else reversed(order):
                serial += 1
                cost = run_cell(brokers[name], cell, idle[name], serial)
                costs.setdefault((cell.label, name), []).append(cost)
            floor_cost = cpu_us_per_request(
                floor, cell_frame(cell, "floor"), cell.requests, floor_idle
            )
            costs.setdefault((cell.label, FLOOR), []).append(floor_cost)
        print(f"  round {round_number + 1} of {rounds} done", flush=True)
    header = "  " + " " * 38
    for name in order:
        header += f" | {name + ': us per request':<28} {'CPU-s/1M':>9}"
    header += f" | {FLOOR + ': us per request':<28}"
    if len(order) == 2:
        header += f" | {order[1]}/{order[0]}"
    header += " | x floor, " + ", ".join(order)
    print(header)
    for cell in cells:
        line = f"  {cell.label:<38}"
        medians = []
        for name in order:
            values = costs[(cell.label, name)]
            medians.append(statistics.median(values))
            per_million = f"{medians[-1] / cell.records:9.2f}" if cell.records else f"{'':>9}"
            line += f" | {spread(values):<28} {per_million}"
        floor_values = costs[(cell.label, FLOOR)]
        floor_median = statistics.median(floor_values)
        line += f" | {spread(floor_values):<28}"
        if len(order) == 2:
            line += f" | {medians[1] / medians[0]:.2f}"
        line += " | " + ", ".join(f"{median / floor_median:.1f}" for median in medians)
        print(line)


FLOOR = "transport floor"


def machine_cpu() -> tuple[int, int]:
    """Busy and total clock ticks of every CPU since boot."""
    ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of every volume")
    parser.add_argument("--sweep-only", action="store_true", help="section (e) alone")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of section (e)")
    parser.add_argument(
        "--cells", default="", help="only the cells of section (e) whose label matches this regex"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout (with its .venv) whose broker section (e) also measures",
    )
    options = parser.parse_args()
    scale = 0.1 if options.quick else 1.0
    busy_before, total_before = machine_cpu()
    ours_before = sum(os.times()[:2])
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as root:
        data_dir = Path(root) / "data"
        broker = BrokerProcess(data_dir)
        brokers = {"this tree": broker}
        floor = TransportFloorProcess()
        try:
            if options.baseline is not None:
                baseline = BrokerProcess(Path(root) / "baseline", tree=options.baseline.resolve())
                brokers = {"baseline": baseline, "this tree": broker}
            if not options.sweep_only:
                section_a_and_b(broker, data_dir, scale)
                section_c(broker, scale)
                section_d(broker, scale)
            section_e(brokers, floor, scale, options.rounds, options.cells)
            broker_cpu = sum(b.cpu_seconds() for b in brokers.values())
            broker_cpu += BrokerProcess.cpu_seconds(floor)
        finally:
            floor.stop()
            for running in brokers.values():
                running.stop()
    busy, total = machine_cpu()
    busy, total = busy - busy_before, total - total_before
    ours = (sum(os.times()[:2]) - ours_before + broker_cpu) * CLOCK_TICKS
    print(
        f"machine CPU busy during the run: {busy / total:.0%}; the bench and the broker used "
        f"{ours / total:.0%}, other processes about {max(0.0, busy - ours) / total:.0%}"
    )


if __name__ == "__main__":
    main()
