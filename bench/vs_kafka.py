"""Apache Kafka's side of the odradek-vs-Kafka comparison: prints figures, asserts nothing.

The reference broker (tools/kafka-reference: one KRaft node on loopback, 384 MB heap) measured
with Kafka's own perf tools (org.apache.kafka.tools.ProducerPerformance, ConsumerPerformance,
EndToEndLatency), clients the comparison will use against both brokers once odradek speaks
Kafka's protocol:
- produce throughput (records/s, MB/s) and latency (p50, p99) for 100 B and 1 KB records
  with acks=1 and acks=all, on a topic with Kafka's defaults (no fsync per write) and on one
  with flush.messages=1 (an fsync per write, as odradek does on acks=all);
- consume throughput (ConsumerPerformance's fetch rate over the 100 B acks=1 records);
- latency at a fixed 1,000 records/s (ProducerPerformance, acks=all: send to acknowledgement)
  and end to end one record at a time (EndToEndLatency, acks=all: send to receipt);
- the broker's CPU-seconds per 1M records (from /proc, the broker process only);
- resident memory after start-up and its peak after the runs;
- time from start to serving: a fresh broker, and a restart with --partitions partitions.

Each configuration runs once per round, rounds interleaved, so noise from a neighbour spreads
over all configurations; medians and ranges over the rounds are printed.

Usage: python bench/vs_kafka.py [--records N] [--rounds N] [--partitions N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "kafka-reference" / "kafka-reference"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# ProducerPerformance's summary line.
SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)


def tool(*args: str) -> str:
    return subprocess.run([str(TOOL), *args], check=True, capture_output=True, text=True).stdout


def kafka_tool(main_class: str, *args: str) -> str:
    done = subprocess.run(
        [str(TOOL), "run", main_class, *args], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(f"{main_class} failed:\n{done.stdout}\n{done.stderr}")
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


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **configs: str) -> None:
    args = ["--bootstrap-server", bootstrap, "--create", "--topic", topic]
    args += ["--partitions", str(partitions), "--replication-factor", "1"]
    for name, value in configs.items():
        args += ["--config", f"{name.replace('_', '.')}={value}"]
    kafka_tool("org.apache.kafka.tools.TopicCommand", *args)


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str) -> dict[str, float]:
    """One ProducerPerformance run as fast as it can go; its summary figures."""
    output = kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(records), "--record-size", str(size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
        f"acks={acks}", "linger.ms=5",
    )  # fmt: skip
    match = SUMMARY.search(output)
    if match is None:
        raise RuntimeError(f"no summary in ProducerPerformance's output:\n{output}")
    sent, rate, mb_rate, avg, _max, p50, _p95, p99 = map(float, match.groups())
    return {"records": sent, "rate": rate, "mb_rate": mb_rate, "avg": avg, "p50": p50, "p99": p99}


def produce_at(bootstrap: str, topic: str, rate: int, seconds: int) -> dict[str, float]:
    """Acks=all 100 B records at ``rate`` a second for ``seconds``: the producer's latency
    (send to acknowledgement) at that load."""
    output = kafka_tool(
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(rate * seconds), "--record-size", "100",
        "--throughput", str(rate), "--producer-props", f"bootstrap.servers={bootstrap}",
        "acks=all",
    )  # fmt: skip
    match = SUMMARY.search(output)
    if match is None:
        raise RuntimeError(f"no summary in ProducerPerformance's output:\n{output}")
    return {"p50": float(match.group(6)), "p99": float(match.group(8))}


def end_to_end(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    """Kafka's EndToEndLatency: one acks=all 100 B record at a time, from send to receipt."""
    output = kafka_tool(
        "org.apache.kafka.tools.EndToEndLatency",
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
        "--producer-acks", "all", "--record-size", "100",
    )  # fmt: skip
    match = re.search(r"50th = (\d+), 99th = (\d+)", output)
    if match is None:
        raise RuntimeError(f"no percentiles in EndToEndLatency's output:\n{output}")
    return {"p50": float(match.group(1)), "p99": float(match.group(2))}


def consume(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    """Kafka's ConsumerPerformance over ``records`` records of ``topic``: the fetch rate (the
    group join before the first fetch left out)."""
    output = kafka_tool(
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
    )  # fmt: skip
    fields = output.strip().splitlines()[-1].split(", ")
    return {"rate": float(fields[-1]), "mb_rate": float(fields[-2])}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):10.1f}  [{min(values):.1f} .. {max(values):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records of 100 B a run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None, help="state directory (default: tmp)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress shows when the output is a file
    tool("resolve")
    state = args.dir or Path(tempfile.mkdtemp(prefix="vs-kafka-"))
    print(f"reference Kafka in {state}; {args.rounds} rounds, medians [min .. max]")

    started = json.loads(tool("start", "--dir", str(state)))
    pid, bootstrap = started["pid"], started["bootstrap"]
    print(f"start to serving (format + start, fresh): {started['start_seconds']:.1f} s")
    time.sleep(2)
    print(f"resident memory after start: {memory_kb(pid, 'VmRSS') / 1024:.0f} MB")

    cases = [
        (size, acks, flush)
        for size in (100, 1024)
        for acks in ("1", "all")
        for flush in ("default", "flush.messages=1")
    ]
    figures: dict[tuple, list[dict[str, float]]] = {case: [] for case in cases}
    consumed: list[dict[str, float]] = []
    at_1000: list[dict[str, float]] = []
    one_at_a_time: list[dict[str, float]] = []
    try:
        for round_number in range(args.rounds):
            create_topic(bootstrap, f"latency-{round_number}")
            at_1000.append(produce_at(bootstrap, f"latency-{round_number}", 1000, 5))
            one_at_a_time.append(end_to_end(bootstrap, f"latency-{round_number}", 1000))
            for size, acks, flush in cases:
                topic = f"perf-{size}-{acks}-{'fsync' if flush != 'default' else 'default'}"
                topic += f"-{round_number}"
                configs = {"flush.messages": "1"} if flush != "default" else {}
                create_topic(bootstrap, topic, **configs)
                records = args.records if size == 100 else args.records // 4
                before = cpu_seconds(pid)
                result = produce(bootstrap, topic, records, size, acks)
                result["cpu_per_million"] = (cpu_seconds(pid) - before) / records * 1e6
                figures[(size, acks, flush)].append(result)
                if (size, acks, flush) == (100, "1", "default"):
                    consumed.append(consume(bootstrap, topic, records))
        print()
        columns = ("records/s", "MB/s", "p50 ms", "p99 ms", "broker CPU-s/1M")
        print(f"{'record':>6} {'acks':>4} {'topic':<17} " + " ".join(f"{c:>26}" for c in columns))
        for (size, acks, flush), runs in figures.items():
            print(
                f"{size:>6} {acks:>4} {flush:<17} "
                + " ".join(
                    f"{spread([run[key] for run in runs]):>26}"
                    for key in ("rate", "mb_rate", "p50", "p99", "cpu_per_million")
                )
            )
        print()
        print(f"consume 100 B records/s: {spread([run['rate'] for run in consumed])}")
        print(f"consume 100 B MB/s:      {spread([run['mb_rate'] for run in consumed])}")
        for name, runs in (("at 1,000 records/s", at_1000), ("one at a time", one_at_a_time)):
            print(
                f"latency {name:<19} p50 ms {spread([run['p50'] for run in runs])}"
                f"  p99 ms {spread([run['p99'] for run in runs])}"
            )
        print(f"\npeak resident memory of the broker: {memory_kb(pid, 'VmHWM') / 1024:.0f} MB")

        create_topic(bootstrap, "many-partitions", partitions=args.partitions)
    finally:
        tool("stop", "--dir", str(state))
    restarted = json.loads(tool("start", "--dir", str(state)))
    try:
        print(
            f"start to serving, restart with {args.partitions} more partitions: "
            f"{restarted['start_seconds']:.1f} s; resident memory "
            f"{memory_kb(restarted['pid'], 'VmRSS') / 1024:.0f} MB"
        )
    finally:
        tool("stop", "--dir", str(state))


if __name__ == "__main__":
    main()
