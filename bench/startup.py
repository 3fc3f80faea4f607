"""Start-up cost of a broker with many partitions: clean and unclean LogManager start-up,
the cost of creating partitions, and one broker process with 10,000 partitions.

Builds ``--partitions`` partitions of ``--segments`` segments each (one partition is written
through a LogManager and its directory copied), then starts a LogManager on them in a fresh
process for each measurement:

- clean: after a graceful shutdown (the clean-shutdown marker is there, recovery is skipped);
- unclean: the markers removed, so every log recovers its active segment (the recovery
  points are at the log end offsets).

Each start-up runs ``--repeat`` times and the fastest is reported (the others only measure
noise from other processes). Prints seconds, the load summary and the resident memory the
start-up added.

``--creation 1000,2000,4000`` creates topics of those sizes one after the other in one
LogManager and prints each one's seconds and descriptors: with creation O(N) the seconds per
1,000 partitions stay flat however many exist (they grew with the existing count before).

``--broker-partitions 10000`` runs ``odradek serve`` as its own process, creates a topic of that
many partitions in one CreateTopics request, stops it with SIGTERM, starts it again and prints
the creation, stop and restart seconds, whether the restart was clean, the broker's descriptors
and resident memory, and that a record produced to the last partition is read back.
Asserts nothing.
Usage: ``.venv/bin/python bench/startup.py [--partitions 1000] [--segments 10] [--threads 1]
[--creation 1000,2000,4000] [--broker-partitions 10000] [--only startup,creation,broker]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.config.broker_config import BrokerConfig
from odradek.record.record_batch_builder import build_batch
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME, LogManager
from odradek.topic_partition import TopicPartition

TOPIC = "bench"
BATCH_VALUE_BYTES = 900
BATCHES_PER_SEGMENT = 16
SEGMENT_BYTES = BATCHES_PER_SEGMENT * 1024


def broker_config(data_dir: Path, threads: int) -> BrokerConfig:
    return BrokerConfig(log_dirs=(str(data_dir),), num_recovery_threads_per_data_dir=threads)


def build(data_dir: Path, partitions: int, segments: int) -> None:
    """One partition written through a LogManager, copied to the others, then one clean
    start and stop so every partition has its checkpoints and the markers are written."""
    manager = LogManager(broker_config(data_dir, 1))
    manager.startup()
    TopicAdmin(manager, manager.config).create_topic(
        TOPIC, 1, {"segment.bytes": str(SEGMENT_BYTES)}
    )
    log = manager.get_log(TopicPartition(TOPIC, 0))
    value = b"v" * BATCH_VALUE_BYTES
    while log.number_of_segments < segments or log.active_segment.size < SEGMENT_BYTES // 2:
        now = int(time.time() * 1000)
        log.append(build_batch([(now, b"key", value, ())]))
    log.update_high_watermark(log.log_end_offset)
    manager.shutdown()
    source = data_dir / f"{TOPIC}-0"
    for partition in range(1, partitions):
        shutil.copytree(source, data_dir / f"{TOPIC}-{partition}")
    manager = LogManager(broker_config(data_dir, 1))
    manager.startup()
    manager.shutdown()
    os.sync()  # the copies' write-back would otherwise compete with the measured start-ups


def measure(data_dir: Path, threads: int) -> dict[str, float]:
    """Start a LogManager on ``data_dir`` in this process; its time, summary and RSS growth."""
    rss_before = _rss_bytes()
    manager = LogManager(broker_config(data_dir, threads))
    started = time.perf_counter()
    manager.startup()
    seconds = time.perf_counter() - started
    rss_after = _rss_bytes()
    summary = manager.load_summary
    manager.shutdown()
    return {
        "seconds": seconds,
        "partitions": summary.partitions,
        "segments": summary.segments,
        "recovered_segments": summary.recovered_segments,
        "recovered_bytes": summary.recovered_bytes,
        "rss_delta_mib": (rss_after - rss_before) / 2**20,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_measurement(data_dir: Path, threads: int) -> dict[str, float]:
    """``measure`` in a fresh interpreter, so earlier runs do not hide memory growth."""
    output = subprocess.run(
        [sys.executable, __file__, "--measure", str(data_dir), "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output)


def fastest(data_dir: Path, threads: int, repeat: int, clean: bool) -> dict[str, float]:
    """The fastest of ``repeat`` start-ups; for unclean ones the markers go before each."""
    runs = []
    for _ in range(repeat):
        if not clean:
            (data_dir / CLEAN_SHUTDOWN_FILE_NAME).unlink()
        runs.append(run_measurement(data_dir, threads))
    return min(runs, key=lambda figures: figures["seconds"])


def report(label: str, figures: dict[str, float]) -> None:
    print(
        f"{label:8s} {figures['seconds']:7.2f} s  {figures['partitions']:.0f} partitions, "
        f"{figures['segments']:.0f} segments, recovered {figures['recovered_segments']:.0f} "
        f"segments ({figures['recovered_bytes'] / 2**20:.1f} MiB), RSS +"
        f"{figures['rss_delta_mib']:.1f} MiB (peak {figures['max_rss_mib']:.0f} MiB)"
    )


def creation_costs(sizes: list[int]) -> None:
    """Create a topic of each size in turn in one LogManager; seconds and descriptors each."""
    with tempfile.TemporaryDirectory(prefix="odradek-creation-") as tmp:
        config = BrokerConfig(log_dirs=(tmp,))
        manager = LogManager(config)
        manager.startup()
        admin = TopicAdmin(manager, config)
        existing = 0
        for number, size in enumerate(sizes):
            descriptors = _descriptors(os.getpid())
            started, cpu_started = time.perf_counter(), time.process_time()
            admin.create_topic(f"created-{number}", size)
            seconds = time.perf_counter() - started
            cpu_seconds = time.process_time() - cpu_started  # less noisy on a busy machine
            print(
                f"create {size:6d} partitions after {existing:6d}: {seconds:6.2f} s "
                f"({seconds / size * 1000:.2f} ms each; CPU {cpu_seconds / size * 1000:.2f} ms "
                f"each), +{_descriptors(os.getpid()) - descriptors} descriptors"
            )
            existing += size
        started = time.perf_counter()
        manager.shutdown()
        print(f"shutdown with {existing} partitions: {time.perf_counter() - started:.2f} s")


def broker_with_many_partitions(partitions: int) -> None:
    """One ``odradek serve`` process: create, stop, restart and serve ``partitions``."""
    with tempfile.TemporaryDirectory(prefix="odradek-many-") as tmp:
        data_dir = Path(tmp) / "data"
        broker = _ServeProcess(data_dir)
        started = time.perf_counter()
        with Admin(bootstrap_servers=broker.bootstrap, request_timeout_ms=120_000) as admin:
            admin.create_topics([NewTopic("many", partitions)])
        created = time.perf_counter() - started
        print(
            f"broker: created {partitions} partitions in one request in {created:.2f} s; "
            f"{_descriptors(broker.pid)} descriptors, RSS {_rss_mib(broker.pid):.0f} MiB"
        )
        started = time.perf_counter()
        broker.stop()
        print(f"broker: SIGTERM to exit {time.perf_counter() - started:.2f} s")
        started = time.perf_counter()
        broker = _ServeProcess(data_dir)
        restarted = time.perf_counter() - started
        clean = any("(clean shutdown)" in line for line in broker.lines)
        try:
            last = TopicPartition("many", partitions - 1)
            started = time.perf_counter()
            with Admin(bootstrap_servers=broker.bootstrap) as admin:
                (topic,) = admin.metadata(["many"]).topics
            with Producer(bootstrap_servers=broker.bootstrap, acks="all") as producer:
                producer.send("many", b"after-restart", partition=last.partition).result()
            with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
                consumer.assign([last])
                consumer.seek_to_beginning(last)
                values = [record.value for record in consumer.poll(10_000)]
            served = time.perf_counter() - started
            print(
                f"broker: restart to serving {restarted:.2f} s ({'clean' if clean else 'UNCLEAN'}"
                f" shutdown before); metadata shows {len(topic.partitions)} partitions; "
                f"produce + read back on {last}: {values == [b'after-restart']} in {served:.2f} s;"
                f" {_descriptors(broker.pid)} descriptors, RSS {_rss_mib(broker.pid):.0f} MiB"
            )
        finally:
            broker.stop()


class _ServeProcess:
    """``odradek serve`` on free ports, ready once its listener accepts; lines it logged."""

    def __init__(self, data_dir: Path) -> None:
        self.port = _free_port()
        command = [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(data_dir)]
        command += ["--port", str(self.port), "--metrics-port", str(_free_port())]
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        self.pid = self.process.pid
        self.lines: list[str] = []
        for line in self.process.stderr:
            self.lines.append(line)
            if "serving on" in line:
                break
        else:
            raise RuntimeError("the broker did not start:\n" + "".join(self.lines))
        threading.Thread(target=self._keep_reading, daemon=True).start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _keep_reading(self) -> None:
        for line in self.process.stderr:
            self.lines.append(line)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="recovery threads per log dir")
    parser.add_argument("--repeat", type=int, default=3, help="start-ups per measurement")
    parser.add_argument("--creation", default="1000,2000,4000", help="topic sizes, in turn")
    parser.add_argument("--broker-partitions", type=int, default=10_000)
    parser.add_argument("--only", default="startup,creation,broker", help="sections to run")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.threads)))
        return
    sections = set(args.only.split(","))
    if "creation" in sections:
        creation_costs([int(size) for size in args.creation.split(",")])
    if "broker" in sections:
        broker_with_many_partitions(args.broker_partitions)
    if "startup" not in sections:
        return
    with tempfile.TemporaryDirectory(prefix="odradek-startup-") as tmp:
        data_dir = Path(tmp) / "data"
        started = time.perf_counter()
        build(data_dir, args.partitions, args.segments)
        print(
            f"built {args.partitions} x {args.segments} segments in "
            f"{time.perf_counter() - started:.1f} s under {data_dir}"
        )
        report("clean", fastest(data_dir, args.threads, args.repeat, clean=True))
        report("unclean", fastest(data_dir, args.threads, args.repeat, clean=False))


if __name__ == "__main__":
    main()
