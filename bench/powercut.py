"""Power-cut safety benchmark: what the directory fsyncs cost acks=all, and how many power cuts
a minute the power-cut tests reach.

(a) acks=all throughput and p99 latency through the group commit (``GroupCommit`` over a
    ``Log`` on a real directory, producers as asyncio tasks, fsyncs on a thread pool, as the
    broker runs them), side by side in one run: with the directory fsync a flush adds after a
    roll (today) and without it (before: ``Log._sync_directory`` a no-op). Rounds alternate
    between the two; the medians are printed.
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
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from odradek.config.broker_config import BrokerConfig
from odradek.config.log_config import LogConfig
from odradek.record.record_batch_builder import build_batch
from odradek.server.group_commit import GroupCommit
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager
from odradek.storage.scheduler import Scheduler
from odradek.storage.topic_admin import TopicAdmin
from odradek.topic_partition import TopicPartition

ROOT = Path(__file__).resolve().parent.parent
SEGMENT_BYTES = 256 * 1024  # default: small, so rolls (and their directory fsyncs) come often


class FsyncCount:
    """Counts fsyncs by kind while installed (file and directory descriptors alike go
    through ``os.fsync``)."""

    def __init__(self) -> None:
        self.files = self.directories = 0

    @contextmanager
    def installed(self):
        original = os.fsync

        def counting(fd: int) -> None:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                self.directories += 1
            else:
                self.files += 1
            original(fd)

        os.fsync = counting
        try:
            yield self
        finally:
            os.fsync = original


@contextmanager
def directory_fsyncs(enabled: bool):
    """Today's Log, or one whose flushes skip the directory fsync (the code before it)."""
    original = Log._sync_directory
    if not enabled:
        Log._sync_directory = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        Log._sync_directory = original  # type: ignore[method-assign]


async def acks_all_run(
    directory: Path, producers: int, requests: int, batch: bytes, segment_bytes: int
) -> tuple:
    """(records/s, p99 latency in ms) of ``producers`` tasks each sending ``requests`` acks=all
    requests of ``batch`` to one partition."""
    scheduler = Scheduler()
    scheduler.startup()
    config = LogConfig(segment_bytes=segment_bytes)
    log = Log.open(directory / "bench-0", config, scheduler)
    executor = ThreadPoolExecutor(4, thread_name_prefix="flush")
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
    print(f"    {segment_bytes // 1024} KB segments, medians of alternating rounds:")
    batch = build_batch([(int(time.time() * 1000), None, b"x" * 100, ()) for _ in range(10)])
    results: dict[bool, list[tuple]] = {True: [], False: []}
    rounds = max(3, int(7 * scale))
    for round_number in range(rounds):
        for enabled in (False, True) if round_number % 2 == 0 else (True, False):
            count = FsyncCount()
            with (
                tempfile.TemporaryDirectory(dir=ROOT) as directory,
                directory_fsyncs(enabled),
                count.installed(),
            ):
                run = asyncio.run(
                    acks_all_run(Path(directory), 8, int(1500 * scale), batch, segment_bytes)
                )
                results[enabled].append((*run, count.files, count.directories))
    for enabled, label in ((False, "before (no directory fsync)"), (True, "after (today)")):
        throughput = statistics.median(r[0] for r in results[enabled])
        p99 = statistics.median(r[1] for r in results[enabled])
        _, _, rolls, files, directories = results[enabled][0]
        spread = max(r[0] for r in results[enabled]) / min(r[0] for r in results[enabled])
        print(
            f"  {label:28} {throughput:10,.0f} records/s   p99 {p99:6.2f} ms   "
            f"({rolls} rolls, {files} file and {directories} directory fsyncs a run; "
            f"best/worst round {spread:.2f}x)"
        )
    before = statistics.median(r[0] for r in results[False])
    after = statistics.median(r[0] for r in results[True])
    p99_before = statistics.median(r[1] for r in results[False])
    p99_after = statistics.median(r[1] for r in results[True])
    print(
        f"  after/before: throughput {after / before:.3f}x, p99 {p99_after / p99_before:.3f}x"
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
