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

Usage: python bench/vs_kafka.py [--records N] [--rounds N] [--partitions N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker import BrokerProcess
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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
    _admin: AdminClient | None = None

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


# --- start to serving ------------------------------------------------------------------------


def odradek_start(data_dir: Path) -> tuple[BrokerProcess, float]:
    started = time.perf_counter()
    broker = BrokerProcess(data_dir)
    return broker, time.perf_counter() - started


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):10.1f}  [{min(values):.1f} .. {max(values):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="records of 100 B a run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=3.0, help="of each latency run")
    parser.add_argument("--dir", type=Path, default=None, help="state directory (default: tmp)")
    args = parser.parse_args()
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
        Target("odradek", odradek.bootstrap, odradek.process.pid),
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
                    topic = f"rd-{size}-{acks}-{target.label.replace(' ', '-')}-{round_number}"
                    target.create_topic(topic)
                    result = rdkafka_produce(target, topic, records, size, acks)
                    record(("librdkafka produce", size, acks, target.label), result)
                    if (size, acks) == (100, "all"):
                        max_rate[target.label] = result["rate"]
                    if (size, acks) == (100, "1"):
                        consumed = rdkafka_consume(target, topic, records)
                        record(("librdkafka consume", 100, "-", target.label), consumed)
                        if round_number == 0 and target.label != "kafka fsync":
                            perf_consumed[target.label] = perf_consume(target, topic, records)
                    topic = f"pp-{size}-{acks}-{target.label.replace(' ', '-')}-{round_number}"
                    target.create_topic(topic)
                    result = perf_produce(target, topic, records, size, acks)
                    record(("ProducerPerformance", size, acks, target.label), result)
            for target in targets:
                for rate in (1000, int(max_rate[target.label] / 2)):
                    topic = f"lat-{rate}-{target.label.replace(' ', '-')}-{round_number}"
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
