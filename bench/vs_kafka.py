"""odradek beside Apache Kafka, the same clients against both: prints figures, asserts nothing.

Three targets: the reference Kafka (tools/kafka-reference: one KRaft node on loopback, 384 MB
heap) with its default topic settings (no fsync per write), the same Kafka on topics with
flush.messages=1 (an fsync per write, as odradek does on acks=all), and odradek (`odradek
serve` in a child process). Clients, each against every target:
- librdkafka (confluent-kafka): produce 100 B and 1 KB records, acks=1 and acks=all
  (records/s, MB/s, the broker's CPU-seconds per 1M records); consume by assignment (records/s,
  broker CPU per 1M); end-to-end latency (send to receipt, p50/p99) at 1,000 records/s and at
  half the maximum acks=all rate measured in the round;
- Kafka's own ProducerPerformance (Java client, enable.idempotence=false: odradek has no
  InitProducerId yet): the same produce cases, records/s and send-to-acknowledgement p50/p99;
- Kafka's ConsumerPerformance, a member of a consumer group (classic protocol, the Java
  client's default): records/s, against every target (the time includes joining the group,
  so group.initial.rebalance.delay.ms, 3 s by default, on both brokers).
Then the broker's resident memory (after start, and its peak), and the time from start to
serving, fresh and restarted with --partitions partitions.

Each case runs once per round on every target in turn, rounds interleaved, so noise from a
neighbour spreads over all; medians and [min .. max] over the rounds are printed.

Targets (issue 22): with the same client, odradek's CPU per record <= Kafka's, throughput >=
Kafka's, p99 latency <= Kafka's, start to serving <= 1/5 of Kafka's, memory <= 1/4 of Kafka's.

``--cases perf:1024:1,rdkafka:1024:all`` runs only those produce cases (client ``rdkafka`` or
``perf``, record size, acks) and nothing else: no consume, latency, memory or start-up figures.
``--profile DIR`` then runs each selected case once more against odradek alone, not counted in
the figures, twice (py-spy, if installed, sampling the broker's threads into ``DIR``: every
sample, then only runnable threads); it prints each thread's CPU time, its kernel share and its
run-queue wait from /proc, the log flushes and their fsync time from the broker's histogram,
and the sampled stacks' top entries.

Usage: python bench/vs_kafka.py [--records N] [--rounds N] [--partitions N] [--dir DIR]
       [--cases LIST] [--profile DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from broker import BrokerProcess
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

TOOL = Path(__file__).resolve().parents[1] / "tools" / "kafka-reference" / "kafka-reference"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# ProducerPerformance's summary line.
SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)
NOT_IDEMPOTENT = "enable.idempotence=false"


def tool(*args: str) -> str:
    return subprocess.run([str(TOOL), *args], check=True, capture_output=True, text=True).stdout


def kafka_tool(main_class: str, *args: str, timeout: float = 600) -> str:
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


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_kb(pid: int, field: str) -> int:
    """VmRSS (resident now) or VmHWM (resident at peak) of process ``pid``, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


@dataclass
class Target:
    """A broker as the clients see it: its address, its process and its topics' settings."""

    label: str
    bootstrap: str
    pid: int
    topic_configs: dict[str, str] = field(default_factory=dict)
    metrics_url: str | None = None
    _admin: AdminClient | None = None

    @property
    def slug(self) -> str:
        return self.label.replace(" ", "-")

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        new = NewTopic(topic, partitions, replication_factor=1, config=self.topic_configs)
        self._admin.create_topics([new], request_timeout=120)[topic].result(timeout=180)
        wait_for_leader(self.bootstrap, topic)


def wait_for_leader(bootstrap: str, topic: str) -> None:
    """Until the topic's partition 0 has a leader (Kafka learns of a topic from its controller
    a moment after CreateTopics returns)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metadata = producer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata and metadata.error is None and metadata.partitions:
            if all(p.leader >= 0 for p in metadata.partitions.values()):
                return
        time.sleep(0.2)
    raise RuntimeError(f"{topic} has no leader after 60 s")


# --- librdkafka ----------------------------------------------------------------------------


def rdkafka_produce(target: Target, topic: str, records: int, size: int, acks: str) -> dict:
    """librdkafka producing as fast as it can: records/s, MB/s, broker CPU-s per 1M."""
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
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(60)
    value = b"v" * size
    before, started = cpu_seconds(target.pid), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0
    elapsed = time.perf_counter() - started
    used = cpu_seconds(target.pid) - before
    return {
        "rate": records / elapsed,
        "mb_rate": records * size / elapsed / 1e6,
        "cpu_per_million": used / records * 1e6,
    }


def rdkafka_consume(target: Target, topic: str, records: int) -> dict:
    """librdkafka reading ``records`` records by assignment: records/s, broker CPU-s per 1M."""
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    before, started = cpu_seconds(target.pid), time.perf_counter()
    deadline = started + 300
    while seen < records and time.perf_counter() < deadline:
        for message in consumer.consume(min(10_000, records - seen), 1.0):
            if not message.error():
                seen += 1
    elapsed = time.perf_counter() - started
    used = cpu_seconds(target.pid) - before
    consumer.close()
    return {"rate": seen / elapsed, "cpu_per_million": used / max(seen, 1) * 1e6}


def rdkafka_latency(target: Target, topic: str, rate: int, seconds: float) -> dict:
    """acks=all 100 B records at ``rate`` a second; each record's time from send to receipt by
    a consumer assigned at the end of the partition: p50, p99 in ms, and the rate achieved."""
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
        }
    )
    consumer.assign([TopicPartition(topic, 0, -1)])  # the end
    consumer.consume(1, 1.0)  # the fetch starts
    producer = Producer({"bootstrap.servers": target.bootstrap, "acks": "all", "linger.ms": 5})
    total = int(rate * seconds)
    latencies: list[float] = []
    done = threading.Event()

    def receive() -> None:
        while len(latencies) < total and not done.is_set():
            for message in consumer.consume(1_000, 0.2):
                if not message.error() and len(message.value()) == 100:
                    sent = struct.unpack_from(">d", message.value())[0]
                    latencies.append(time.perf_counter() - sent)

    reader = threading.Thread(target=receive)
    reader.start()
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
    reader.join(timeout=30)
    done.set()
    reader.join()
    consumer.close()
    latencies.sort()
    if not latencies:
        return {"p50": float("nan"), "p99": float("nan"), "rate": achieved}
    return {
        "p50": latencies[len(latencies) // 2] * 1000,
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "rate": achieved,
    }


# --- Kafka's perf tools ----------------------------------------------------------------------


def perf_produce(target: Target, topic: str, records: int, size: int, acks: str) -> dict:
    """One ProducerPerformance run as fast as it can go; its summary figures."""
    before = cpu_seconds(target.pid)
    output = kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(records), "--record-size", str(size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={target.bootstrap}",
        f"acks={acks}", "linger.ms=5", NOT_IDEMPOTENT,
    )  # fmt: skip
    used = cpu_seconds(target.pid) - before  # the JVM's start is in the client, not here
    match = SUMMARY.search(output)
    if match is None:
        raise RuntimeError(f"no summary in ProducerPerformance's output:\n{output}")
    sent, rate, mb_rate, avg, _max, p50, _p95, p99 = map(float, match.groups())
    return {
        "rate": rate,
        "mb_rate": mb_rate,
        "p50": p50,
        "p99": p99,
        "cpu_per_million": used / records * 1e6,
    }


def perf_consume(target: Target, topic: str, records: int) -> dict:
    """Kafka's ConsumerPerformance (a group member): records/s, or the error it met."""
    try:
        output = kafka_tool(
            "org.apache.kafka.tools.ConsumerPerformance",
            "--bootstrap-server", target.bootstrap, "--topic", topic,
            "--num-records", str(records), "--timeout", "20000",
            timeout=120,
        )  # fmt: skip
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        lines = [line for line in str(error).splitlines() if "Exception" in line or "ERROR" in line]
        return {"error": (lines or [str(error)[:200]])[0][:200]}
    fields = output.strip().splitlines()[-1].split(", ")
    if float(fields[-1]) == 0:
        return {"error": "consumed nothing in 20 s"}
    return {"rate": float(fields[-1]), "mb_rate": float(fields[-2])}


# --- profiles ------------------------------------------------------------------------------

# Leaf frames of a thread waiting for work. uvloop's loop is C: a main thread whose leaf is
# Runner.run is in the loop itself, mostly waiting in epoll (its CPU share is in /proc's figure).
IDLE_LEAVES = ("Condition.wait", "_worker (concurrent", "Selector.select", "sleep (asyncio")


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


def flush_totals(metrics_url: str) -> tuple[float, float]:
    """odradek's log flushes so far: how many, and the seconds they spent fsyncing."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    totals = {}
    for family in text_string_to_metric_families(text):
        if family.name == "odradek_log_flush_seconds":
            for sample in family.samples:
                totals[sample.name.rsplit("_", 1)[1]] = sample.value
    return totals.get("count", 0.0), totals.get("sum", 0.0)


def thread_group(name: str) -> str:
    """A thread's pool: ``odradek-append_1`` -> ``odradek-append``."""
    return re.sub(r"[_-]\d+$", "", name)


def frame_name(frame: str) -> str:
    """``append (odradek/storage/unified_log.py:412)`` -> ``append (.../unified_log.py)``."""
    return re.sub(r":\d+\)$", ")", frame)


def profiled(pid: int, out: Path, idle: bool, run, *args) -> dict:
    """``run(*args)`` while py-spy samples process ``pid``'s threads into ``out`` (with ``idle``
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
    result = run(*args)
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


# --- start to serving ------------------------------------------------------------------------


def odradek_start(data_dir: Path) -> tuple[BrokerProcess, float]:
    started = time.perf_counter()
    broker = BrokerProcess(data_dir)
    return broker, time.perf_counter() - started


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):10.1f}  [{min(values):.1f} .. {max(values):.1f}]"


ALL_CASES = [(client, size, acks) for client in ("rdkafka", "perf") for size in (100, 1024)
             for acks in ("1", "all")]  # fmt: skip


def parse_cases(text: str) -> list[tuple[str, int, str]]:
    """``perf:1024:1,rdkafka:1024:all`` -> [("perf", 1024, "1"), ("rdkafka", 1024, "all")]."""
    cases = []
    for item in text.split(","):
        client, size, acks = item.split(":")
        case = (client, int(size), acks)
        if case not in ALL_CASES:
            raise argparse.ArgumentTypeError(f"{item}: not one of the produce cases")
        cases.append(case)
    return cases


def profile_cases(target: Target, cases: list[tuple], records: int, out_dir: Path) -> None:
    """Each case twice more against ``target`` alone, sampled (every thread's time, then only
    its CPU); its threads' CPU and the stacks' top entries."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for client, size, acks in cases:
        count = records if size == 100 else records // 4
        produce = perf_produce if client == "perf" else rdkafka_produce
        for idle, what in ((True, "time"), (False, "CPU")):
            topic = f"profile-{client}-{size}-{acks}-{what}"
            target.create_topic(topic)
            raw = out_dir / f"{client}-{size}-acks-{acks}-{what}.txt"
            flushes_before = flush_totals(target.metrics_url) if target.metrics_url else None
            result = profiled(target.pid, raw, idle, produce, target, topic, count, size, acks)
            print(
                f"\nprofile of the {what}, {client} {size} B acks={acks}, {count} records: "
                f"{result['rate']:.0f} records/s, p99 {result.get('p99', float('nan')):.0f} ms,"
                f" {result['wall']:.1f} s wall; broker threads' CPU-s, of it in the kernel, and"
                " run-queue wait s:"
            )
            threads = sorted(result["threads"].items(), key=lambda item: -item[1][0])
            for group, (on_cpu, system, waiting) in threads:
                print(f"  {group:<28} {on_cpu:6.2f}  {system:6.2f}  {waiting:6.2f}")
            if flushes_before is not None:
                flushes, fsyncing = (
                    now - then
                    for now, then in zip(
                        flush_totals(target.metrics_url), flushes_before, strict=True
                    )
                )
                print(
                    f"  log flushes: {flushes:.0f}, {fsyncing:.2f} s fsyncing "
                    f"({fsyncing / result['wall']:.0%} of the wall time), "
                    f"{fsyncing / max(flushes, 1) * 1000:.1f} ms each on average"
                )
            if raw.exists():
                print("\n".join(stack_summary(raw)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="records of 100 B a run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0, help="of each latency run")
    parser.add_argument("--dir", type=Path, default=None, help="state directory (default: tmp)")
    parser.add_argument(
        "--cases", type=parse_cases, default=None,
        help="only these produce cases, e.g. perf:1024:1,rdkafka:1024:all (default: everything)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None,
        help="with --cases: profile odradek in one more run of each case, stacks into this dir",
    )  # fmt: skip
    args = parser.parse_args()
    everything = args.cases is None
    selected = set(ALL_CASES) if everything else set(args.cases)
    sys.stdout.reconfigure(line_buffering=True)  # progress shows when the output is a file
    tool("resolve")
    state = args.dir or Path(tempfile.mkdtemp(prefix="vs-kafka-"))
    print(f"state in {state}; {args.rounds} rounds, medians [min .. max]")

    kafka_state = state / "kafka"
    kafka_state.mkdir(parents=True, exist_ok=True)
    started = json.loads(tool("start", "--dir", str(kafka_state)))
    odradek, odradek_seconds = odradek_start(state / "odradek")
    kafka_pid = started["pid"]
    targets = [
        Target("kafka", started["bootstrap"], kafka_pid),
        Target("kafka fsync", started["bootstrap"], kafka_pid, {"flush.messages": "1"}),
        Target(
            "odradek",
            odradek.bootstrap,
            odradek.process.pid,
            metrics_url=f"http://127.0.0.1:{odradek.metrics_port}/metrics",
        ),
    ]
    time.sleep(2)
    print(
        f"start to serving, fresh: Kafka {started['start_seconds']:.1f} s (format + start), "
        f"odradek {odradek_seconds:.1f} s"
    )
    print(
        f"resident memory after start: Kafka {memory_kb(kafka_pid, 'VmRSS') / 1024:.0f} MB, "
        f"odradek {memory_kb(odradek.process.pid, 'VmRSS') / 1024:.0f} MB"
    )

    cases = [(size, acks) for size in (100, 1024) for acks in ("1", "all")]
    figures: dict[tuple, list[dict]] = {}
    perf_consumed: dict[str, dict] = {}

    def record(key: tuple, result: dict) -> None:
        figures.setdefault(key, []).append(result)

    try:
        for round_number in range(args.rounds):
            print(f"round {round_number + 1}")
            max_rate: dict[str, float] = {}
            for size, acks in cases:
                records = args.records if size == 100 else args.records // 4
                for target in targets:
                    if ("rdkafka", size, acks) in selected:
                        topic = f"rd-{size}-{acks}-{target.slug}-{round_number}"
                        target.create_topic(topic)
                        result = rdkafka_produce(target, topic, records, size, acks)
                        record(("librdkafka produce", size, acks, target.label), result)
                        if (size, acks) == (100, "all"):
                            max_rate[target.label] = result["rate"]
                    if everything and (size, acks) == (100, "1"):
                        consumed = rdkafka_consume(target, topic, records)
                        record(("librdkafka consume", 100, "-", target.label), consumed)
                        if round_number == 0 and target.label != "kafka fsync":
                            perf_consumed[target.label] = perf_consume(target, topic, records)
                    if ("perf", size, acks) in selected:
                        topic = f"pp-{size}-{acks}-{target.slug}-{round_number}"
                        target.create_topic(topic)
                        result = perf_produce(target, topic, records, size, acks)
                        record(("ProducerPerformance", size, acks, target.label), result)
            if not everything:
                continue
            for target in targets:
                for rate in (1000, int(max_rate[target.label] / 2)):
                    topic = f"lat-{rate}-{target.slug}-{round_number}"
                    target.create_topic(topic)
                    result = rdkafka_latency(target, topic, rate, args.seconds)
                    label = "1,000/s" if rate == 1000 else "half max"
                    record(("latency " + label, 100, "all", target.label), result)

        print()
        columns = ("records/s", "MB/s", "p50 ms", "p99 ms", "broker CPU-s/1M")
        keys = ("rate", "mb_rate", "p50", "p99", "cpu_per_million")
        print(
            f"{'client':<19} {'size':>5} {'acks':>4} {'broker':<12} "
            + " ".join(f"{c:>24}" for c in columns)
        )
        for (client, size, acks, label), runs in figures.items():
            cells = []
            for key in keys:
                values = [run[key] for run in runs if key in run]
                cells.append(f"{spread(values):>24}" if values else f"{'-':>24}")
            print(f"{client:<19} {size:>5} {acks:>4} {label:<12} " + " ".join(cells))
        if args.profile is not None:
            profile_cases(targets[2], sorted(selected), args.records, args.profile)
        if not everything:
            return
        print()
        for label, result in perf_consumed.items():
            print(f"ConsumerPerformance (a group member) against {label}: {result}")
        print(
            f"\npeak resident memory: Kafka {memory_kb(kafka_pid, 'VmHWM') / 1024:.0f} MB, "
            f"odradek {memory_kb(odradek.process.pid, 'VmHWM') / 1024:.0f} MB"
        )
        targets[0].create_topic("many-partitions", partitions=args.partitions)
        targets[2].create_topic("many-partitions", partitions=args.partitions)
    finally:
        tool("stop", "--dir", str(kafka_state))
        odradek.stop()
    if not everything:
        return
    restarted = json.loads(tool("start", "--dir", str(kafka_state)))
    try:
        kafka_rss = memory_kb(restarted["pid"], "VmRSS") / 1024
    finally:
        tool("stop", "--dir", str(kafka_state))
    odradek, odradek_seconds = odradek_start(state / "odradek")
    try:
        odradek_rss = memory_kb(odradek.process.pid, "VmRSS") / 1024
    finally:
        odradek.stop()
    print(
        f"start to serving, restart with {args.partitions} more partitions: Kafka "
        f"{restarted['start_seconds']:.1f} s ({kafka_rss:.0f} MB resident), odradek "
        f"{odradek_seconds:.1f} s ({odradek_rss:.0f} MB resident)"
    )


if __name__ == "__main__":
    main()
