"""Transactions on odradek beside Apache Kafka, the same Java client against both: prints
figures, asserts nothing.

Kafka's Java client (tests/java/kafka-harness, its ``txn-bench`` command: one producer in one
JVM, a warm-up of a tenth of the run first, untimed) runs N transactions one after the other
into partition 0 of a fresh topic, each begin, R records of 100 B, commitTransaction (which
waits for the EndTxn answer; the markers follow), for R = 1, 10 and 100: transactions/s and
records/s. In the same rounds, the same producer settings without a transaction (the
idempotent producer, flushed every R records) give the append cost of non-transactional
produce, for R = 1 and 100.

Targets, as in bench/vs_kafka.py: the reference Kafka (tools/kafka-reference, acks=all
answered from the page cache), the same Kafka on topics with flush.messages=1 (an fsync per
write, as odradek's acks=all) and odradek (``odradek serve`` in a child process), both with
one ``__transaction_state`` partition. Each case runs once per target per round; rounds
rotate the order (round r starts with target r mod the number of targets). Per case and
target: the median and [min..max] over rounds of transactions/s, records/s and the broker's
CPU per record (idle CPU taken off, as vs_kafka measures it), and the per-round ratios
odradek/Kafka; for odradek also its log flushes (fsyncs of a partition) per transaction, or
per flushed group of records without one (from its metrics, over the whole JVM run, warm-up
included).

Usage: python bench/transactions.py [--quick] [--rounds N] [--targets LIST] [--dir DIR]
[--baseline TREE]
``--quick``: a tenth of the transactions, one round (a smoke run). ``--baseline TREE`` adds the
odradek of another checkout (with its own ``.venv``) as a target, "odradek base", in the same
rotated rounds, and the per-round ratios odradek/odradek base (a change measured against the
code before it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from broker import BrokerProcess
from vs_kafka import (
    BASELINE,
    KAFKA,
    KAFKA_FSYNC,
    ODRADEK,
    Target,
    cpu_sample,
    cpu_used,
    idle_rates,
    load_average,
    odradek_counters,
    rotated,
    spread,
    tool,
)

HARNESS_MAIN = "io.odradek.harness.KafkaHarness"
SIZE = 100
TRANSACTION_STATE = "transaction.state.log.num.partitions=1"


@dataclass(frozen=True)
class Case:
    """``transactions`` groups of ``records`` records, in transactions or (plain) not."""

    records: int
    transactions: int
    plain: bool = False

    @property
    def title(self) -> str:
        if self.plain:
            return f"no transaction, idempotent producer, flush every {self.records} x {SIZE} B"
        return f"transactions of {self.records} x {SIZE} B"


CASES = (
    Case(1, 400),
    Case(10, 300),
    Case(100, 100),
    Case(1, 400, plain=True),
    Case(100, 100, plain=True),
)


def java_run(classpath: str, target: Target, topic: str, case: Case, quick: bool) -> dict:
    """One txn-bench run: its transactions/s and records/s, and the broker's CPU per record
    (us, idle taken off)."""
    groups = max(5, case.transactions // 10) if quick else case.transactions
    props = {
        "bench.transactions": groups,
        "bench.records": case.records,
        "bench.size": SIZE,
        "bench.mode": "plain" if case.plain else "transactional",
        "transactional.id": f"bench-{topic}",
        "linger.ms": 0,
    }
    if case.plain:
        del props["transactional.id"]
    command = ["java", "-Xmx256m", "-cp", classpath, HARNESS_MAIN, "txn-bench",
               "--bootstrap", target.bootstrap, "--topic", topic]  # fmt: skip
    for name, value in props.items():
        command += ["--property", f"{name}={value}"]
    counters = odradek_counters(target.metrics_url) if target.metrics_url else None
    before = cpu_sample(target.pid)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    after = cpu_sample(target.pid)
    flushes = None
    if counters is not None:
        flushes = (odradek_counters(target.metrics_url) - counters).flushes
    if done.returncode:
        raise RuntimeError(f"txn-bench failed:\n{done.stderr[-2000:]}")
    answer = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    # The broker's CPU over the whole JVM run (connecting, the warm-up of max(1, N/10)
    # groups and the timed run) per record sent in it.
    use = cpu_used(before, after, target.idle)
    groups = answer["groups"] + max(1, answer["groups"] // 10)
    figures = {
        "txn_rate": answer["groups"] / answer["seconds"],
        "rate": answer["records"] / answer["seconds"],
        "cpu_us": use.total / (groups * case.records) * 1e6,
    }
    if flushes is not None:
        figures["fsyncs"] = flushes / groups
    return figures


METRICS = (("txn_rate", "transactions/s"), ("rate", "records/s"),
           ("cpu_us", "broker CPU us/record"), ("fsyncs", "fsyncs/group"))  # fmt: skip


def print_figures(runs: dict[str, dict[str, dict[int, dict]]], labels: list[str]) -> None:
    others = [label for label in (KAFKA, KAFKA_FSYNC, BASELINE) if label in labels]
    pairs = [(ODRADEK, other) for other in others if ODRADEK in labels]
    print("\nmedian [min..max] over rounds; ratios taken per round")
    for case, by_target in runs.items():
        rows = [["", *labels, *(f"{a}/{b}" for a, b in pairs)]]
        for key, name in METRICS:
            if key == "txn_rate" and case.startswith("no transaction"):
                continue
            cells = [spread([f[key] for f in by_target.get(label, {}).values() if key in f])
                     for label in labels]  # fmt: skip
            for a, b in pairs:
                ours, theirs = by_target.get(a, {}), by_target.get(b, {})
                both = [r for r in ours if key in ours[r] and key in theirs.get(r, {})]
                cells.append(spread([ours[r][key] / theirs[r][key] for r in both]))
            rows.append([name, *cells])
        widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
        print(f"\n{case}")
        for row in rows:
            cells = [f"{row[0]:<{widths[0]}}"]
            cells += [f"{cell:>{w}}" for cell, w in zip(row[1:], widths[1:], strict=True)]
            print("  " + "   ".join(cells))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--targets", default=f"{KAFKA},{KAFKA_FSYNC},{ODRADEK}")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None, metavar="TREE")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    args.labels = [label.strip() for label in args.targets.split(",")]
    if args.baseline is not None:
        args.labels.append(BASELINE)
    return args


def bench(args: argparse.Namespace, state: Path) -> None:
    classpath = tool("harness").strip()
    print(f"state in {state}; {args.rounds} rounds; load average {load_average()}")
    targets: list[Target] = []
    kafka_state, odradek, baseline = state / "kafka", None, None
    try:
        if {KAFKA, KAFKA_FSYNC} & set(args.labels):
            kafka_state.mkdir(parents=True)
            started = json.loads(tool("start", "--dir", str(kafka_state), "--property",
                                      TRANSACTION_STATE))  # fmt: skip
            for label, configs in ((KAFKA, {}), (KAFKA_FSYNC, {"flush.messages": "1"})):
                if label in args.labels:
                    targets.append(Target(label, started["bootstrap"], started["pid"], configs))
        if ODRADEK in args.labels:
            odradek = BrokerProcess(state / "odradek", "--set", TRANSACTION_STATE)
            metrics_url = f"http://127.0.0.1:{odradek.metrics_port}/metrics"
            targets.append(Target(ODRADEK, odradek.bootstrap, odradek.process.pid, {}, metrics_url))
        if BASELINE in args.labels:
            baseline = BrokerProcess(
                state / "baseline", "--set", TRANSACTION_STATE, tree=args.baseline
            )
            metrics_url = f"http://127.0.0.1:{baseline.metrics_port}/metrics"
            pid = baseline.process.pid
            targets.append(Target(BASELINE, baseline.bootstrap, pid, {}, metrics_url))
        idle = idle_rates(sorted({t.pid for t in targets}))
        for target in targets:
            target.idle = idle[target.pid]
        runs: dict[str, dict[str, dict[int, dict]]] = {}
        for round_number in range(args.rounds):
            print(f"round {round_number + 1} of {args.rounds}", flush=True)
            for case_number, case in enumerate(CASES):
                for target in rotated(targets, round_number):
                    topic = f"{target.slug}-r{round_number}-c{case_number}"
                    try:
                        target.create_topic(topic)
                        figures = java_run(classpath, target, topic, case, args.quick)
                    except Exception as error:  # printed, the bench goes on
                        print(f"  {case.title} on {target.label} failed: {error}", flush=True)
                        continue
                    runs.setdefault(case.title, {}).setdefault(target.label, {})[round_number] = (
                        figures
                    )
        print(f"load average now {load_average()}")
        print_figures(runs, [t.label for t in targets])
    finally:
        if {KAFKA, KAFKA_FSYNC} & set(args.labels) and kafka_state.exists():
            tool("stop", "--dir", str(kafka_state))
        for broker in (odradek, baseline):
            if broker is not None:
                broker.stop()


def main() -> None:
    args = parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        bench(args, args.dir)
        return
    with tempfile.TemporaryDirectory(prefix="odradek-bench-txn-") as state:
        began = time.monotonic()
        bench(args, Path(state))
        print(f"\n{time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
