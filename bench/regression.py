"""No regression: this checkout's broker beside a baseline checkout's, in one run.

Prints, as medians [min .. max] of interleaved rounds (the two checkouts take turns, first one
then the other, so a noisy neighbour's burst lands on both or on one round), the figures that
must not get worse:

- broker CPU-seconds per 1M records of 100 B produced in large batches (1 MB requests of
  ~8,000 records, acks=1, 8 in flight; client-built frames, as ``bench/broker.py`` (a));
- fetch MB/s of that topic from the page cache through sendfile, and through the broker's copy
  path (a second broker of the same checkout in which ``os.sendfile`` fails as unsupported, as
  on a file system without it), their ratio, and sendfile against a raw loopback blast;
- produce p99 of 1 KB records sent one at a time (acks=1) while the broker's log cleaner is
  idle and while it recleans a large log over and over (``bench/cleaner.py``'s broker, in its
  own process), and their ratio.

The same clients (this checkout's) measure both brokers, so only the brokers differ. Each
checkout needs its own ``.venv`` (``make install`` there). Asserts nothing.

Usage: ``python bench/regression.py --baseline TREE [--rounds 3] [--quick]``
(``git worktree add /tmp/main <commit> && make -C /tmp/main install`` makes a baseline;
without ``--baseline`` this checkout is measured alone; ``--quick`` is a tenth of the volume).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cleaner  # noqa: E402
from broker import (  # noqa: E402
    MB,
    BrokerProcess,
    PipelinedClient,
    create_topic,
    delete_topic,
    fetch_frames,
    idle_cpu_us_per_s,
    machine_cpu,
    produce_frames,
    raw_loopback_mb_s,
    records_batch,
)

from odradek.client.producer import Producer  # noqa: E402
from odradek.protocol.values.produce import Acks

THIS_TREE = Path(__file__).resolve().parent.parent


@dataclass
class Checkout:
    """One checkout's brokers: sendfile, copy path, and the cleaner bench's."""

    name: str
    tree: Path | None
    broker: BrokerProcess
    copier: BrokerProcess
    cleaning: cleaner.BrokerProcess
    producer: Producer
    idle_us_per_s: float
    figures: dict[str, list[float]] = field(default_factory=dict)

    def note(self, metric: str, value: float) -> None:
        self.figures.setdefault(metric, []).append(value)

    def stop(self) -> None:
        self.producer.close()
        self.cleaning.stop()
        for broker in (self.broker, self.copier):
            broker.stop()


def start(name: str, tree: Path | None, root: Path, cleaner_mb: int) -> Checkout:
    directory = root / name.replace(" ", "-")
    directory.mkdir()
    broker = BrokerProcess(directory / "sendfile", tree=tree)
    copier = BrokerProcess(directory / "copy", tree=tree, copy_fetches=True)
    cleaning = cleaner.BrokerProcess(directory, cleaner_mb, "unique", None, tree=tree)
    producer = Producer(bootstrap_servers=f"127.0.0.1:{cleaning.port}", acks=1, linger_ms=0)
    cleaner.produce_for(producer, 1.0)  # warm up: metadata, connection
    return Checkout(name, tree, broker, copier, cleaning, producer, idle_cpu_us_per_s(broker, 1.0))


def copied_bytes(broker: BrokerProcess) -> dict[str, float]:
    """The broker's fetch byte counters by path (sendfile, copied)."""
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = re.findall(r'odradek_fetch_bytes_total\{path="(\w+)"\} ([0-9.e+]+)', text)
    return {path: float(value) for path, value in found}


def large_batches(checkout: Checkout, topic: str, requests: int) -> None:
    """Produce 1 MB requests of 100 B records to both brokers (the sendfile one metered), then
    fetch them back from each."""
    batch, per_batch = records_batch(100)
    frames = produce_frames(topic, batch, requests, Acks.LEADER)
    broker = checkout.broker
    create_topic(broker.port, topic, **{"segment.bytes": str(256 * MB)})
    create_topic(checkout.copier.port, topic, **{"segment.bytes": str(256 * MB)})
    started, wall = broker.cpu_ns(), time.perf_counter()
    PipelinedClient(broker.port, 8).run(frames)
    used_s = (broker.cpu_ns() - started) / 1e9
    used_s -= checkout.idle_us_per_s / 1e6 * (time.perf_counter() - wall)
    checkout.note("produce CPU-s per 1M records", used_s / (per_batch * requests) * 1e6)
    PipelinedClient(checkout.copier.port, 8).run(frames)
    for path, target in (("sendfile", broker), ("copy", checkout.copier)):
        before = copied_bytes(target)
        client = PipelinedClient(target.port, 4)
        elapsed = client.run(fetch_frames(topic, per_batch, len(batch), requests, 4))
        after = copied_bytes(target)
        checkout.note(f"fetch MB/s, {path}", client.received_bytes / MB / elapsed)
        moved = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
        checkout.note(
            f"fetch share copied, {path} broker", moved.get("copied", 0.0) / sum(moved.values())
        )
    sendfile, copy = checkout.figures["fetch MB/s, sendfile"], checkout.figures["fetch MB/s, copy"]
    checkout.note("fetch sendfile / copy", sendfile[-1] / copy[-1])
    for target in (broker, checkout.copier):
        delete_topic(target.port, topic)


def with_and_without_cleaner(checkout: Checkout, seconds: float) -> None:
    """Produce p99 while the cleaner idles, then while it recleans (cleaner.py's phases)."""
    broker, producer = checkout.cleaning, checkout.producer
    idle = cleaner.produce_for(producer, seconds)
    broker.reclean(True)
    time.sleep(0.2)  # the first run is under way
    busy = cleaner.produce_for(producer, seconds)
    broker.reclean(False)
    idle_p99, busy_p99 = cleaner.p(idle, 99), cleaner.p(busy, 99)
    checkout.note("produce p99 ms, cleaner idle", idle_p99)
    checkout.note("produce p99 ms, cleaning", busy_p99)
    checkout.note("produce p99 cleaning / idle", busy_p99 / max(idle_p99, 1e-9))


def spread(values: list[float]) -> str:
    median = statistics.median(values)
    digits = 0 if median >= 100 else 3 if median < 1 else 2
    return (
        f"{statistics.median(values):.{digits}f} "
        f"[{min(values):.{digits}f} .. {max(values):.{digits}f}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout with its own .venv")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of every volume")
    options = parser.parse_args()
    scale = 0.1 if options.quick else 1.0
    requests = max(20, int(400 * scale))
    cleaner_mb = max(10, int(100 * scale))
    phase_s = 1.5 if options.quick else 3.0
    print(
        f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
        f"{requests} MB produced and fetched a round and checkout; cleaner log {cleaner_mb} MB, "
        f"{phase_s:.0f} s produce phases",
        flush=True,
    )
    busy_before, total_before = machine_cpu()
    with tempfile.TemporaryDirectory(prefix="odradek-regression-") as root:
        checkouts: list[Checkout] = []
        try:
            if options.baseline is not None:
                checkouts.append(
                    start("baseline", options.baseline.resolve(), Path(root), cleaner_mb)
                )
            checkouts.append(start("this tree", None, Path(root), cleaner_mb))
            raw: list[float] = []
            for round_number in range(options.rounds):
                raw.append(raw_loopback_mb_s(requests))
                order = checkouts if round_number % 2 == 0 else checkouts[::-1]
                for checkout in order:
                    large_batches(checkout, f"large-{round_number}", requests)
                for checkout in order:
                    with_and_without_cleaner(checkout, phase_s)
                for checkout in order:
                    sendfile = checkout.figures["fetch MB/s, sendfile"][-1]
                    checkout.note("fetch sendfile / raw loopback", sendfile / raw[-1])
                    print(
                        f"round {round_number + 1} {checkout.name}: "
                        + ", ".join(f"{k} {v[-1]:.3g}" for k, v in checkout.figures.items()),
                        flush=True,
                    )
        finally:
            for checkout in checkouts:
                checkout.stop()
    busy, total = machine_cpu()
    print(
        f"\nmedian [min .. max] of {options.rounds} interleaved rounds; raw loopback "
        f"{spread(raw)} MB/s; machine CPU busy {(busy - busy_before) / (total - total_before):.0%}"
        f"; load average at the end {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )
    header = f"  {'':<36}" + "".join(f" | {c.name:<24}" for c in checkouts)
    if len(checkouts) == 2:
        header += " | this tree / baseline"
    print(header)
    for metric in checkouts[0].figures:
        line = f"  {metric:<36}" + "".join(f" | {spread(c.figures[metric]):<24}" for c in checkouts)
        if len(checkouts) == 2:
            ours, theirs = (statistics.median(c.figures[metric]) for c in checkouts[::-1])
            line += f" | {ours / theirs:.2f}" if theirs else " | n/a"
        print(line)


if __name__ == "__main__":
    main()
