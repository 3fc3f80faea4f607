"""Power-cut safety benchmark: what the directory fsyncs cost acks=all, and how many power cuts
a minute the power-cut tests reach.

(a) acks=all throughput and p99 latency through the group commit (``GroupCommit`` over a
    ``UnifiedLog`` on a real directory, producers as asyncio tasks, fsyncs on a thread pool, as the
    broker runs them), side by side in one run: today (a roll renames a pre-created segment
    file into place; its directory fsync runs in the roll's background task), with the new
    segment's directory fsync inside the group commit's flush after each roll (no pre-created
    file taken), and before (no directory fsync: ``LocalLog.sync_directory`` a no-op). Rounds
    interleave the three (each round in another order); medians, ranges and per-round
    ratios are printed.
(b) power cuts a minute on the power-cut file system (tests/powercut_fs.py): a LogManager
    started, acks=all records appended across rolls for a random moment, the power cut, again.

Prints figures, asserts nothing. Usage: ``python bench/powercut.py [--quick] [--segment-kb N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import shutil
import stat
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from odradek.config.broker_config import BrokerConfig
from odradek.config.log_config import LogConfig
from odradek.record.record_batch_builder import build_batch
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.server.group_commit import GroupCommit
from odradek.storage.local_log import LocalLog
from odradek.storage.log_manager import LogManager
from odradek.storage.producer_snapshots import ProducerSnapshots
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parent.parent
GROUP_COMMIT_THREADS = "group-commit"
SEGMENT_BYTES = 256 * 1024  # default: small, so rolls (and their directory fsyncs) come often


class FsyncCount:
    """Counts fsyncs by kind while installed (file and directory descriptors alike go
    through ``os.fsync``), and the time the group commit's flushes (its executor's threads),
    which acks=all requests wait for, spend making directory entries durable (an fsync of
    their own, or waiting for the roll's background one)."""

    def __init__(self) -> None:
        self.files = self.directories = 0
        self.flushes_waiting = 0  # group-commit flushes that spent > 0.2 ms on the directory
        self.seconds_waiting = 0.0

    @contextmanager
    def installed(self):
        original = os.fsync

        def counting(fd: int) -> None:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                self.directories += 1
            else:
                self.files += 1
            original(fd)

        sync_directory = LocalLog.sync_directory

        def timed_sync_directory(log: LocalLog, **options: bool) -> None:
            if not threading.current_thread().name.startswith(GROUP_COMMIT_THREADS):
                return sync_directory(log, **options)
            started = time.perf_counter()
            sync_directory(log, **options)
            seconds = time.perf_counter() - started
            if seconds > 0.0002:
                self.flushes_waiting += 1
                self.seconds_waiting += seconds

        os.fsync = counting
        LocalLog.sync_directory = timed_sync_directory  # type: ignore[method-assign]
        try:
            yield self
        finally:
            os.fsync = original
            LocalLog.sync_directory = sync_directory  # type: ignore[method-assign]


@contextmanager
def variant(name: str):
    """The UnifiedLog as it runs today, or as it ran before: ``before`` (no directory fsync for
    segment files: ``LocalLog.sync_directory`` a no-op; the roll's producer snapshot written with
    a directory fsync of its own, no pre-created file), ``inline`` (the directory fsync of a
    new segment inside the group commit's flush after each roll: no pre-created segment file
    is ever taken)."""
    import odradek.storage.local_log as local_log_module

    original_sync = LocalLog.sync_directory
    original_snapshot = ProducerSnapshots.write_at_roll
    original_take = local_log_module.take_precreated_segment_file
    if name == "before":
        LocalLog.sync_directory = lambda self, **options: None  # type: ignore[method-assign]
        ProducerSnapshots.write_at_roll = (  # type: ignore[method-assign]
            lambda self, new, data: self._producer_state.write_snapshot(new.base_offset, data)
        )
    elif name == "inline":
        local_log_module.take_precreated_segment_file = lambda directory, offset: False
    try:
        yield
    finally:
        LocalLog.sync_directory = original_sync  # type: ignore[method-assign]
        ProducerSnapshots.write_at_roll = original_snapshot  # type: ignore[method-assign]
        local_log_module.take_precreated_segment_file = original_take


VARIANTS = {
    "before": "before (no directory fsync)",
    "inline": "directory fsync in the flush",
    "today": "after (pre-created files)",
}


async def acks_all_run(
    directory: Path, producers: int, requests: int, batch: bytes, segment_bytes: int
) -> tuple:
    """(records/s, p99 latency in ms) of ``producers`` tasks each sending ``requests`` acks=all
    requests of ``batch`` to one partition."""
    scheduler = Scheduler()
    scheduler.startup()
    config = LogConfig(segment_bytes=segment_bytes)
    log = UnifiedLog.open(directory / "bench-0", config, scheduler)
    executor = ThreadPoolExecutor(4, thread_name_prefix=GROUP_COMMIT_THREADS)
    group_commit = GroupCommit(log, executor, lambda end: None)
    latencies: list[float] = []
    records_per_batch = 10

    async def producer() -> None:
        for _ in range(requests):
            started = time.perf_counter()
            info = log.append(batch)
            await group_commit.durable(info.last_offset)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(producer() for _ in range(producers)))
    elapsed = time.perf_counter() - started
    rolls = log.number_of_segments - 1
    log.close()
    scheduler.shutdown()
    executor.shutdown()
    records = producers * requests * records_per_batch
    p99 = statistics.quantiles(latencies, n=100)[98] * 1000
    return records / elapsed, p99, rolls


def section_a(scale: float, segment_bytes: int) -> None:
    print("(a) acks=all through the group commit, 8 producers, 10 x 100 B records a request,")
    print(
        f"    {segment_bytes // 1024} KB segments; medians of interleaved rounds "
        "[lowest-highest round]:"
    )
    batch = build_batch([(int(time.time() * 1000), None, b"x" * 100, ()) for _ in range(10)])
    results: dict[str, list[tuple]] = {name: [] for name in VARIANTS}
    rounds = max(3, int(9 * scale))
    names = list(VARIANTS)
    for round_number in range(rounds):
        order = names[round_number % len(names) :] + names[: round_number % len(names)]
        for name in order:
            count = FsyncCount()
            with (
                tempfile.TemporaryDirectory(dir=ROOT) as directory,
                variant(name),
                count.installed(),
            ):
                run = asyncio.run(
                    acks_all_run(Path(directory), 8, int(1500 * scale), batch, segment_bytes)
                )
                results[name].append(
                    (
                        *run,
                        count.files,
                        count.directories,
                        count.flushes_waiting,
                        count.seconds_waiting,
                    )
                )
    for name, label in VARIANTS.items():
        runs = results[name]
        throughputs = [r[0] for r in runs]
        p99s = [r[1] for r in runs]
        _, _, rolls, files, directories, _, _ = runs[0]
        waiting = statistics.median(r[5] for r in runs)
        waited_ms = statistics.median(r[6] for r in runs) * 1000
        print(
            f"  {label:30} {statistics.median(throughputs):9,.0f} records/s "
            f"[{min(throughputs):,.0f}-{max(throughputs):,.0f}]   "
            f"p99 {statistics.median(p99s):6.2f} ms [{min(p99s):.2f}-{max(p99s):.2f}]   "
            f"({rolls} rolls, {files} file and {directories} directory fsyncs a run; "
            f"{waiting:.0f} group-commit flushes waited {waited_ms:.0f} ms in all for the "
            "directory)"
        )
    for name in ("inline", "today"):
        ratios = [a[0] / b[0] for a, b in zip(results[name], results["before"], strict=True)]
        p99_ratios = [a[1] / b[1] for a, b in zip(results[name], results["before"], strict=True)]
        print(
            f"  {VARIANTS[name]} / before: throughput {statistics.median(ratios):.3f}x "
            f"[{min(ratios):.3f}-{max(ratios):.3f}], p99 {statistics.median(p99_ratios):.3f}x "
            f"[{min(p99_ratios):.3f}-{max(p99_ratios):.3f}] (per-round ratios)"
        )


def section_b(scale: float) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.powercut_fs import PowerCutFS, fuse_missing_reason

    reason = fuse_missing_reason()
    if reason is not None:
        print(f"(b) skipped: {reason}")
        return
    logging.getLogger("odradek").setLevel(logging.CRITICAL)  # each cut fails every write
    rng = random.Random(25)
    cuts = max(10, int(60 * scale))
    with tempfile.TemporaryDirectory(dir=ROOT) as work:
        fs = PowerCutFS(Path(work) / "b", Path(work) / "m", Path(work) / "s")
        fs.start()
        try:
            config = BrokerConfig(log_dirs=(str(fs.mount / "data"),), log_segment_bytes=4096)
            tp = TopicPartition("pc", 0)
            started = time.perf_counter()
            for cut in range(cuts):
                manager = LogManager(config, initial_task_delay_ms=10)
                manager.startup()
                if not manager.partitions("pc"):  # the first cut of a round of 20
                    TopicAdmin(manager, manager.config).create_topic("pc", 1)
                log = manager.get_log(tp)
                deadline = time.perf_counter() + rng.uniform(0, 0.04)
                while time.perf_counter() < deadline:
                    info = log.append(build_batch([(int(time.time() * 1000), None, b"v", ())]))
                    log.flush(info.last_offset + 1)
                fs.cut(abandon=lambda manager=manager: _abandon(manager))
                if cut % 20 == 19:
                    shutil.rmtree(fs.mount / "data")
            elapsed = time.perf_counter() - started
        finally:
            fs.stop()
    print(
        f"(b) power cuts: {cuts} in {elapsed:.1f} s, {cuts / elapsed * 60:,.0f} a minute "
        "(start-up and recovery, ~20 ms of acks=all appends, the cut and remount each)"
    )


def _abandon(manager: LogManager) -> None:
    try:
        manager.shutdown()
    except Exception:  # the power is out: every change fails
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the volumes")
    parser.add_argument(
        "--segment-kb", type=int, default=SEGMENT_BYTES // 1024, help="segment.bytes in KB"
    )
    arguments = parser.parse_args()
    scale = 0.1 if arguments.quick else 1.0
    section_a(scale, arguments.segment_kb * 1024)
    section_b(scale)


if __name__ == "__main__":
    main()
