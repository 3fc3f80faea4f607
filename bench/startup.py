"""Start-up cost of a broker with many partitions: clean and unclean LogManager start-up.

Builds ``--partitions`` partitions of ``--segments`` segments each (one partition is written
through a LogManager and its directory copied), then starts a LogManager on them in a fresh
process for each measurement:

- clean: after a graceful shutdown (the clean-shutdown marker is there, recovery is skipped);
- unclean: the markers removed, so every log recovers its active segment (the recovery
  points are at the log end offsets).

Each start-up runs ``--repeat`` times and the fastest is reported (the others only measure
noise from other processes). Prints seconds, the load summary and the resident memory the
start-up added; asserts nothing.
Usage: ``.venv/bin/python bench/startup.py [--partitions 1000] [--segments 10] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.config.broker_config import BrokerConfig
from odradek.record.record_batch_builder import build_batch
from odradek.storage.log_manager import CLEAN_SHUTDOWN_FILE_NAME, LogManager
from odradek.storage.topic_admin import TopicAdmin
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="recovery threads per log dir")
    parser.add_argument("--repeat", type=int, default=3, help="start-ups per measurement")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.threads)))
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
