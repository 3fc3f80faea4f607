"""Log cleaner benchmark: prints figures, asserts nothing.

1. Cleaning throughput for 1 KB records, as a ratio to reading the same segments (absolute
   times on a shared 2-core machine are noisy; ratios from one run are not):
   - raw read: ``os.pread`` of the segment files in 1 MiB chunks (page cache warm);
   - consumer read: every record decoded (``FileRecords.batches`` + ``RecordBatch.records``);
   - clean: one run in this process (``Cleaner.clean``: map, rewrite, fsync, rename ``.swap``),
     and the broker's path (``CleanerProcess`` in a child process, then the swap).
   Two key mixes: updates of 1% of the keys (most records dropped) and unique keys (every
   record kept and recopied, the most work per byte).
2. The broker while cleaning: a broker (odradek.server) with a producer sending 1 KB records
   one at a time (acks=1) to a compacted topic, while a LogCleaner attached to its LogManager
   recleans a large log of another topic over and over (its checkpoint is reset after each
   run). Produce latency p50/p99 and the broker's event-loop lag (overshoot of a 5 ms sleep
   on its loop), idle and while cleaning, in the same run. ``--broker-mix updates`` recleans
   a log that shrinks to 1% instead, so each run after the first does little I/O: what is
   left of the produce p99 then comes from each run's work in the broker process.

Usage: python bench/cleaner.py [--dir DIR] [--megabytes N] [--seconds S]
                               [--broker-mix unique|updates] [--broker-only]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from odradek.cleaner.cleanable_offsets import cleanable_offsets
from odradek.cleaner.cleaned_segment_swap import delete_leftovers, swap_in
from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_process import CleanerProcess
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.log_cleaner import LogCleaner
from odradek.cleaner.log_to_clean import LogToClean
from odradek.client.event_loop_thread import EventLoopThread
from odradek.client.producer import Producer
from odradek.config.broker_config_loader import load_broker_config
from odradek.config.log_config import LogConfig
from odradek.server.broker import Broker
from odradek.storage.clock import SYSTEM_CLOCK
from odradek.storage.file_records import FileRecords
from odradek.storage.log import Log
from odradek.storage.record_batch_builder import build_batch
from odradek.storage.scheduler import Scheduler
from odradek.storage.topic_partition import TopicPartition

MB = 1024 * 1024
RECORD_SIZE = 1000
RECORDS_PER_BATCH = 16
COMPACTED = LogConfig(segment_bytes=64 * MB, cleanup_policy=("compact",))


def fill(log: Log, megabytes: int, distinct_keys: int) -> None:
    """Append ``megabytes`` of 1 KB records whose keys cycle through ``distinct_keys``."""
    value = os.urandom(RECORD_SIZE // 2).hex().encode()
    now = SYSTEM_CLOCK.milliseconds()
    records = megabytes * MB // (RECORD_SIZE + 20)
    for start in range(0, records, RECORDS_PER_BATCH):
        keys = [b"key-%09d" % (n % distinct_keys) for n in range(start, start + RECORDS_PER_BATCH)]
        log.append(build_batch([(now, key, value, ()) for key in keys]))
    log.update_high_watermark(log.log_end_offset)
    log.roll()
    log.flush()


def best_seconds(function: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def raw_read(log: Log) -> None:
    for segment in log.segments.non_active():
        fd = os.open(segment.log.path, os.O_RDONLY)
        position = 0
        while chunk := os.pread(fd, MB, position):
            position += len(chunk)
        os.close(fd)


def consumer_read(log: Log) -> None:
    for segment in log.segments.non_active():
        records = FileRecords.open(segment.log.path, file_already_exists=True)
        for _, batch in records.batches():
            for _record in batch.records():
                pass
        records.close_handler()


def full_task(log: Log, config: CleanerConfig) -> CleaningTask:
    offsets = cleanable_offsets(log, None, SYSTEM_CLOCK.milliseconds())
    cleanable = LogToClean.of(
        log, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset
    )
    return CleaningTask.plan(cleanable, config)


def warm_up_fork_server(directory: Path) -> None:
    """The first CleanerProcess starts the fork server (once per broker): not timed."""
    scheduler = Scheduler()
    log = Log.open(directory / "warm-up-0", COMPACTED, scheduler)
    fill(log, 1, distinct_keys=10)
    CleanerProcess(full_task(log, CleanerConfig())).result(lambda: False)
    log.close()


def throughput(directory: Path, megabytes: int, distinct_keys: int, label: str) -> None:
    scheduler = Scheduler()
    scheduler.startup()
    log = Log.open(directory / f"{label}-0", COMPACTED, scheduler)
    fill(log, megabytes, distinct_keys)
    size = sum(segment.size for segment in log.segments.non_active())
    raw = best_seconds(lambda: raw_read(log))
    consumer = best_seconds(lambda: consumer_read(log), repeats=1)
    config = CleanerConfig()
    task = full_task(log, config)
    result = Cleaner(task).clean()
    in_process = result.stats.elapsed_secs
    delete_leftovers(log.dir)
    start = time.perf_counter()
    swap_in(log, CleanerProcess(task).result(lambda: False), lambda: False)
    broker_path = time.perf_counter() - start
    kept = 100 * result.stats.bytes_written / max(result.stats.bytes_read, 1)
    print(f"\n{label}: {size / MB:,.0f} MB of 1 KB records, {kept:.0f}% of the bytes kept")
    for name, seconds in [
        ("raw read (pread)", raw),
        ("consumer read (decode)", consumer),
        ("clean, in process", in_process),
        ("clean, child process + swap", broker_path),
    ]:
        rate = size / MB / seconds
        print(
            f"  {name:30s} {rate:8,.0f} MB/s   {100 * raw / seconds:6.1f}% of raw read   "
            f"{100 * consumer / seconds:6.1f}% of consumer read"
        )
    log.close()
    scheduler.shutdown(run_pending_one_offs=True)


class LagProbe:
    """Sleeps 5 ms at a time on an event loop and records how late it wakes up."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.samples: list[float] = []
        self.recording = False
        asyncio.run_coroutine_threadsafe(self._run(), loop)

    async def _run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            if self.recording:
                self.samples.append(time.perf_counter() - start - 0.005)


def produce_for(producer: Producer, seconds: float, until: Callable[[], bool]) -> list[float]:
    """Send 1 KB records one at a time for ``seconds`` (or until ``until()``); latencies."""
    value = os.urandom(RECORD_SIZE)
    latencies = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until():
        start = time.perf_counter()
        producer.send("live", value, key=b"key-%d" % (len(latencies) % 100)).result(10)
        latencies.append(time.perf_counter() - start)
    return latencies


def p(samples: list[float], quantile: float) -> float:
    return statistics.quantiles(samples, n=100)[quantile - 1] * 1000 if len(samples) > 1 else 0.0


class Recleaner(threading.Thread):
    """Resets the checkpoint of ``tp`` after every run so the cleaner recleans it again."""

    def __init__(self, cleaner: LogCleaner, checkpoints: object, tp: TopicPartition) -> None:
        super().__init__(daemon=True)
        self.cleaner, self.checkpoints, self.tp = cleaner, checkpoints, tp
        self.runs = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            if self.cleaner.manager.first_dirty_offset(self.tp) > 0:
                self.checkpoints.update_cleaner_offsets({self.tp: 0})
                self.runs += 1
            time.sleep(0.01)


def broker_while_cleaning(directory: Path, megabytes: int, seconds: float, mix: str) -> None:
    config = load_broker_config(
        overrides={"log.dirs": str(directory / "broker"), "port": "0", "metrics.port": "0"}
    )
    loop_thread = EventLoopThread(name="broker-loop")
    broker = loop_thread.call(Broker, config)
    loop_thread.run(broker.start(), timeout=60)
    manager = broker.log_manager
    compacted = {"cleanup.policy": "compact", "segment.bytes": str(64 * MB)}
    manager.create_topic("dirty", 1, compacted)
    manager.create_topic("live", 1, {"cleanup.policy": "compact"})
    dirty = TopicPartition("dirty", 0)
    keys = 10**9 if mix == "unique" else megabytes * 10  # unique: every record recopied
    fill(manager.get_log(dirty), megabytes, distinct_keys=keys)
    cleaner = LogCleaner(CleanerConfig(backoff_ms=50), manager.all_logs, manager)
    probe = LagProbe(loop_thread.loop)
    producer = Producer(bootstrap_servers=f"127.0.0.1:{broker.port}", acks=1, linger_ms=0)
    produce_for(producer, 1.0, lambda: False)  # warm up: metadata, connection
    probe.recording = True
    idle = produce_for(producer, seconds, lambda: False)
    idle_lag, probe.samples = probe.samples, []
    recleaner = Recleaner(cleaner, manager, dirty)
    cleaner.startup()
    recleaner.start()
    time.sleep(0.5)  # the first run is under way
    busy = produce_for(producer, seconds, lambda: False)
    busy_lag = probe.samples
    recleaner.stopped.set()
    reports = cleaner.last_reports
    cleaner.shutdown()
    producer.close()
    loop_thread.run(broker.stop(), timeout=60)
    rate = reports[0].bytes_read / MB / reports[0].seconds if reports else 0.0
    print(
        f"\nbroker: {megabytes} MB log ({mix} mix) recleaned {recleaner.runs} times in "
        f"{seconds:.0f} s (last run {rate:,.0f} MB/s) while one producer sends 1 KB records, acks=1"
    )
    for name, latencies, lag in [("idle", idle, idle_lag), ("cleaning", busy, busy_lag)]:
        print(
            f"  {name:9s} produce p50 {p(latencies, 50):6.2f} ms  p99 {p(latencies, 99):6.2f} ms"
            f"  ({len(latencies):,} sends)   event-loop lag p50 {p(lag, 50):5.2f} ms  "
            f"p99 {p(lag, 99):5.2f} ms  max {1000 * max(lag, default=0):6.2f} ms"
        )
    print(f"  produce p99 while cleaning / idle: {p(busy, 99) / max(p(idle, 99), 1e-9):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    parser.add_argument("--megabytes", type=int, default=100, help="size of each log")
    parser.add_argument("--seconds", type=float, default=5.0, help="each produce phase")
    parser.add_argument(
        "--broker-mix",
        choices=["unique", "updates"],
        default="unique",
        help="the key mix of the log recleaned while the producer runs",
    )
    parser.add_argument("--broker-only", action="store_true", help="skip the throughput part")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="cleaner-bench-", dir=args.dir))
    try:
        warm_up_fork_server(directory)
        if not args.broker_only:
            throughput(directory, args.megabytes, args.megabytes * 10, label="updates")
            throughput(directory, args.megabytes, distinct_keys=10**9, label="unique")
        broker_while_cleaning(directory, args.megabytes, args.seconds, args.broker_mix)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
