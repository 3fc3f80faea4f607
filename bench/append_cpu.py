"""Thread CPU time per UnifiedLog.append: prints figures, asserts nothing.

Wall-clock throughput (bench/storage.py) swings by half on this shared 2-core machine; the
CPU time the appending thread itself spends moves far less, so this is the figure for
comparing two versions of the append path. Each round opens a fresh log, appends
``--megabytes`` of one producer batch (``--record-bytes`` values in batches of
``--batch-bytes``, made as bench/storage.py makes them) and prints the thread CPU time per append.

To compare versions, run it from each checkout in turn, round after round (one process per
version and round, so that neither inherits the other's caches), e.g.:

    for round in 1 2 3 4 5; do
        for tree in /path/to/old /path/to/new; do
            PYTHONPATH=$tree .venv/bin/python bench/append_cpu.py --label $tree
        done
    done

Usage: python bench/append_cpu.py [--record-bytes N] [--batch-bytes N] [--megabytes N]
                                  [--rounds N] [--label TEXT] [--python-append-state]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from storage import make_batches  # bench/storage.py's batches

import odradek
from odradek.config.log_config import LogConfig
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog

MB = 1024 * 1024
WARM_UP_APPENDS = 50


def append_microseconds(directory: Path, batch: bytes, appends: int) -> float:
    """Thread CPU time per append of ``batch`` to a fresh log in ``directory``."""
    scheduler = Scheduler()
    scheduler.startup()
    log = UnifiedLog.open(directory, LogConfig(segment_bytes=64 * MB), scheduler)
    try:
        for _ in range(WARM_UP_APPENDS):
            log.append(batch)
        append = log.append
        start = time.thread_time_ns()
        for _ in range(appends):
            append(batch)
        return (time.thread_time_ns() - start) / appends / 1000
    finally:
        log.close()
        scheduler.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--batch-bytes", type=int, default=16 * 1024)
    parser.add_argument("--megabytes", type=int, default=16, help="appended per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--label", default="", help="printed first, to tell versions apart")
    parser.add_argument(
        "--python-append-state",
        action="store_true",
        help="segments lend their append state to the Python twin, not the C type",
    )
    args = parser.parse_args()
    if args.python_append_state:
        from odradek.storage import segment_append_state

        segment_append_state.SegmentAppendState = segment_append_state.PythonSegmentAppendState
    print(f"odradek from {Path(odradek.__file__).parent}")
    batch = make_batches(args.record_bytes, args.batch_bytes, 1)[0]
    appends = max(1, args.megabytes * MB // len(batch))
    root = Path(tempfile.mkdtemp(prefix="odradek-append-cpu-"))
    try:
        figures = [
            append_microseconds(root / f"bench-{round_number}", batch, appends)
            for round_number in range(args.rounds)
        ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.label} {len(batch)} B batches of {args.record_bytes} B records: "
        f"{statistics.median(figures):.2f} us a UnifiedLog.append (thread CPU, median of "
        f"{args.rounds} rounds of {appends}: " + ", ".join(f"{f:.2f}" for f in figures) + ")"
    )


if __name__ == "__main__":
    main()
