"""LogCleaner: cleaner threads running their cleanings in a worker process each, and the
controls the LogManager uses (design §11, 12)."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cleaner_helpers import compact_config, latest_records, write
from log_helpers import open_log, read_all
from log_manager_helpers import wait_until
from process_helpers import await_workers, state, worker_pids

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.cleaner_offset_checkpoints import CleanerOffsetCheckpoints
from odradek.cleaner.log_cleaner import LogCleaner
from odradek.cleaner.log_cleaner_manager import MAX_CLEANING_ATTEMPTS, paused
from odradek.clock import MockClock
from odradek.server.metrics.cleaner_collector import CleanerCollector
from odradek.storage import log_file_names as names
from odradek.storage.unified_log import UnifiedLog

FAST = CleanerConfig(dedupe_buffer_size=1024 * 1024, backoff_ms=20)


@contextmanager
def running(cleaner: LogCleaner) -> Iterator[LogCleaner]:
    cleaner.startup()
    try:
        yield cleaner
    finally:
        cleaner.shutdown()


def _dirty(log: UnifiedLog, rounds: int = 5, keys: int = 8) -> list:
    write(log, [(b"key-%d" % (n % keys), b"value-%d" % n) for n in range(rounds * keys)])
    log.roll()
    return read_all(log)


@contextmanager
def _blocking_segment(log: UnifiedLog) -> Iterator[None]:
    """Make the second segment's file a FIFO while inside: a cleaning run opening it blocks
    (the live log keeps reading the real file through its open descriptor)."""
    path = names.log_file(log.dir, log.segments.non_active()[1].base_offset)
    aside = path.with_name("aside")
    path.rename(aside)
    os.mkfifo(path)
    try:
        yield
    finally:
        fifo = path.with_name("fifo")
        path.rename(fifo)
        aside.rename(path)
        _release_readers(fifo)
        fifo.unlink()


def _release_readers(fifo: Path) -> None:
    """Let a run blocked opening ``fifo`` go on (it finds the file empty and stops)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # ENXIO: no run is blocked on it
        pass


def _stuck_run(log: UnifiedLog, cleaner: LogCleaner) -> None:
    """Start ``cleaner`` on ``log`` with a run that maps the last segment, writes the first
    group's .cleaned and then blocks on the second segment; wait until it does."""
    first_dirty = log.segments.non_active()[-1].base_offset
    CleanerOffsetCheckpoints(lambda: [log]).update_cleaner_offsets(
        {log.topic_partition: first_dirty}
    )
    cleaner.startup()
    cleaned = names.log_file(log.dir, 0, names.CLEANED_FILE_SUFFIX)
    deadline = time.monotonic() + 20
    while not cleaned.exists():
        assert time.monotonic() < deadline, "no cleaning run started"
        time.sleep(0.01)


def test_cleans_dirty_logs_and_checkpoints_the_first_dirty_offset(tmp_path: Path) -> None:
    with (
        open_log(tmp_path / "a-0", compact_config()) as a,
        open_log(tmp_path / "b-0", compact_config()) as b,
    ):
        before = {a: _dirty(a), b: _dirty(b, rounds=8)}
        with running(LogCleaner(FAST, lambda: [a, b])) as cleaner:
            for log in (a, b):
                assert cleaner.await_cleaned(log.topic_partition, log.log_end_offset, 20)
                assert read_all(log) == latest_records(before[log])
            (report,) = cleaner.last_reports  # one thread: its last run
            metrics = cleaner.metrics()
            deadline = time.monotonic() + 30
            while cleaner.metrics().max_dirty_percent > 0:  # until a look finds both clean
                assert time.monotonic() < deadline
                time.sleep(0.01)
        assert report.topic_partition in (a.topic_partition, b.topic_partition)
        cleaned = a if report.topic_partition == a.topic_partition else b
        assert (report.records_read, report.records_kept) == (len(before[cleaned]), 8)
        assert report.dirty_ratio_before == 1.0 and report.dirty_ratio_after == 0.0
        assert 0 < report.bytes_written < report.bytes_read
        assert metrics.cleaner_recopy_percent == pytest.approx(100 * report.recopy_ratio)
        assert metrics.max_clean_time_secs == report.seconds > 0
        assert 0 < metrics.max_buffer_utilization_percent < 1
        assert metrics.dead_thread_count == 0 and metrics.uncleanable_partitions_count == 0


def test_abort_and_pause_kills_the_run_and_keeps_the_cleaner_off(tmp_path: Path) -> None:
    config = compact_config(min_cleanable_dirty_ratio=0.01, segment_bytes=4096)
    with open_log(tmp_path / "a-0", config) as log:
        for _ in range(3):
            _dirty(log, rounds=2)
        before = read_all(log)
        cleaner = LogCleaner(FAST, lambda: [log])
        tp = log.topic_partition
        try:
            with _blocking_segment(log):
                _stuck_run(log, cleaner)
                started = time.monotonic()
                cleaner.abort_and_pause_cleaning(tp)  # returns once the child is killed
                assert time.monotonic() - started < 5
                assert cleaner.manager.cleaning_state(tp) == paused(1)
                assert not [p for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
            assert read_all(log) == before
            time.sleep(0.1)
            assert read_all(log) == before  # paused: the cleaner leaves it alone
            cleaner.resume_cleaning([tp])
            assert cleaner.await_cleaned(tp, log.active_segment.base_offset, 20)
            assert read_all(log)[-1] == before[-1]
        finally:
            cleaner.shutdown()


def test_shutdown_aborts_a_run_in_progress(tmp_path: Path) -> None:
    config = compact_config(min_cleanable_dirty_ratio=0.01, segment_bytes=4096)
    with open_log(tmp_path / "a-0", config) as log:
        for _ in range(3):
            _dirty(log, rounds=2)
        before = read_all(log)
        cleaner = LogCleaner(FAST, lambda: [log])
        with _blocking_segment(log):
            _stuck_run(log, cleaner)
            started = time.monotonic()
            cleaner.shutdown()
            assert time.monotonic() - started < 5
        assert read_all(log) == before
        assert cleaner.manager.cleaning_state(log.topic_partition) is None


def test_a_thread_cleans_in_one_worker_process_stopped_at_shutdown(tmp_path: Path) -> None:
    with open_log(tmp_path / "a-0", compact_config()) as log:
        cleaner = LogCleaner(FAST, lambda: [log])
        with running(cleaner):
            workers = []
            for _ in range(2):
                # Paused while written: a run that started mid-write would stop at the then
                # active segment and leave a tail too small to be worth cleaning again.
                cleaner.abort_and_pause_cleaning(log.topic_partition)
                before = _dirty(log)
                cleaner.resume_cleaning([log.topic_partition])
                assert cleaner.await_cleaned(log.topic_partition, log.log_end_offset, 20)
                assert read_all(log) == latest_records(before)
                workers += await_workers(os.getpid(), 1)
            assert workers[0] == workers[1]  # the same worker cleaned both times
        assert state(workers[0]) is None  # exited and waited for


def test_a_failed_run_marks_the_partition_uncleanable(tmp_path: Path) -> None:
    with (
        open_log(tmp_path / "a-0", compact_config()) as bad,
        open_log(tmp_path / "b-0", compact_config()) as good,
    ):
        _dirty(bad, rounds=8)
        path = names.log_file(bad.dir, 0)
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF  # corrupt the first segment's last batch
        path.write_bytes(bytes(data))
        good_before = _dirty(good)
        with running(LogCleaner(FAST, lambda: [bad, good])) as cleaner:
            assert cleaner.await_cleaned(good.topic_partition, good.log_end_offset, 20)
            assert read_all(good) == latest_records(good_before)
            wait_until(lambda: cleaner.metrics().uncleanable_partitions_count == 1)
            [(_, tp, reason)] = cleaner.metrics().uncleanable_partitions
            assert tp == bad.topic_partition
            assert "3 cleaning runs failed in a row" in reason and "CorruptRecordError" in reason
            assert cleaner.metrics().worker_failures == 0  # the worker reported it and lives
            assert cleaner.manager.is_uncleanable_partition(bad)
            assert cleaner.manager.first_dirty_offset(bad.topic_partition) == -1
        assert not [p for p in bad.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]


def _compacted_dirty_log(log: UnifiedLog) -> list:
    for _ in range(3):
        _dirty(log, rounds=2)
    return read_all(log)


def test_a_killed_worker_is_replaced_and_the_partition_compacted(tmp_path: Path) -> None:
    config = compact_config(min_cleanable_dirty_ratio=0.01, segment_bytes=4096)
    with open_log(tmp_path / "a-0", config) as log:
        before = _compacted_dirty_log(log)
        tp = log.topic_partition
        cleaner = LogCleaner(FAST, lambda: [log])
        try:
            with _blocking_segment(log):
                _stuck_run(log, cleaner)  # the run is in the worker, blocked mid-way
                [worker] = await_workers(os.getpid(), 1)
                os.kill(worker, signal.SIGKILL)
                wait_until(lambda: cleaner.metrics().worker_failures == 1)
            assert cleaner.await_cleaned(tp, log.active_segment.base_offset, 20)
            after = read_all(log)
            assert len(after) < len(before)
            assert {r.key: r.value for r in after} == {r.key: r.value for r in before}
            [replacement] = await_workers(os.getpid(), 1)
            assert replacement != worker and state(worker) is None  # replaced, and reaped
            metrics = cleaner.metrics()
            assert metrics.worker_failures == 1 and metrics.uncleanable_partitions_count == 0
            assert cleaner.manager.failed_attempts(tp) == 0  # the retry completed
        finally:
            cleaner.shutdown()


def test_a_partition_whose_worker_keeps_dying_is_marked_uncleanable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = compact_config(min_cleanable_dirty_ratio=0.01, segment_bytes=4096)
    with open_log(tmp_path / "a-0", config) as log:
        before = _compacted_dirty_log(log)
        tp = log.topic_partition
        cleaner = LogCleaner(FAST, lambda: [log])
        killed: list[int] = []
        try:
            with caplog.at_level(logging.WARNING), _blocking_segment(log):
                _stuck_run(log, cleaner)
                deadline = time.monotonic() + 30
                while len(killed) < MAX_CLEANING_ATTEMPTS:
                    assert time.monotonic() < deadline, f"{len(killed)} workers killed"
                    for worker in set(worker_pids(os.getpid())) - set(killed):
                        os.kill(worker, signal.SIGKILL)
                        killed.append(worker)
                    time.sleep(0.01)
                wait_until(lambda: cleaner.metrics().uncleanable_partitions_count == 1)
                time.sleep(0.2)
                assert worker_pids(os.getpid()) == []  # given up: no new worker
            metrics = cleaner.metrics()
            assert metrics.worker_failures == MAX_CLEANING_ATTEMPTS
            [(log_dir, uncleanable, reason)] = metrics.uncleanable_partitions
            assert (log_dir, uncleanable) == (tmp_path, tp)
            assert f"the cleaner worker process {killed[-1]} died (killed by SIGKILL)" in reason
            samples = [
                sample
                for family in CleanerCollector(cleaner).collect()
                for sample in family.samples
                if sample.name == "odradek_cleaner_uncleanable_partition"
            ]
            assert [s.labels["reason"] for s in samples] == [reason]
            assert [s.labels["topic"] for s in samples] == [tp.topic]
            assert f"[{tp}] marked uncleanable" in caplog.text
            assert caplog.text.count("starting a new worker") == MAX_CLEANING_ATTEMPTS
            assert read_all(log) == before
        finally:
            cleaner.shutdown()


@contextmanager
def looks_for_work(backoff_ms: int) -> Iterator[list[float]]:
    """An idle cleaner running; the times it looked for a log to clean, as they come."""
    cleaner = LogCleaner(CleanerConfig(backoff_ms=backoff_ms), lambda: [])
    grab = cleaner.manager.grab_filthiest_compacted_log
    calls: list[float] = []

    def counting_grab():
        calls.append(time.monotonic())
        return grab()

    cleaner.manager.grab_filthiest_compacted_log = counting_grab
    with running(cleaner):
        yield calls


def test_backs_off_when_there_is_nothing_to_clean() -> None:
    # Waits for the cleaner's looks, not for a time a loaded machine may not give its thread;
    # the back-off is the least time between two looks, which load can only lengthen.
    with looks_for_work(backoff_ms=10_000) as calls:
        wait_until(lambda: len(calls) >= 1)
        time.sleep(0.5)
        assert len(calls) == 1
    with looks_for_work(backoff_ms=50) as calls:
        wait_until(lambda: len(calls) >= 6)
        gaps = [later - earlier for earlier, later in itertools.pairwise(calls)]
        assert min(gaps) >= 0.05 * 0.9, gaps  # the thread's wait may wake a hair early


def test_cleaner_threads_apply_retention_to_compacted_logs(tmp_path: Path) -> None:
    clock = MockClock()
    config = compact_config(cleanup_policy=("compact", "delete"), retention_ms=60_000)
    with open_log(tmp_path / "a-0", config, clock=clock) as log:
        write(log, [(b"k%d" % n, b"v") for n in range(40)])
        segments = log.number_of_segments
        assert segments > 2
        clock.sleep(10 * 60_000)
        for segment in log.segments.non_active():
            segment.set_last_modified(clock.milliseconds() - 10 * 60_000)
        with running(LogCleaner(FAST, lambda: [log])):
            deadline = time.monotonic() + 60
            while log.number_of_segments > 1 and time.monotonic() < deadline:
                time.sleep(0.02)
        assert log.number_of_segments == 1


def test_a_disabled_cleaner_starts_no_thread(tmp_path: Path) -> None:
    with open_log(tmp_path / "a-0", compact_config()) as log:
        before = _dirty(log)
        with running(LogCleaner(CleanerConfig(enable_cleaner=False), lambda: [log])) as cleaner:
            time.sleep(0.1)
            assert cleaner.metrics().dead_thread_count == 0
            assert not any(t.name.startswith("kafka-log-cleaner") for t in threading.enumerate())
        assert read_all(log) == before
