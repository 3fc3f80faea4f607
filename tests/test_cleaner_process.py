"""CleanerProcess: one long-lived worker process runs a cleaner thread's tasks; an aborted or
dead worker is replaced, a stopped one is gone (no zombie), and it dies with its parent."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cleaner_helpers import (
    ONE_BATCH_AT_A_TIME,
    SMALL_SEGMENTS,
    compact_config,
    latest_records,
    plan,
    write,
)
from log_helpers import open_log, read_all
from process_helpers import (
    DEADLINE_S,
    await_dead,
    await_gone,
    await_state,
    await_workers,
    resident_kib,
    state,
)
from serve_process import ServeProcess

from odradek.cleaner.cleaned_segment_swap import delete_leftovers, swap_in
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_process import CleanerProcess
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import LogCleaningAbortedError, LogCleaningError
from odradek.cleaner.throttler import CHECK_INTERVAL_S
from odradek.client import Admin, NewTopic, Producer
from odradek.storage import log_file_names as names
from odradek.storage.unified_log import UnifiedLog

PARENT_SCRIPT = """
import pickle, sys
from odradek.cleaner.cleaner_process import CleanerProcess

if __name__ == "__main__":
    task = pickle.loads(open(sys.argv[1], "rb").read())
    process = CleanerProcess()
    process.start()
    print(process.pid, flush=True)
    process.clean(task, lambda: False)
"""
"""A parent that starts a worker on a run that blocks, and waits for it forever."""


def _dirty(log: UnifiedLog, rounds: int = 6, keys: int = 5) -> list:
    """Rounds of updates of ``keys`` keys, a segment each, after a segment of keys that stay
    (so the first cleaned segment gets records)."""
    write(log, [(b"stable-%d" % n, b"s") for n in range(3)])
    log.roll()
    for round_ in range(rounds):
        write(log, [(b"key-%d" % n, b"%d-%d" % (round_, n)) for n in range(keys)])
        log.roll()
    return read_all(log)


@contextmanager
def stuck_task(log: UnifiedLog) -> Iterator[tuple[CleaningTask, Path]]:
    """A task that maps the last segment, writes the first group's ``.cleaned`` and then
    blocks opening the second segment (a FIFO while inside); and that ``.cleaned`` file."""
    segments = log.segments.non_active()
    task = plan(log, ONE_BATCH_AT_A_TIME, first_dirty=segments[-1].base_offset)
    second = names.log_file(log.dir, segments[1].base_offset)
    aside = second.with_name("aside")
    second.rename(aside)
    os.mkfifo(second)
    try:
        yield task, names.log_file(log.dir, 0, names.CLEANED_FILE_SUFFIX)
    finally:
        second.unlink()
        aside.rename(second)


def once_written(cleaned: Path) -> Callable[[], bool]:
    """A ``should_abort`` that turns True once the run has written into ``cleaned``."""
    deadline = time.monotonic() + DEADLINE_S

    def should_abort() -> bool:
        assert time.monotonic() < deadline, "the worker wrote nothing"
        return cleaned.exists() and cleaned.stat().st_size > 0

    return should_abort


@pytest.fixture
def process() -> Iterator[CleanerProcess]:
    """A cleaner thread's worker handle, stopped after the test."""
    process = CleanerProcess()
    yield process
    process.stop()


def test_one_worker_runs_every_task(tmp_path: Path, process: CleanerProcess) -> None:
    with (
        open_log(tmp_path / "a-0", compact_config()) as a,
        open_log(tmp_path / "b-0", compact_config()) as b,
    ):
        before = {a: _dirty(a), b: _dirty(b, rounds=8)}
        process.start()
        worker = process.pid
        for log in (a, b, a):
            swap_in(log, process.clean(plan(log), lambda: False), lambda: False)
            assert process.pid == worker
        for log in (a, b):
            assert read_all(log) == latest_records(before[log])
    process.stop()
    assert process.pid is None
    await_gone(worker)


def test_abort_kills_the_worker_and_the_next_run_gets_a_fresh_one(
    tmp_path: Path, process: CleanerProcess
) -> None:
    with open_log(tmp_path / "a-0", SMALL_SEGMENTS) as log:
        before = _dirty(log)
        with stuck_task(log) as (task, cleaned):
            process.start()
            stuck = process.pid
            with pytest.raises(LogCleaningAbortedError):
                process.clean(task, once_written(cleaned), poll_interval_s=0.01)
            assert process.pid is None
            await_gone(stuck)
        delete_leftovers(log.dir)
        swap_in(log, process.clean(plan(log), lambda: False), lambda: False)
        assert process.pid not in (None, stuck)
        assert read_all(log) == latest_records(before)


def test_a_failed_run_is_reported_and_the_worker_stays(
    tmp_path: Path, process: CleanerProcess
) -> None:
    with (
        open_log(tmp_path / "bad-0", compact_config()) as bad,
        open_log(tmp_path / "good-0", compact_config()) as good,
    ):
        _dirty(bad)
        path = names.log_file(bad.dir, 0)
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF  # corrupt the first segment's last batch
        path.write_bytes(bytes(data))
        before = _dirty(good)
        process.start()
        worker = process.pid
        with pytest.raises(LogCleaningError, match="cleaning failed"):
            process.clean(plan(bad), lambda: False)
        swap_in(good, process.clean(plan(good), lambda: False), lambda: False)
        assert process.pid == worker
        assert read_all(good) == latest_records(before)


def test_a_worker_killed_between_runs_is_replaced(tmp_path: Path, process: CleanerProcess) -> None:
    with open_log(tmp_path / "a-0", compact_config()) as log:
        before = _dirty(log)
        process.start()
        killed = process.pid
        os.kill(killed, signal.SIGKILL)
        await_state(killed, "Z")
        swap_in(log, process.clean(plan(log), lambda: False), lambda: False)
        assert process.pid not in (None, killed)
        assert state(killed) is None  # waited for when replaced
        assert read_all(log) == latest_records(before)
        assert process.idle_deaths == 1  # counted (odradek_cleaner_worker_failures_total)


def test_the_worker_dies_with_its_parent(tmp_path: Path) -> None:
    with open_log(tmp_path / "a-0", SMALL_SEGMENTS) as log:
        _dirty(log)
        with stuck_task(log) as (task, cleaned):
            task_file = tmp_path / "task.pickle"
            task_file.write_bytes(pickle.dumps(task))
            script = tmp_path / "parent.py"
            script.write_text(PARENT_SCRIPT)
            parent = subprocess.Popen(
                [sys.executable, str(script), str(task_file)], stdout=subprocess.PIPE, text=True
            )
            try:
                worker = int(parent.stdout.readline())
                written = once_written(cleaned)
                while not written():
                    time.sleep(0.01)
            finally:
                parent.kill()
                parent.wait()
            await_dead(worker)  # not left writing into the log directory


def test_memory_stays_bounded_over_many_runs(tmp_path: Path, process: CleanerProcess) -> None:
    config = CleanerConfig(dedupe_buffer_size=64 * 1024 * 1024)
    with open_log(tmp_path / "a-0", compact_config(segment_bytes=1024 * 1024)) as log:
        write(log, [(b"key-%d" % n, b"v") for n in range(50_000)], per_batch=500)
        log.roll()
        task = plan(log, config)
        map_kib = 50_000 * 2 * 24 // 1024  # each run's offset map: about 2.3 MiB
        for run in range(12):
            process.clean(task, lambda: False)
            delete_leftovers(log.dir)
            if run == 1:
                settled = resident_kib(process.pid)
        grown = resident_kib(process.pid) - settled
        assert grown < 2 * map_kib, f"grew {grown} KiB over 10 runs of a {map_kib} KiB map"


@pytest.mark.slow
def test_a_killed_broker_takes_its_cleaner_worker_along(tmp_path: Path) -> None:
    broker = ServeProcess(tmp_path / "data", "--set", "log.cleaner.backoff.ms=50")
    try:
        compacted = {"cleanup.policy": "compact", "segment.bytes": str(1024 * 1024)}
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("compacted", 1, compacted)])
        with Producer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0) as producer:
            for number in range(12):  # a few segments, so the cleaner has a run to do
                value = b"v" * (300 * 1024)
                producer.send("compacted", value, key=b"key-%d" % (number % 3)).result(30)
        (worker,) = await_workers(broker.process.pid, 1)
    finally:
        broker.stop(signal.SIGKILL)
    await_dead(worker)


def test_the_io_limit_holds_across_runs_shorter_than_its_check_interval(
    tmp_path: Path, process: CleanerProcess
) -> None:
    with open_log(tmp_path / "a-0", compact_config()) as log:
        _dirty(log)
        size = sum(segment.size for segment in log.segments.non_active())
        rate = size  # bytes a second: each run moves more than that
        task = plan(log, CleanerConfig(max_io_bytes_per_second=rate))
        process.start()
        first = process.clean(task, lambda: False)  # quicker than the 300 ms check, when quiet
        delete_leftovers(log.dir)
        time.sleep(CHECK_INTERVAL_S + 0.05)
        second = process.clean(task, lambda: False)  # its first I/O checks the rate
        delete_leftovers(log.dir)
    # The worker's throttler outlives a run, so the second run's first check pays for whatever
    # of the first run no check has paid for yet: by the second run's end, the first run's reads
    # (a part of its I/O) have taken at least their time at the limit, however quick the run and
    # whether or not it was throttled itself (a slow worker on a loaded machine checks, or needs
    # no throttling). Timed in the worker (the same monotonic clock), from the first run's start
    # (the throttler was made just before it; the slack covers the niced worker being preempted
    # in between), not from the worker's start-up. A throttler made per run ends ~0.4 s in.
    first_read_bytes = first.stats.map_bytes_read + first.stats.bytes_read
    assert first_read_bytes > rate
    elapsed_s = second.stats.end_s - first.stats.start_s
    assert elapsed_s >= first_read_bytes / rate - 0.5, (elapsed_s, first.stats, second.stats)
