"""Idempotent producers benchmark: prints figures, asserts nothing.

- Append cost per batch of idempotent batches (producer id, epoch, sequence: checked against
  the partition's producer state, recorded after the write) beside plain ones (producer id
  -1), same records, in interleaved rounds on the same file system; target: at most 5% more
  (the thread's CPU time: the wall time on a shared machine mostly measures the neighbours).
- Recovery of a log written by 10,000 producers: UnifiedLog.open after a clean shutdown (the
  snapshot at the log end is loaded, nothing replayed), after an unclean one with a roll's
  snapshot (the tail after it replayed), and with no snapshot at all (every batch replayed).

Usage: python bench/producer_state.py [--dir DIR] [--batches N] [--rounds N] [--producers N]
                                     [--append-only]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from odradek.clock import SYSTEM_CLOCK
from odradek.config.log_config import LogConfig
from odradek.record.record_batch_builder import build_batch
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=64 * 1024 * 1024)


def batches(count: int, producer_id: int, records: int = 10, size: int = 100) -> list[bytes]:
    """``count`` batches of ``records`` records; idempotent when ``producer_id`` >= 0. Each
    batch is its own object on both sides, so both read as much memory."""
    now = SYSTEM_CLOCK.milliseconds()
    values = [(now, b"key-%d" % i, b"v" * size, ()) for i in range(records)]
    if producer_id < 0:
        return [build_batch(values) for _ in range(count)]
    return [
        build_batch(values, producer_id=producer_id, producer_epoch=0, base_sequence=n * records)
        for n in range(count)
    ]


def append_seconds(directory: Path, to_append: list[bytes]) -> tuple[float, float]:
    """(wall, CPU) seconds to append ``to_append`` to a new log; CPU time is this thread's,
    what a busy neighbour disturbs least."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    scheduler = Scheduler()
    log = UnifiedLog.open(directory, CONFIG, scheduler)
    try:
        start, cpu_start = time.perf_counter(), time.thread_time()
        for records in to_append:
            log.append(records)
        return time.perf_counter() - start, time.thread_time() - cpu_start
    finally:
        log.close()
        scheduler.shutdown()


def append_cost(root: Path, count: int, rounds: int) -> None:
    """Plain and idempotent appends in interleaved rounds (each round runs both, in turns
    first), so that a neighbour's load falls on both sides alike."""
    plain, idempotent = batches(count, -1), batches(count, 7)
    pairs = []
    for round_number in range(rounds):
        if round_number % 2:
            idem = append_seconds(root / "idem-0", idempotent)
            pairs.append((append_seconds(root / "plain-0", plain), idem))
        else:
            first = append_seconds(root / "plain-0", plain)
            pairs.append((first, append_seconds(root / "idem-0", idempotent)))
    for index, clock in ((0, "wall"), (1, "thread CPU")):
        plain_us = sorted(p[index] / count * 1e6 for p, _ in pairs)
        idem_us = sorted(i[index] / count * 1e6 for _, i in pairs)
        ratios = sorted(i[index] / p[index] for p, i in pairs)
        print(
            f"append ({clock} time), {count} batches of 10 x 100 B, {rounds} rounds: plain "
            f"{statistics.median(plain_us):.2f} us/batch ({plain_us[0]:.2f}..{plain_us[-1]:.2f}),"
            f" idempotent {statistics.median(idem_us):.2f} ({idem_us[0]:.2f}..{idem_us[-1]:.2f}):"
            f" {100 * (statistics.median(idem_us) / statistics.median(plain_us) - 1):+.1f}%; "
            f"per-round ratio median {statistics.median(ratios):.3f} "
            f"({ratios[0]:.3f}..{ratios[-1]:.3f})"
        )


def write_producers(directory: Path, producers: int, per_producer: int, config: LogConfig) -> int:
    """A log with ``per_producer`` batches from each of ``producers`` producers, interleaved."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    scheduler = Scheduler()
    scheduler.startup()
    log = UnifiedLog.open(directory, config, scheduler)
    now = SYSTEM_CLOCK.milliseconds()
    for n in range(per_producer):
        for pid in range(producers):
            log.append(
                build_batch(
                    [(now, b"k", b"v" * 50, ())],
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=n,
                )
            )
    end = log.log_end_offset
    log.flush()
    scheduler.shutdown(run_pending_one_offs=True)  # the rolls' snapshots
    log.close()  # the clean shutdown's snapshot at the log end
    return end


def open_seconds(directory: Path, config: LogConfig, **kwargs: object) -> tuple[float, int]:
    scheduler = Scheduler()
    start = time.perf_counter()
    log = UnifiedLog.open(directory, config, scheduler, **kwargs)
    elapsed = time.perf_counter() - start
    producers = len(log.producer_state.table)
    log.close()
    return elapsed, producers


def recovery(root: Path, producers: int, rounds: int) -> None:
    directory = root / "producers-0"
    config = LogConfig(segment_bytes=1024 * 1024)
    end = write_producers(directory, producers, 3, config)
    snapshots = sorted(directory.glob("*.snapshot"))
    saved = {path: path.read_bytes() for path in snapshots}
    cases = {
        "clean shutdown, snapshot at the log end": lambda: dict(
            recovery_point=end, had_clean_shutdown=True
        ),
        "unclean, newest roll snapshot + replay of the tail": lambda: _drop(
            [snapshots[-1]], dict(recovery_point=end)
        ),
        "no snapshot: every batch replayed": lambda: _drop(
            snapshots, dict(recovery_point=end, had_clean_shutdown=True)
        ),
    }
    segments = len(list(directory.glob("*.log")))
    print(
        f"recovery of a log of {producers} producers x 3 batches ({end} batches, "
        f"{segments} segments, {len(snapshots)} snapshots):"
    )
    for label, prepare in cases.items():
        times = []
        for _ in range(rounds):
            for path, data in saved.items():
                path.write_bytes(data)
            kwargs = prepare()
            seconds, loaded = open_seconds(directory, config, **kwargs)
            times.append(seconds)
        print(f"  {label}: {statistics.median(times) * 1000:.0f} ms ({loaded} producers)")


def _drop(paths: list[Path], kwargs: dict) -> dict:
    for path in paths:
        path.unlink(missing_ok=True)
    return kwargs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--batches", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--producers", type=int, default=10000)
    parser.add_argument("--append-only", action="store_true", help="skip the recovery figures")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    try:
        append_cost(root, args.batches, args.rounds)
        if not args.append_only:
            recovery(root, args.producers, 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
