"""odradek beside Apache Kafka, the same clients against both: prints figures, asserts nothing.

Targets: the reference Kafka (tools/kafka-reference: one KRaft node on loopback, 384 MB heap)
with its default topic settings (acks=all answered from the page cache, no fsync), the same
Kafka on topics with flush.messages=1 (an fsync per write), and odradek (`odradek serve` in a
child process, fsync before every acks=all answer). Both brokers run with the same
group.initial.rebalance.delay.ms, set explicitly (``--rebalance-delay-ms``, default 0).

What is measured, per round, each case on every target:
- headline: Kafka's own ProducerPerformance at the Java client's defaults (no producer props
  but bootstrap.servers: idempotence on, acks=all, linger.ms 5, batch.size 16 KB), as fast as
  it goes: 100 B x ``--records`` (default 1,000,000) and 1 KB x ``--kb-records`` (300,000)
  records into a fresh one-partition topic, each run preceded by an untimed warm-up run (a
  tenth of the records, same size, into a topic of its own): records/s and its own
  send-to-acknowledgement p50/p99;
- ConsumerPerformance (a group member, the Java client's defaults) reading each of those
  topics back: records/s while fetching, and the time it spent joining the group;
- secondary: librdkafka (confluent-kafka) producing 100 B and 1 KB records, acks=1 and all;
- end-to-end latency of 100 B acks=all records (librdkafka producer at its defaults): each
  record carries its send time, a consumer in a process of its own polls one record at a time
  and takes receipt - send for each record as it is handed over; at 1,000 records/s and at half
  the slowest target's ProducerPerformance 100 B rate of the round (the same rate on every
  target), for ``--seconds`` each;
- for every produce and consume run: the broker's CPU per record, total (the sum over its
  threads of /proc/PID/task/*/schedstat's run time, in ns; the tick count of /proc/PID/stat if
  a thread ended meanwhile) and user-mode alone (utime of /proc/PID/stat, 10 ms ticks, runs of
  seconds); each broker's idle CPU (measured for 3 s at the start of each round) times the
  run's wall time is taken off both, so the figure is what the work cost (Kafka idles higher,
  so this lowers Kafka's figure more than odradek's); for odradek, the log flushes (fsyncs,
  the count of its odradek_log_flush_seconds histogram) per Produce request answered, and the
  records per Produce request.
Rounds are interleaved and the order rotated: round r starts with target r mod 3, so a cold
first place and a neighbour's noise spread over all. Printed: each figure's median and
[min .. max] over the rounds per target, and the per-round ratios odradek/Kafka and
odradek/Kafka-with-fsync (pair by pair, each in its round), their median and [min .. max].

Then the broker's resident memory (at each round's start, and its peak), and start-up with one
finish line for both (the same librdkafka client polling Metadata until the answer lists every
partition of every topic the broker had, each with a leader), timed from the start command:
fresh (Kafka's includes formatting its directory), and restarted with one more topic of
``--partitions`` partitions.

``--quick`` is a smoke run: small counts, one round. ``--targets odradek`` leaves Kafka out
(its tools still run the clients). ``--cases perf:1024,rdkafka:1024:all`` runs only those
produce cases (``perf:SIZE`` is ProducerPerformance at the Java defaults, ``rdkafka:SIZE:ACKS``)
and nothing else: no consume, latency, memory or start-up figures. ``--profile DIR`` then runs
each selected case once more against odradek alone, not counted in the figures, twice (py-spy,
if installed, sampling the broker's threads into ``DIR``: every sample, then only runnable
threads); it prints each thread's CPU time, its kernel share and its run-queue wait from /proc,
the log flushes and their fsync time from the broker's histogram, and the stacks' top entries.
``--set KEY=VALUE`` (repeatable) starts this checkout's odradek with that setting.
``--baseline TREE`` (with ``--cases``) adds the odradek of another checkout (with its own
``.venv``, e.g. ``git worktree add`` of main and ``make install`` there) as one more target of
the same rotated rounds, "odradek base", and prints odradek/odradek-base per round: a change
judged before and after under the same load.

Usage: python bench/vs_kafka.py [--quick] [--records N] [--kb-records N] [--rounds N]
       [--partitions N] [--seconds S] [--rebalance-delay-ms MS] [--targets LIST] [--dir DIR]
       [--cases LIST] [--set KEY=VALUE] [--baseline TREE] [--profile DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from broker import BrokerProcess
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

TOOL = Path(__file__).resolve().parents[1] / "tools" / "kafka-reference" / "kafka-reference"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# ProducerPerformance's summary line.
SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)
KAFKA, KAFKA_FSYNC, ODRADEK = "kafka", "kafka fsync", "odradek"
BASELINE = "odradek base"
LATENCY_MARKER = b"ready?"  # sent until the latency consumer has its first fetch answered


def tool(*args: str) -> str:
    return subprocess.run([str(TOOL), *args], check=True, capture_output=True, text=True).stdout


def kafka_tool(main_class: str, *args: str, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(TOOL), "run", main_class, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    if done.returncode:
        raise RuntimeError(f"{main_class} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


# --- the broker's CPU and memory, from /proc --------------------------------------------------


@dataclass(frozen=True)
class CpuSample:
    """A process's CPU so far: each live thread's run time (schedstat, ns) and the process's
    user and system clock ticks (stat: every thread, ended ones too)."""

    thread_ns: dict[int, int]
    user_ticks: int
    system_ticks: int
    at: float  # perf_counter


@dataclass(frozen=True)
class CpuUse:
    """Seconds of CPU between two samples: in total and in user mode; over ``wall`` seconds."""

    total: float
    user: float
    wall: float


def cpu_sample(pid: int) -> CpuSample:
    thread_ns = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            thread_ns[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return CpuSample(thread_ns, int(fields[11]), int(fields[12]), time.perf_counter())


def cpu_used(before: CpuSample, after: CpuSample, idle: CpuUse | None = None) -> CpuUse:
    """The CPU spent between ``before`` and ``after``; less ``idle``'s rate (per second) times
    the wall time, when given. The total is the threads' schedstat run time (ns); if a thread
    ended in between, its time since ``before`` is lost there, and the ticks' total is used."""
    total = sum(ns - before.thread_ns.get(tid, 0) for tid, ns in after.thread_ns.items()) / 1e9
    ticks = after.user_ticks + after.system_ticks - before.user_ticks - before.system_ticks
    if any(tid not in after.thread_ns for tid in before.thread_ns):
        total = max(total, ticks / CLOCK_TICKS)
    user = (after.user_ticks - before.user_ticks) / CLOCK_TICKS
    wall = after.at - before.at
    if idle is not None:
        total -= idle.total * wall
        user -= idle.user * wall
    return CpuUse(total, user, wall)


def idle_rates(pids: list[int], seconds: float = 3.0) -> dict[int, CpuUse]:
    """Each process's CPU per second while nothing is asked of it (timers, GC, heartbeats)."""
    before = {pid: cpu_sample(pid) for pid in pids}
    time.sleep(seconds)
    rates = {}
    for pid in pids:
        use = cpu_used(before[pid], cpu_sample(pid))
        rates[pid] = CpuUse(use.total / use.wall, use.user / use.wall, 1.0)
    return rates


def memory_kb(pid: int, field: str) -> int:
    """VmRSS (resident now) or VmHWM (resident at peak) of process ``pid``, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


# --- the targets -----------------------------------------------------------------------------


@dataclass
class Target:
    """A broker as the clients see it: its address, its process and its topics' settings."""

    label: str
    bootstrap: str
    pid: int
    topic_configs: dict[str, str] = field(default_factory=dict)
    metrics_url: str | None = None
    idle: CpuUse | None = None

    @property
    def slug(self) -> str:
        return self.label.replace(" ", "-")

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        new = NewTopic(topic, partitions, replication_factor=1, config=self.topic_configs)
        admin.create_topics([new], request_timeout=120)[topic].result(timeout=180)
        # Kafka learns of a topic from its controller a moment after CreateTopics returns.
        wait_for_partitions(self.bootstrap, {topic: partitions}, timeout=60)


def topic_partitions(bootstrap: str, timeout: float = 30) -> dict[str, int] | None:
    """Every topic of the broker's Metadata answer and its count of partitions, or None when
    a partition has no leader yet (or a topic an error)."""
    client = AdminClient({"bootstrap.servers": bootstrap})
    metadata = client.list_topics(timeout=timeout)
    counts = {}
    for name, topic in metadata.topics.items():
        if topic.error is not None or any(p.leader < 0 for p in topic.partitions.values()):
            return None
        counts[name] = len(topic.partitions)
    return counts


def every_topic_led(bootstrap: str) -> dict[str, int]:
    """The broker's topics and their partitions, once every partition has a leader."""
    deadline = time.monotonic() + 60
    while (counts := topic_partitions(bootstrap)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{bootstrap}: a partition has no leader after 60 s")
        time.sleep(0.2)
    return counts


def wait_for_partitions(bootstrap: str, expected: dict[str, int], timeout: float) -> None:
    """Until a Metadata answer lists every partition of the ``expected`` topics (name ->
    partitions) with a leader: the finish line of start-up, the same for both brokers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            counts = topic_partitions(bootstrap, timeout=max(0.5, deadline - time.monotonic()))
        except KafkaException:  # no answer within the time
            counts = None
        if counts is not None and all(counts.get(t, 0) >= n for t, n in expected.items()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{bootstrap}: not every partition of {len(expected)} topics led in time")


@dataclass(frozen=True)
class FlushCounters:
    """odradek's log flushes so far (each fsyncs a partition's dirty segments), the seconds
    they spent fsyncing, and the Produce requests answered."""

    flushes: float
    fsync_seconds: float
    produce_requests: float

    def __sub__(self, other: FlushCounters) -> FlushCounters:
        return FlushCounters(
            self.flushes - other.flushes,
            self.fsync_seconds - other.fsync_seconds,
            self.produce_requests - other.produce_requests,
        )


def odradek_counters(metrics_url: str) -> FlushCounters:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    values = collections.Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("odradek_log_flush_seconds_"):
                values[sample.name] = sample.value
            elif sample.name == "odradek_requests_total" and sample.labels["api"] == "Produce":
                values["produce"] += sample.value
    return FlushCounters(
        values["odradek_log_flush_seconds_count"],
        values["odradek_log_flush_seconds_sum"],
        values["produce"],
    )


def measured(target: Target, records: int, run: Callable[[], dict]) -> dict:
    """``run()``'s figures, with the broker's CPU per record (us, total and user-mode) and for
    odradek its log flushes per Produce request and records per Produce request."""
    counters = odradek_counters(target.metrics_url) if target.metrics_url else None
    before = cpu_sample(target.pid)
    figures = run()
    use = cpu_used(before, cpu_sample(target.pid), target.idle)
    figures["cpu_us"] = use.total / records * 1e6
    figures["user_us"] = use.user / records * 1e6
    if counters is not None:
        counted = odradek_counters(target.metrics_url) - counters
        if counted.produce_requests:
            figures["syncs_per_produce"] = counted.flushes / counted.produce_requests
            figures["records_per_produce"] = records / counted.produce_requests
    return figures


# --- the clients -----------------------------------------------------------------------------


def perf_produce(target: Target, topic: str, records: int, size: int) -> dict:
    """One ProducerPerformance run at the Java client's defaults, as fast as it can go: its
    records/s and send-to-acknowledgement p50/p99 (ms)."""
    output = kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(records), "--record-size", str(size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={target.bootstrap}",
    )  # fmt: skip
    match = SUMMARY.search(output)
    if match is None:
        raise RuntimeError(f"no summary in ProducerPerformance's output:\n{output}")
    _sent, rate, _mb_rate, _avg, _max, p50, _p95, p99 = map(float, match.groups())
    return {"rate": rate, "p50": p50, "p99": p99}


def perf_consume(target: Target, topic: str, records: int) -> dict:
    """Kafka's ConsumerPerformance (a group member) reading ``records`` records: records/s
    while fetching, and the milliseconds it took to join the group."""
    output = kafka_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server", target.bootstrap, "--topic", topic,
        "--num-records", str(records), "--timeout", "60000",
    )  # fmt: skip
    lines = [line for line in output.strip().splitlines() if line.count(",") >= 5]
    summary = dict(zip(lines[-2].split(", "), lines[-1].split(", "), strict=True))
    if int(summary["data.consumed.in.nMsg"]) < records:
        raise RuntimeError(f"ConsumerPerformance read {summary['data.consumed.in.nMsg']} records")
    return {
        "rate": float(summary["fetch.nMsg.sec"]),
        "join_ms": float(summary["rebalance.time.ms"]),
    }


def rdkafka_produce(target: Target, topic: str, records: int, size: int, acks: str) -> dict:
    """librdkafka producing as fast as it can (large batches): records/s."""
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
        }
    )
    producer.produce(topic, b"warm-up", partition=0)  # the connection and the metadata
    producer.flush(60)
    value = b"v" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise RuntimeError("librdkafka: records still unacknowledged after 300 s")
    return {"rate": records / (time.perf_counter() - started)}


def receive_latencies(bootstrap: str, topic: str, total: int, connection) -> None:
    """In a process of its own: read ``topic`` one record at a time and send back, through
    ``connection``, "ready" once the first marker record arrives, then the sorted latencies
    (receipt - the send time each record carries, in seconds)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "latency", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    latencies: list[float] = []
    ready = False
    deadline = time.monotonic() + 600
    while len(latencies) < total and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        received = time.perf_counter()
        if message is None or message.error():
            continue
        value = message.value()
        if value == LATENCY_MARKER:
            if not ready:
                connection.send("ready")
                ready = True
            continue
        latencies.append(received - struct.unpack_from(">d", value)[0])
    consumer.close()
    connection.send(sorted(latencies))


def latency(target: Target, topic: str, rate: int, seconds: float) -> dict:
    """acks=all 100 B records at ``rate`` a second for ``seconds``; each record's time from
    send to receipt (ms): p50, p99, max; and the rate achieved."""
    total = int(rate * seconds)
    spawn = multiprocessing.get_context("spawn")
    here, there = spawn.Pipe()
    reader = spawn.Process(target=receive_latencies, args=(target.bootstrap, topic, total, there))
    reader.start()
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all"})
    try:
        deadline = time.monotonic() + 60
        while not here.poll(0.05):
            if time.monotonic() > deadline or not reader.is_alive():
                raise RuntimeError(f"{target.label}: the latency consumer never got a record")
            producer.produce(topic, LATENCY_MARKER, partition=0)
            producer.poll(0)
        here.recv()
        padding = bytes(92)
        started = time.perf_counter()
        for n in range(total):
            due = started + n / rate
            while (now := time.perf_counter()) < due:
                if due - now > 0.002:
                    producer.poll(min(due - now - 0.001, 0.01))
            while True:
                try:
                    producer.produce(
                        topic, struct.pack(">d", time.perf_counter()) + padding, partition=0
                    )
                    break
                except BufferError:
                    producer.poll(0.01)
            if n % 256 == 0:
                producer.poll(0)
        achieved = total / (time.perf_counter() - started)
        producer.flush(60)
        if not here.poll(120):
            raise RuntimeError(f"{target.label}: the latency consumer did not finish")
        latencies = here.recv()
    finally:
        reader.join(timeout=10)
        if reader.is_alive():
            reader.kill()
    if len(latencies) < total:
        raise RuntimeError(f"{target.label}: {len(latencies)} of {total} records received")
    return {
        "p50": latencies[len(latencies) // 2] * 1000,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "max": latencies[-1] * 1000,
        "rate": achieved,
    }


# --- start-up ----------------------------------------------------------------------------------


def start_kafka(state: Path, delay_ms: int, expected: dict[str, int]) -> tuple[dict, float]:
    """Kafka started in ``state`` (formatted first if new); its start answer and the seconds
    from the start command until every partition of ``expected`` is led."""
    began = time.perf_counter()
    started = json.loads(
        tool(
            "start",
            "--dir",
            str(state),
            "--property",
            f"group.initial.rebalance.delay.ms={delay_ms}",
        )
    )
    wait_for_partitions(started["bootstrap"], expected, timeout=300)
    return started, time.perf_counter() - began


def start_odradek(
    state: Path,
    delay_ms: int,
    expected: dict[str, int],
    settings: tuple[str, ...] = (),
    tree: Path | None = None,
) -> tuple[BrokerProcess, float]:
    """odradek (of checkout ``tree``, or this one) started in ``state`` with ``settings``
    (KEY=VALUE); it and the seconds from the start command until every partition of
    ``expected`` is led."""
    began = time.perf_counter()
    sets = [arg for setting in settings for arg in ("--set", setting)]
    broker = BrokerProcess(
        state, "--set", f"group.initial.rebalance.delay.ms={delay_ms}", *sets, tree=tree
    )
    wait_for_partitions(broker.bootstrap, expected, timeout=300)
    return broker, time.perf_counter() - began


# --- the report ----------------------------------------------------------------------------


def rotated(targets: list[Target], round_number: int) -> list[Target]:
    """The targets in round ``round_number``'s order: it starts with target r mod n."""
    start = round_number % len(targets)
    return targets[start:] + targets[:start]


def number(value: float) -> str:
    """Three significant digits or so: 1.23M, 45.6k, 1,234, 12.3, 0.12."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.2f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f}k"
    if abs(value) >= 999.95:  # what would print as 1000.0
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 9.995 else f"{value:.2f}"


def spread(values: list[float]) -> str:
    """median [min .. max]"""
    if not values:
        return "-"
    median = statistics.median(values)
    if len(values) == 1:
        return number(median)
    return f"{number(median)} [{number(min(values))}..{number(max(values))}]"


METRICS = (
    ("rate", "records/s"),
    ("p50", "p50 ms"),
    ("p99", "p99 ms"),
    ("max", "max ms"),
    ("cpu_us", "broker CPU us/record"),
    ("user_us", "  of it user-mode"),
    ("join_ms", "joining the group, ms"),
    ("syncs_per_produce", "fsyncs per Produce request"),
    ("records_per_produce", "records per Produce request"),
)


class Figures:
    """Each case's figures by target and round, printed side by side with per-round ratios."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, dict[int, dict]]] = {}

    def add(self, case: str, target: Target, round_number: int, figures: dict) -> None:
        self.runs.setdefault(case, {}).setdefault(target.label, {})[round_number] = figures

    def print(self, labels: list[str]) -> None:
        pairs = [
            (ODRADEK, other)
            for other in (KAFKA, KAFKA_FSYNC, BASELINE)
            if {ODRADEK, other} <= {*labels}
        ]
        print("median [min..max] over rounds; ratios taken per round, pair by pair")
        for case, by_target in self.runs.items():
            rows = [["", *labels, *(f"{a}/{b}" for a, b in pairs)]]
            for key, name in METRICS:
                cells = []
                seen = False
                for label in labels:
                    values = [f[key] for f in by_target.get(label, {}).values() if key in f]
                    seen |= bool(values)
                    cells.append(spread(values))
                if not seen:
                    continue
                for a, b in pairs:
                    ours, theirs = by_target.get(a, {}), by_target.get(b, {})
                    ratios = [
                        ours[r][key] / theirs[r][key]
                        for r in ours
                        if r in theirs and key in ours[r] and theirs[r].get(key)
                    ]
                    cells.append(spread(ratios))
                rows.append([name, *cells])
            widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
            print(f"\n{case}")
            for row in rows:
                cells = [f"{row[0]:<{widths[0]}}"]
                cells += [
                    f"{cell:>{width}}" for cell, width in zip(row[1:], widths[1:], strict=True)
                ]
                print("  " + "   ".join(cells))


# --- profiles ------------------------------------------------------------------------------

# Leaf frames of a thread waiting for work. uvloop's loop is C: a main thread whose leaf is
# Runner.run is in the loop itself, mostly waiting in epoll (its CPU share is in /proc's figure).
# A flush thread whose leaf is LogFlusher._run waits in its queue's get (C): the rest of the
# loop around it is a few lines.
IDLE_LEAVES = (
    "Condition.wait",
    "_worker (concurrent",
    "Selector.select",
    "sleep (asyncio",
    "LogFlusher._run (",
)


def thread_times(pid: int) -> dict[int, tuple[float, float, float]]:
    """Each live thread's seconds on a CPU (schedstat), of them in the kernel (stat's stime),
    and waiting on the run queue for a CPU (schedstat)."""
    times = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, waiting = (task / "schedstat").read_text().split()[:2]
            system = (task / "stat").read_text().rsplit(")", 1)[1].split()[12]
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
        times[int(task.name)] = (int(on_cpu) / 1e9, int(system) / CLOCK_TICKS, int(waiting) / 1e9)
    return times


def thread_group(name: str) -> str:
    """A thread's pool: ``odradek-append_1`` -> ``odradek-append``."""
    return re.sub(r"[_-]\d+$", "", name)


def frame_name(frame: str) -> str:
    """``append (odradek/storage/unified_log.py:412)`` -> ``append (.../unified_log.py)``."""
    return re.sub(r":\d+\)$", ")", frame)


def profiled(pid: int, out: Path, idle: bool, run: Callable[[], dict]) -> dict:
    """``run()`` while py-spy samples process ``pid``'s threads into ``out`` (with ``idle``
    every sample: where the time goes; without, only threads on a CPU: where the CPU goes);
    each thread's CPU seconds and run-queue wait from /proc; the result of ``run``."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    sampler = None
    if Path(spy).exists():
        sampler = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--threads", "--nonblocking", "--rate", "200",
             "--format", "raw", "--output", str(out), *(["--idle"] if idle else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(1)  # it attaches
    before, started = thread_times(pid), time.perf_counter()
    result = run()
    wall = time.perf_counter() - started
    after = thread_times(pid)
    if sampler is not None:
        sampler.send_signal(signal.SIGINT)
        sampler.wait(timeout=60)
    names = {}
    if out.exists():
        for line in out.read_text().splitlines():
            if match := re.match(r"thread \((\d+)\): ([^;]+?)(?:;| \d+$)", line):
                names[int(match.group(1))] = match.group(2)
    split: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for tid, now in after.items():
        then = before.get(tid, (0.0, 0.0, 0.0))
        group = thread_group(names.get(tid, "main" if tid == pid else "unnamed"))
        for index in range(3):
            split[group][index] += now[index] - then[index]
    result["wall"] = wall
    result["threads"] = {g: v for g, v in split.items() if max(v) >= 0.005}
    return result


def stack_summary(raw: Path, top: int = 8) -> list[str]:
    """The sampled stacks by thread pool: the share of samples busy and idle, the leaf frames
    (where a thread is) and odradek's own functions (inclusive) most often seen."""
    samples: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    inclusive: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        thread, *frames = stack.split(";")
        group = thread_group(thread.split(": ", 1)[-1])
        leaf = frame_name(frames[-1]) if frames else "(no Python frame: the loop waits)"
        samples[group][leaf] += int(count)
        for frame in {frame_name(f) for f in frames if "odradek/" in f}:
            inclusive[group][frame] += int(count)
    lines = []
    for group, leaves in sorted(samples.items(), key=lambda item: -item[1].total()):
        total = leaves.total()
        idle = sum(n for leaf, n in leaves.items() if any(i in leaf for i in IDLE_LEAVES))
        busy = total - idle
        if busy == 0:
            continue
        lines.append(f"  {group}: {total} samples, {busy / total:.0%} not waiting for work")
        for leaf, n in leaves.most_common(top):
            lines.append(f"    leaf {n / total:5.1%}  {leaf}")
        for frame, n in inclusive[group].most_common(top):
            lines.append(f"    incl {n / total:5.1%}  {frame}")
    return lines


# --- the cases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A produce case: ProducerPerformance at the Java defaults (``perf``, acks=all) or
    librdkafka with ``acks``, records of ``size`` bytes."""

    client: str
    size: int
    acks: str = "all"

    @property
    def title(self) -> str:
        if self.client == "perf":
            return f"ProducerPerformance {self.size} B (Java client defaults: idempotent, acks=all)"
        return f"librdkafka produce {self.size} B, acks={self.acks}"

    @property
    def slug(self) -> str:
        return f"{self.client}-{self.size}-{self.acks}"


ALL_CASES = [Case("perf", 100), Case("perf", 1024)] + [
    Case("rdkafka", size, acks) for size in (100, 1024) for acks in ("all", "1")
]


def parse_cases(text: str) -> list[Case]:
    """``perf:1024,rdkafka:100:all`` -> [Case("perf", 1024), Case("rdkafka", 100, "all")]."""
    cases = []
    for item in text.split(","):
        client, size, *acks = item.split(":")
        case = Case(client, int(size), *acks)
        if case not in ALL_CASES:
            raise argparse.ArgumentTypeError(f"{item}: not one of the produce cases")
        cases.append(case)
    return cases


def records_of(args: argparse.Namespace, size: int) -> int:
    """The records of a run of ``size``-byte records."""
    return args.records if size == 100 else args.kb_records


def produce_run(case: Case, target: Target, topic: str, records: int) -> Callable[[], dict]:
    if case.client == "perf":
        return lambda: perf_produce(target, topic, records, case.size)
    return lambda: rdkafka_produce(target, topic, records, case.size, case.acks)


def profile_cases(
    target: Target, cases: list[Case], args: argparse.Namespace, out_dir: Path
) -> None:
    """Each case twice more against ``target`` alone, sampled (every thread's time, then only
    its CPU); its threads' CPU and the stacks' top entries."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for case in cases:
        count = records_of(args, case.size)
        for idle, what in ((True, "time"), (False, "CPU")):
            topic = f"profile-{case.slug}-{what}"
            target.create_topic(topic)
            raw = out_dir / f"{case.slug}-{what}.txt"
            counters = odradek_counters(target.metrics_url)
            result = profiled(target.pid, raw, idle, produce_run(case, target, topic, count))
            print(
                f"\nprofile of the {what}, {case.title}, {count} records: "
                f"{result['rate']:.0f} records/s, p99 {result.get('p99', float('nan')):.0f} ms,"
                f" {result['wall']:.1f} s wall; broker threads' CPU-s, of it in the kernel, and"
                " run-queue wait s:"
            )
            threads = sorted(result["threads"].items(), key=lambda item: -item[1][0])
            for group, (on_cpu, system, waiting) in threads:
                print(f"  {group:<28} {on_cpu:6.2f}  {system:6.2f}  {waiting:6.2f}")
            counted = odradek_counters(target.metrics_url) - counters
            flushes, fsyncing = counted.flushes, counted.fsync_seconds
            print(
                f"  log flushes: {flushes:.0f} for {counted.produce_requests:.0f} Produce "
                f"requests, {fsyncing:.2f} s fsyncing ({fsyncing / result['wall']:.0%} of the "
                f"wall time), {fsyncing / max(flushes, 1) * 1000:.1f} ms each on average"
            )
            if raw.exists():
                print("\n".join(stack_summary(raw)))


# --- the run ---------------------------------------------------------------------------------


def attempt(figures: Figures, case: str, target: Target, round_number: int, run: Callable) -> None:
    """Add ``run()``'s figures, or say why it failed and go on: one failed run (a client's
    timeout on a loaded machine) costs its cell of the table, not the whole bench."""
    try:
        figures.add(case, target, round_number, run())
    except (RuntimeError, KafkaException, subprocess.TimeoutExpired) as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        print(f"  {case} on {target.label} failed: {(lines or ['?'])[0][:300]}")


def produce_round(
    round_number: int,
    order: list[Target],
    cases: list[Case],
    args: argparse.Namespace,
    figures: Figures,
) -> dict[tuple[int, str], str]:
    """Every produce case on every target in ``order``; the ProducerPerformance topics written,
    by record size and target."""
    written = {}
    for case in cases:
        records = records_of(args, case.size)

        def run(target: Target, topic: str, records: int = records, case: Case = case) -> dict:
            if case.client == "perf":  # the untimed warm-up, same size, a topic of its own
                warm_up = f"warm-up-{case.slug}-{target.slug}-{round_number}"
                target.create_topic(warm_up)
                perf_produce(target, warm_up, max(1000, records // 10), case.size)
            target.create_topic(topic)
            return measured(target, records, produce_run(case, target, topic, records))

        for target in order:
            topic = f"{case.slug}-{target.slug}-{round_number}"
            attempt(figures, case.title, target, round_number, partial(run, target, topic))
            if case.client == "perf" and round_number in figures.runs.get(case.title, {}).get(
                target.label, {}
            ):
                written[(case.size, target.label)] = topic
    return written


def consume_round(
    round_number: int,
    order: list[Target],
    written: dict,
    args: argparse.Namespace,
    figures: Figures,
) -> None:
    """ConsumerPerformance reading back each ProducerPerformance topic of the round (not Kafka
    with flush.messages=1's: it reads as Kafka at its defaults does)."""
    for size in (100, 1024):
        records = records_of(args, size)
        for target in order:
            topic = written.get((size, target.label))
            if topic is not None and target.label != KAFKA_FSYNC:
                run = partial(
                    measured, target, records, partial(perf_consume, target, topic, records)
                )
                attempt(
                    figures,
                    f"ConsumerPerformance {size} B (a group member)",
                    target,
                    round_number,
                    run,
                )


def latency_round(
    round_number: int, order: list[Target], args: argparse.Namespace, figures: Figures
) -> None:
    """End-to-end latency at 1,000 records/s and at half the slowest target's
    ProducerPerformance 100 B rate of this round, the same rate on every target."""
    rates = [1000]
    perf_100 = figures.runs.get(ALL_CASES[0].title, {})
    round_rates = [runs[round_number]["rate"] for runs in perf_100.values() if round_number in runs]
    if round_rates:
        rates.append(int(min(round_rates) / 2))
    for rate in rates:
        label = "1,000/s" if rate == 1000 else "half the slowest ProducerPerformance rate"
        case = f"end-to-end latency, 100 B acks=all, librdkafka, {label} (per record at receipt)"
        for target in order:
            topic = f"latency-{rate}-{target.slug}-{round_number}"

            def run(target: Target = target, topic: str = topic, rate: int = rate) -> dict:
                target.create_topic(topic)
                return latency(target, topic, rate, args.seconds)

            attempt(figures, case, target, round_number, run)


def run_round(
    round_number: int,
    targets: list[Target],
    cases: list[Case],
    args: argparse.Namespace,
    figures: Figures,
    everything: bool,
) -> None:
    """Every case on every target, in the round's rotated order."""
    order = rotated(targets, round_number)
    print(f"round {round_number + 1}: " + ", ".join(t.label for t in order))
    measure_idle(targets)
    written = produce_round(round_number, order, cases, args, figures)
    if everything:
        consume_round(round_number, order, written, args, figures)
        latency_round(round_number, order, args, figures)


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small counts, 1 round")
    parser.add_argument("--records", type=int, default=1_000_000, help="100 B records a run")
    parser.add_argument("--kb-records", type=int, default=300_000, help="1 KB records a run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1000, help="of the restart topic")
    parser.add_argument("--seconds", type=float, default=10.0, help="of each latency run")
    parser.add_argument(
        "--rebalance-delay-ms", type=int, default=0,
        help="group.initial.rebalance.delay.ms, the same on both brokers",
    )  # fmt: skip
    parser.add_argument(
        "--targets", default="kafka,kafka-fsync,odradek",
        help="which of kafka,kafka-fsync,odradek to measure",
    )  # fmt: skip
    parser.add_argument("--dir", type=Path, default=None, help="state directory (default: tmp)")
    parser.add_argument(
        "--cases", type=parse_cases, default=None,
        help="only these produce cases, e.g. perf:1024,rdkafka:100:all (default: everything)",
    )  # fmt: skip
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="a broker setting for this checkout's odradek (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline", type=Path, default=None, metavar="TREE",
        help="with --cases: also run the produce cases, interleaved, against the odradek of "
        "checkout TREE (its own .venv), as 'odradek base', with the ratio to it",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None,
        help="with --cases: profile odradek in one more run of each case, stacks into this dir",
    )  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.records, args.kb_records, args.rounds = 20_000, 6_000, 1
        args.partitions, args.seconds = 50, 2.0
    args.labels = [label.replace("-", " ") for label in args.targets.split(",")]
    if not set(args.labels) <= {KAFKA, KAFKA_FSYNC, ODRADEK}:
        parser.error(f"--targets: {args.targets}: not a list of kafka, kafka-fsync, odradek")
    if args.baseline is not None:
        if args.cases is None:
            parser.error("--baseline: only with --cases (the produce cases)")
        args.labels.append(BASELINE)
    return args


@dataclass
class Brokers:
    """The brokers of the run, their state directories and their start-up figures."""

    state: Path
    delay_ms: int
    kafka: dict | None = None  # kafka-reference's start answer
    odradek: BrokerProcess | None = None
    settings: tuple[str, ...] = ()
    baseline_tree: Path | None = None
    baseline: BrokerProcess | None = None
    startup: dict[str, dict[str, float]] = field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    """By broker label: seconds "fresh" and "restarted", MB "resident restarted" and "peak"."""

    @property
    def kafka_state(self) -> Path:
        return self.state / "kafka"

    def start(self, labels: list[str]) -> list[Target]:
        """Start the brokers ``labels`` need, fresh; their targets, in the order of the table."""
        targets = []
        if {KAFKA, KAFKA_FSYNC} & set(labels):
            self.kafka_state.mkdir(parents=True, exist_ok=True)
            self.kafka, seconds = start_kafka(self.kafka_state, self.delay_ms, {})
            self.startup[KAFKA]["fresh"] = seconds
            for label, configs in ((KAFKA, {}), (KAFKA_FSYNC, {"flush.messages": "1"})):
                if label in labels:
                    bootstrap, pid = self.kafka["bootstrap"], self.kafka["pid"]
                    targets.append(Target(label, bootstrap, pid, configs))
        if ODRADEK in labels:
            self.odradek, seconds = start_odradek(
                self.state / "odradek", self.delay_ms, {}, self.settings
            )
            self.startup[ODRADEK]["fresh"] = seconds
            metrics_url = f"http://127.0.0.1:{self.odradek.metrics_port}/metrics"
            pid = self.odradek.process.pid
            targets.append(Target(ODRADEK, self.odradek.bootstrap, pid, {}, metrics_url))
        if BASELINE in labels:
            self.baseline, _ = start_odradek(
                self.state / "baseline", self.delay_ms, {}, tree=self.baseline_tree
            )
            metrics_url = f"http://127.0.0.1:{self.baseline.metrics_port}/metrics"
            pid = self.baseline.process.pid
            targets.append(Target(BASELINE, self.baseline.bootstrap, pid, {}, metrics_url))
        return targets

    def stop(self) -> None:
        if self.kafka is not None:
            tool("stop", "--dir", str(self.kafka_state))
        if self.odradek is not None:
            self.odradek.stop()
        if self.baseline is not None:
            self.baseline.stop()

    def restart(self, expected: dict[int, dict[str, int]]) -> None:
        """Restart each broker (stopped) until it leads every partition ``expected[its pid]``
        lists; the seconds and its memory then, into the start-up figures."""
        if self.kafka is not None:
            old_pid = self.kafka["pid"]
            try:
                started, seconds = start_kafka(self.kafka_state, self.delay_ms, expected[old_pid])
                rss = memory_kb(started["pid"], "VmRSS") / 1024
            finally:
                tool("stop", "--dir", str(self.kafka_state))
            self.startup[KAFKA] |= {"restarted": seconds, "resident restarted": rss}
        if self.odradek is not None:
            old_pid = self.odradek.process.pid
            broker, seconds = start_odradek(
                self.state / "odradek", self.delay_ms, expected[old_pid]
            )
            try:
                rss = memory_kb(broker.process.pid, "VmRSS") / 1024
            finally:
                broker.stop()
            self.startup[ODRADEK] |= {"restarted": seconds, "resident restarted": rss}


def measure_idle(targets: list[Target]) -> None:
    """Measure each broker's idle CPU now (taken off the CPU figures until measured again) and
    print it with its resident memory."""
    pids = sorted({target.pid for target in targets})
    idle = idle_rates(pids)
    for target in targets:
        target.idle = idle[target.pid]
    for pid in pids:
        names = "/".join(t.label for t in targets if t.pid == pid)
        print(
            f"  {names}: {memory_kb(pid, 'VmRSS') / 1024:.0f} MB resident; idle CPU "
            f"{idle[pid].total * 100:.2f}% of a core ({idle[pid].user * 100:.2f}% user)"
        )


def bench(args: argparse.Namespace, state: Path) -> None:
    everything = args.cases is None
    cases = ALL_CASES if everything else args.cases
    brokers = Brokers(state, args.rebalance_delay_ms, settings=tuple(args.settings))
    brokers.baseline_tree = args.baseline
    print(
        f"state in {state}; {args.rounds} rounds; {args.records:,} x 100 B and "
        f"{args.kb_records:,} x 1 KB records a run; group.initial.rebalance.delay.ms="
        f"{brokers.delay_ms} on both brokers; load average {load_average()}"
    )
    try:
        targets = brokers.start(args.labels)
        figures = Figures()
        for round_number in range(args.rounds):
            run_round(round_number, targets, cases, args, figures, everything)
        print(f"\nload average now {load_average()}")
        figures.print([t.label for t in targets])
        if args.profile is not None and brokers.odradek is not None:
            profile_cases(next(t for t in targets if t.label == ODRADEK), cases, args, args.profile)
        if not everything:
            return
        print()
        expected = {}  # each broker's topics and their partitions, by its pid
        for pid in sorted({target.pid for target in targets}):
            target = next(t for t in targets if t.pid == pid)
            label = KAFKA if target.label == KAFKA_FSYNC else target.label
            brokers.startup[label]["peak"] = memory_kb(pid, "VmHWM") / 1024
            target.create_topic("many-partitions", partitions=args.partitions)
            expected[pid] = every_topic_led(target.bootstrap)
    finally:
        brokers.stop()
    brokers.restart(expected)
    print_startup(brokers.startup, args.partitions)


def print_startup(figures: dict[str, dict[str, float]], partitions: int) -> None:
    """Start-up and memory of each broker side by side, and odradek/Kafka."""
    print(
        "start-up: from the start command until a Metadata answer lists every partition with a "
        f"leader (Kafka's fresh start includes formatting; restarted: with one more topic of "
        f"{partitions} partitions); resident memory at peak in the run and after the restart"
    )
    rows = (
        ("fresh", "start-up, fresh, s"),
        ("restarted", "start-up, restarted, s"),
        ("peak", "resident at peak, MB"),
        ("resident restarted", "resident restarted, MB"),
    )
    labels = list(figures)
    ratio = {KAFKA, ODRADEK} <= set(labels)
    header = f"  {'':<24}" + "".join(f"{label:>12}" for label in labels)
    print(header + ("   odradek/kafka" if ratio else ""))
    for key, name in rows:
        values = [figures[label].get(key) for label in labels]
        line = f"  {name:<24}" + "".join(
            f"{number(value) if value is not None else '-':>12}" for value in values
        )
        if ratio and figures[KAFKA].get(key) and figures[ODRADEK].get(key) is not None:
            line += f"   {figures[ODRADEK][key] / figures[KAFKA][key]:.2f}"
        print(line)


def main() -> None:
    args = parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress shows when the output is a file
    tool("resolve")
    state = args.dir or Path(tempfile.mkdtemp(prefix="vs-kafka-"))
    try:
        bench(args, state)
    finally:
        if args.dir is None:
            shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
