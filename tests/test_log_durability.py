"""UnifiedLog's durability points without a power-cut file system: which directory fsyncs happen
when, and that a flush never takes an fsync in progress for a completed one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from log_helpers import batch, open_log

from odradek.config.log_config import LogConfig
from odradek.errors import KafkaStorageError
from odradek.storage import local_log, log_loader
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=1024)


@pytest.fixture
def directory_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories UnifiedLog fsyncs, in order (the fsyncs still run)."""
    synced: list[Path] = []
    original = log_loader.fsync_directory

    def recording(directory: Path) -> None:
        synced.append(Path(directory))
        original(directory)

    monkeypatch.setattr(log_loader, "fsync_directory", recording)  # the partition directory's
    monkeypatch.setattr(local_log, "fsync_directory", recording)  # the segments'
    return synced


def test_creating_a_partition_directory_syncs_its_log_directory(
    tmp_path: Path, directory_fsyncs: list[Path]
) -> None:
    with open_log(tmp_path / "t-0", CONFIG):
        assert directory_fsyncs == [tmp_path]


def test_the_flush_after_a_roll_syncs_the_partition_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The roll's own background task may sync the directory too, at any time: what is
    counted after the first flush is what the test's thread, which flushes, synced."""
    synced: list[tuple[int, Path]] = []
    original = log_loader.fsync_directory

    def recording(directory: Path) -> None:
        synced.append((threading.get_ident(), Path(directory)))
        original(directory)

    monkeypatch.setattr(local_log, "fsync_directory", recording)
    with open_log(tmp_path / "t-0", CONFIG) as log:
        log.flush()  # the first flush covers the files loading created
        synced.clear()
        while log.number_of_segments < 2:
            log.append(batch(5, value_size=50))
        log.flush()
        assert [path for _, path in synced].count(tmp_path / "t-0") >= 1
        by_this_thread = sum(1 for thread, _ in synced if thread == threading.get_ident())
        log.append(batch(1))
        log.flush()  # nothing new in the directory: no fsync of it
        assert sum(1 for thread, _ in synced if thread == threading.get_ident()) == by_this_thread


def test_a_flush_waits_for_a_directory_fsync_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the first flush dropped the 'unsynced' flag before its fsync, so a second
    flush arriving meanwhile returned (and acks=all answered) before the name was durable."""
    started, release = threading.Event(), threading.Event()
    original = log_loader.fsync_directory

    def slow(directory: Path) -> None:
        started.set()
        release.wait(10)
        original(directory)

    # A scheduler never started: the flush the roll schedules does not sync first.
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, Scheduler())
    try:
        log.flush()
        while log.number_of_segments < 2:
            log.append(batch(5, value_size=50))
        monkeypatch.setattr(local_log, "fsync_directory", slow)
        first = threading.Thread(target=log.flush)
        first.start()
        assert started.wait(10)
        second = threading.Thread(target=log.flush)
        second.start()
        second.join(0.3)
        assert second.is_alive(), "a flush returned while the directory fsync was running"
        release.set()
        first.join(10)
        second.join(10)
        assert not second.is_alive()
    finally:
        release.set()
        log.close()


def test_a_flush_after_the_partition_directory_was_renamed_for_deletion_is_harmless(
    tmp_path: Path,
) -> None:
    """A topic deletion renames the directory while a flush a roll scheduled may still run:
    the directory fsync it then owes is moot, not an I/O error taking the log dir offline."""
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, Scheduler())  # the files loading made: unsynced
    try:
        log.append(batch(5, value_size=50))
        (tmp_path / "t-0").rename(tmp_path / "t-0.x-delete")
        log.flush()
        assert log.recovery_point == log.log_end_offset
    finally:
        log.close_handlers()


def test_a_flush_of_a_closed_log_never_claims_records_it_did_not_sync(tmp_path: Path) -> None:
    """A failed log directory's logs are closed while appends and acks=all flushes may still
    be on their way: a flush then fails rather than report unsynced records durable (a
    power-cut test caught a flush returning as if it had synced them)."""
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, Scheduler())
    try:
        log.append(batch(5, value_size=50))
        log.flush()
        synced = log.recovery_point
        log.append(batch(5, value_size=50))
    finally:
        log.close_handlers()
    log.flush(synced)  # nothing above what was synced: nothing to claim
    with pytest.raises(KafkaStorageError, match="closed"):
        log.flush()
    assert log.recovery_point == synced


class RecordingScheduler:
    """Keeps the tasks a UnifiedLog schedules, for the test to run when it chooses."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, object]] = []

    def schedule(self, name: str, function, delay_ms: int = 0, period_ms=None) -> None:
        self.tasks.append((name, function))


def test_the_flush_a_roll_scheduled_does_nothing_once_the_partition_is_being_deleted(
    tmp_path: Path,
) -> None:
    """Regression: a topic deleted right after a roll renamed the partition directory; the
    roll's flush then opened the rolled segment's index under its old path, failed, and took
    the whole log directory offline."""
    scheduler = RecordingScheduler()
    log = UnifiedLog.open(tmp_path / "t-0", CONFIG, scheduler)  # type: ignore[arg-type]
    try:
        while log.number_of_segments < 2:
            log.append(batch(5, value_size=50))
        (tmp_path / "t-0").rename(tmp_path / "t-0.x-delete")
        log.stop_flushes()
        for name, task in scheduler.tasks:
            if name.startswith("flush-"):
                task()  # raised KafkaStorageError (FileNotFoundError) before
    finally:
        log.close_handlers()
