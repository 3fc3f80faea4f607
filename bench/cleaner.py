"""Log cleaner benchmark: prints figures, asserts nothing.

1. Cleaning throughput for 1 KB records, as a ratio to reading the same segments (absolute
   times on a shared 2-core machine are noisy; ratios from one run are not):
   - raw read: ``os.pread`` of the segment files in 1 MiB chunks (page cache warm);
   - consumer read: every record decoded (``FileRecords.batches`` + ``RecordBatch.records``);
   - clean: one run in this process (``Cleaner.clean``: map, rewrite, fsync, rename ``.swap``),
     and the broker's path (a task sent to a running ``CleanerProcess`` worker, then the swap;
     the worker's start-up, once per cleaner thread, is timed apart).
   Two key mixes: updates of 1% of the keys (most records dropped) and unique keys (every
   record kept and recopied, the most work per byte).
2. The broker while cleaning, as a user runs it: ``odradek.server``'s Broker in its own
   process (this script with ``--serve-broker``), with its own log cleaner (back-off 50 ms;
   replaced segments deleted without delay, so their deletion counts in the cleaning phase),
   and a producer in this process sending 1 KB records one at a time (acks=1) to a compacted
   topic. The cleaner recleans a large log of another topic over and over during the cleaning
   phases (the first dirty offset it checkpoints is replaced by 0), not during the idle ones;
   the two alternate ``ROUNDS`` times, so a noisy neighbour's drift hits both alike. Produce
   latency p50/p99 and the broker's event-loop lag (overshoot of a 5 ms sleep on its loop),
   idle and while cleaning, in the same run, and the broker process's CPU time (its share per
   run: the cleaning phases' CPU beyond their sends at the idle cost per send).
   ``--broker-mix updates`` recleans a log that has shrunk to 1% instead: runs follow each
   other back to back (about a hundred a second), so what it shows is each run's cost in the
   broker process (planning, swap, checkpoint, their fsyncs). ``--same-process`` runs the
   broker beside the producer (one GIL), as this bench did before;
   ``--io-max-bytes-per-second`` sets the broker's ``log.cleaner.io.max.bytes.per.second``
   (default: unlimited, as in Kafka).

Usage: python bench/cleaner.py [--dir DIR] [--megabytes N] [--seconds S]
                               [--broker-mix unique|updates] [--broker-only] [--same-process]
                               [--io-max-bytes-per-second RATE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.cleaner.cleanable_offsets import cleanable_offsets
from odradek.cleaner.cleaned_segment_swap import delete_leftovers, swap_in
from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_offset_checkpoints import CleanerOffsetCheckpoints
from odradek.cleaner.cleaner_process import CleanerProcess
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.log_to_clean import LogToClean
from odradek.client.event_loop_thread import EventLoopThread
from odradek.client.producer import Producer
from odradek.clock import SYSTEM_CLOCK
from odradek.config.broker_config_loader import load_broker_config
from odradek.config.log_config import LogConfig
from odradek.record.record_batch_builder import build_batch
from odradek.server.broker import Broker
from odradek.storage.file_records import FileRecords
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

MB = 1024 * 1024
RECORD_SIZE = 1000
RECORDS_PER_BATCH = 16
ROUNDS = 3
"""Idle and cleaning phases alternate this many times: drift on a noisy machine hits both."""
COMPACTED = LogConfig(segment_bytes=64 * MB, cleanup_policy=("compact",))


def fill(log: UnifiedLog, megabytes: int, distinct_keys: int) -> None:
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


def raw_read(log: UnifiedLog) -> None:
    for segment in log.segments.non_active():
        fd = os.open(segment.log.path, os.O_RDONLY)
        position = 0
        while chunk := os.pread(fd, MB, position):
            position += len(chunk)
        os.close(fd)


def consumer_read(log: UnifiedLog) -> None:
    for segment in log.segments.non_active():
        records = FileRecords.open(segment.log.path, file_already_exists=True)
        for _, batch in records.batches():
            for _record in batch.records():
                pass
        records.close_handler()


def full_task(log: UnifiedLog, config: CleanerConfig) -> CleaningTask:
    now_ms = SYSTEM_CLOCK.milliseconds()
    offsets = cleanable_offsets(log, None, now_ms)
    cleanable = LogToClean.of(
        log, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset
    )
    return CleaningTask.plan(cleanable, config, now_ms)


def throughput(
    directory: Path, megabytes: int, distinct_keys: int, label: str, worker: CleanerProcess
) -> None:
    scheduler = Scheduler()
    scheduler.startup()
    log = UnifiedLog.open(directory / f"{label}-0", COMPACTED, scheduler)
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
    swap_in(log, worker.clean(task, lambda: False), lambda: False)
    broker_path = time.perf_counter() - start
    kept = 100 * result.stats.bytes_written / max(result.stats.bytes_read, 1)
    print(f"\n{label}: {size / MB:,.0f} MB of 1 KB records, {kept:.0f}% of the bytes kept")
    for name, seconds in [
        ("raw read (pread)", raw),
        ("consumer read (decode)", consumer),
        ("clean, in process", in_process),
        ("clean, worker process + swap", broker_path),
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
        asyncio.run_coroutine_threadsafe(self._run(), loop)

    def take(self) -> list[float]:
        """The samples since the last call."""
        samples, self.samples = self.samples, []
        return samples

    async def _run(self) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            self.samples.append(time.perf_counter() - start - 0.005)


class Recleaner:
    """While on, the cleaner finds ``tp`` all dirty again after each run: the first dirty offset
    it checkpoints is replaced by 0 (the checkpoint is still written, as after any run)."""

    def __init__(self, checkpoints: CleanerOffsetCheckpoints, tp: TopicPartition) -> None:
        self.tp = tp
        self.on = False
        self.runs = 0
        self._update = checkpoints.update_cleaner_offsets
        checkpoints.update_cleaner_offsets = self._update_cleaner_offsets

    def _update_cleaner_offsets(self, offsets: dict[TopicPartition, int]) -> None:
        if offsets.get(self.tp, 0) > 0 and self.on:
            self.runs += 1
            offsets = {**offsets, self.tp: 0}
        self._update(offsets)

    def start(self) -> None:
        self.on = True
        self._update({self.tp: 0})


class BenchBroker:
    """A broker (odradek.server, its own log cleaner with a 50 ms back-off) with a compacted
    topic ``live`` for the producer and one ``dirty`` of ``megabytes``, cleaned once before
    :meth:`__init__` returns, that its cleaner recleans over and over while :meth:`reclean`
    says so; an event-loop lag probe on its loop.
    """

    def __init__(self, directory: Path, megabytes: int, mix: str, io_rate: float | None) -> None:
        overrides = {
            "log.dirs": str(directory / "broker"),
            "port": "0",
            "metrics.port": "0",
            "log.cleaner.backoff.ms": "50",
            # Segments a swap replaced are deleted at once, in the cleaning phase that caused
            # it: with Kafka's minute of delay, a short run would never delete them and a long
            # one would delete them during the idle phases.
            "log.segment.delete.delay.ms": "0",
        }
        if io_rate is not None:
            overrides["log.cleaner.io.max.bytes.per.second"] = str(io_rate)
        config = load_broker_config(overrides=overrides)
        self._loop_thread = EventLoopThread(name="broker-loop")
        self._broker = self._loop_thread.call(Broker, config)
        self._loop_thread.run(self._broker.start(), timeout=60)
        manager = self._broker.log_manager
        dirty = TopicPartition("dirty", 0)
        cleaner = self._broker.log_cleaner
        cleaner.abort_and_pause_cleaning(dirty)  # not while it is being filled
        self._broker.topic_admin.create_topic(
            "dirty", 1, {"cleanup.policy": "compact", "segment.bytes": str(64 * MB)}
        )
        self._broker.topic_admin.create_topic("live", 1, {"cleanup.policy": "compact"})
        keys = 10**9 if mix == "unique" else megabytes * 10  # unique: every record recopied
        fill(manager.get_log(dirty), megabytes, distinct_keys=keys)
        self._recleaner = Recleaner(cleaner.manager.checkpoints, dirty)
        cleaner.resume_cleaning([dirty])
        self._await_clean()
        self._probe = LagProbe(self._loop_thread.loop)
        self._cpu_s = time.process_time()
        self.port = self._broker.port

    def _await_clean(self) -> None:
        if not self._broker.log_cleaner.await_cleaned(self._recleaner.tp, 1, timeout_s=60):
            raise RuntimeError("the cleaner did not clean the dirty log")

    def sample(self) -> tuple[list[float], float]:
        """Since the last call: the event loop's lag samples and the broker process's CPU time
        (its cleaner worker's apart), in seconds."""
        cpu_s = time.process_time()
        used, self._cpu_s = cpu_s - self._cpu_s, cpu_s
        return self._probe.take(), used

    def reclean(self, on: bool) -> None:
        """Start recleaning, or stop it: then return once the run in progress is done."""
        if on:
            self._recleaner.start()
        else:
            self._recleaner.on = False
            self._await_clean()

    def stop(self) -> tuple[int, float]:
        """Stop the broker; how many runs its cleaner finished, and the last one's MB/s."""
        reports = self._broker.log_cleaner.last_reports
        self._loop_thread.run(self._broker.stop(), timeout=60)
        rate = reports[0].bytes_read / MB / reports[0].seconds if reports else 0.0
        return self._recleaner.runs, rate


class BrokerProcess:
    """A :class:`BenchBroker` in a child process (this script with ``--serve-broker``), as a
    user runs a broker: apart from its clients. Same methods, over the child's stdin/stdout.
    ``tree`` runs another checkout's broker (this script there, with its own ``.venv``)."""

    def __init__(
        self,
        directory: Path,
        megabytes: int,
        mix: str,
        io_rate: float | None,
        tree: Path | None = None,
    ) -> None:
        python, script = sys.executable, __file__
        if tree is not None:
            python, script = (
                str(tree / ".venv" / "bin" / "python"),
                str(tree / "bench" / "cleaner.py"),
            )
        command = [python, script, "--serve-broker", "--dir", str(directory)]
        command += ["--megabytes", str(megabytes), "--broker-mix", mix]
        if io_rate is not None:
            command += ["--io-max-bytes-per-second", str(io_rate)]
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.port = self._ask("port")

    def _ask(self, *command: object) -> Any:
        self._process.stdin.write(json.dumps(command) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the broker process exited ({self._process.wait()})")
        return json.loads(line)

    def sample(self) -> tuple[list[float], float]:
        return tuple(self._ask("sample"))

    def reclean(self, on: bool) -> None:
        self._ask("reclean", on)

    def stop(self) -> tuple[int, float]:
        runs, rate = self._ask("stop")
        self._process.wait(60)
        return runs, rate


def serve_broker(directory: Path, megabytes: int, mix: str, io_rate: float | None) -> None:
    """The child of :class:`BrokerProcess`: answer its commands, one JSON line each."""
    broker = BenchBroker(directory, megabytes, mix, io_rate)
    commands: dict[str, Callable[..., object]] = {
        "port": lambda: broker.port,
        "sample": broker.sample,
        "reclean": broker.reclean,
        "stop": broker.stop,
    }
    for line in sys.stdin:
        name, *arguments = json.loads(line)
        print(json.dumps(commands[name](*arguments)), flush=True)
        if name == "stop":
            return


def produce_for(producer: Producer, seconds: float) -> list[float]:
    """Send 1 KB records one at a time for ``seconds``; their latencies."""
    value = os.urandom(RECORD_SIZE)
    latencies = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.perf_counter()
        producer.send("live", value, key=b"key-%d" % (len(latencies) % 100)).result(10)
        latencies.append(time.perf_counter() - start)
    return latencies


def p(samples: list[float], quantile: int) -> float:
    return statistics.quantiles(samples, n=100)[quantile - 1] * 1000 if len(samples) > 1 else 0.0


def broker_while_cleaning(
    directory: Path,
    megabytes: int,
    seconds: float,
    mix: str,
    same_process: bool,
    io_rate: float | None,
) -> None:
    broker = (BenchBroker if same_process else BrokerProcess)(directory, megabytes, mix, io_rate)
    producer = Producer(bootstrap_servers=f"127.0.0.1:{broker.port}", acks=1, linger_ms=0)
    produce_for(producer, 1.0)  # warm up: metadata, connection
    idle: list[float] = []
    busy: list[float] = []
    idle_lag: list[float] = []
    busy_lag: list[float] = []
    idle_cpu_s = busy_cpu_s = 0.0
    for _ in range(ROUNDS):
        broker.sample()
        idle += produce_for(producer, seconds / ROUNDS)
        lag, cpu_s = broker.sample()
        idle_lag, idle_cpu_s = idle_lag + lag, idle_cpu_s + cpu_s
        broker.reclean(True)
        time.sleep(0.2)  # the first run is under way
        broker.sample()
        busy += produce_for(producer, seconds / ROUNDS)
        lag, cpu_s = broker.sample()
        busy_lag, busy_cpu_s = busy_lag + lag, busy_cpu_s + cpu_s
        broker.reclean(False)
    producer.close()
    runs, rate = broker.stop()
    where = "in the bench process" if same_process else "in its own process"
    limit = "unlimited" if io_rate is None else f"{io_rate / MB:,.0f} MiB/s"
    print(
        f"\nbroker ({where}, cleaner I/O {limit}): {megabytes} MB log ({mix} mix) recleaned "
        f"{runs} times in {seconds:.0f} s of {ROUNDS} cleaning phases (last run {rate:,.0f} "
        f"MB/s), between as many idle ones; one producer sends 1 KB records, acks=1"
    )
    for name, latencies, lag in [("idle", idle, idle_lag), ("cleaning", busy, busy_lag)]:
        print(
            f"  {name:9s} produce p50 {p(latencies, 50):6.2f} ms  p99 {p(latencies, 99):6.2f} ms"
            f"  ({len(latencies):,} sends)   event-loop lag p50 {p(lag, 50):5.2f} ms  "
            f"p99 {p(lag, 99):5.2f} ms  max {1000 * max(lag, default=0):6.2f} ms"
        )
    print(f"  produce p99 while cleaning / idle: {p(busy, 99) / max(p(idle, 99), 1e-9):.2f}x")
    # The broker's CPU per run: what the cleaning phases used beyond serving their sends at the
    # idle phases' cost per send.
    per_send_s = idle_cpu_s / max(len(idle), 1)
    per_run_s = (busy_cpu_s - per_send_s * len(busy)) / max(runs, 1)
    print(
        f"  {'bench' if same_process else 'broker'} process CPU (the worker apart): "
        f"idle {idle_cpu_s / seconds:.2f} s/s, "
        f"cleaning {busy_cpu_s / seconds:.2f} s/s; {runs / seconds:.1f} runs/s, about "
        f"{per_run_s * 1000:.2f} ms of it per run"
    )


def start_worker(directory: Path) -> CleanerProcess:
    """A cleaner worker process through its first run, on a 1 MB log: its start-up is paid
    once per cleaner thread, so it is timed apart from the runs."""
    worker = CleanerProcess()
    log = UnifiedLog.open(directory / "warm-up-0", COMPACTED, Scheduler())
    fill(log, 1, distinct_keys=10)
    start = time.perf_counter()
    worker.clean(full_task(log, CleanerConfig()), lambda: False)
    print(f"cleaner worker: start-up and a first 1 MB run {time.perf_counter() - start:.2f} s")
    log.close()
    return worker


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
    parser.add_argument(
        "--same-process",
        action="store_true",
        help="run the broker in the bench process, beside the producer (for comparison)",
    )
    parser.add_argument(
        "--io-max-bytes-per-second",
        type=float,
        default=None,
        help="the broker's log.cleaner.io.max.bytes.per.second (default: unlimited)",
    )
    parser.add_argument("--serve-broker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_broker:
        serve_broker(args.dir, args.megabytes, args.broker_mix, args.io_max_bytes_per_second)
        return
    directory = Path(tempfile.mkdtemp(prefix="cleaner-bench-", dir=args.dir))
    try:
        if not args.broker_only:
            worker = start_worker(directory)
            throughput(directory, args.megabytes, args.megabytes * 10, "updates", worker)
            throughput(directory, args.megabytes, 10**9, "unique", worker)
            worker.stop()
        broker_while_cleaning(
            directory,
            args.megabytes,
            args.seconds,
            args.broker_mix,
            args.same_process,
            args.io_max_bytes_per_second,
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
