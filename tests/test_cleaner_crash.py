"""Crash safety of the cleaner's swap (design §8, 11): the work is killed after each step of
``.cleaned`` -> ``.swap`` -> ``.log``, and reopening the log (LogLoader) gives a log with no
record lost, none duplicated and every latest value intact."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cleaner_helpers import (
    ONE_BATCH_AT_A_TIME,
    SMALL_SEGMENTS,
    clean_fully,
    final_values,
    latest_records,
    plan,
    write,
    write_idempotent,
)
from log_helpers import open_log, read_all

from odradek.cleaner.cleaned_segment_swap import swap_in
from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaner_process import CleanerProcess
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import LogCleaningError
from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import Record
from odradek.storage import log_file_names as names
from odradek.storage.lazy_index import LazyIndex
from odradek.storage.log_segment import LogSegment
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog

TEMP_SUFFIXES = (names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX, names.DELETED_FILE_SUFFIX)
START_METHOD = "forkserver"


class Crash(BaseException):
    """Stands for the process dying at this point: nothing catches it, nothing cleans up."""


def _crashable_log(
    directory: Path, config: LogConfig = SMALL_SEGMENTS, value_size: int = 8
) -> tuple[UnifiedLog, list[Record]]:
    """A flushed compacted log of small segments (several to a cleaning group), with
    tombstones; its scheduler never runs, as after a crash no delayed delete would."""
    log = UnifiedLog.open(directory, config, Scheduler(), clock=MockClock())
    write(log, [(b"stable-%d" % n, b"s" * value_size) for n in range(3)])
    for round_ in range(6):
        pairs = [(b"key-%d" % n, b"%d" % round_ * value_size) for n in range(5)]
        if round_ % 2:
            pairs.append((b"key-%d" % round_, None))
        write(log, pairs)
        log.roll()
    log.flush()
    return log, read_all(log)


def _producers_log(
    directory: Path,
) -> tuple[UnifiedLog, list[Record], dict[int, tuple[bytes, int]]]:
    """A flushed compacted log of small segments (a batch each: a cleaning group each) whose
    batches come from short-lived idempotent producers, each overwriting the keys of the one
    before: cleaning empties every producer's batch but the last, and keeps their headers.
    The producers' batches and offsets, for retries."""
    log = UnifiedLog.open(directory, SMALL_SEGMENTS, Scheduler(), clock=MockClock())
    sent = {}
    for producer in range(100, 108):
        offset = log.log_end_offset
        pairs = [(b"key-%d" % n, b"%d" % producer * 70) for n in range(6)]
        sent[producer] = (write_idempotent(log, pairs, producer), offset)
    log.roll()
    log.flush()
    return log, read_all(log), sent


def _check_producers_recovered(
    directory: Path, original: list[Record], end_offset: int, sent: dict[int, tuple[bytes, int]]
) -> None:
    """Reopen as after a crash that took the producer snapshots too, so the producer state is
    rebuilt from the batches (empty ones included): what a consumer reads is intact, and every
    producer's retry is answered with its batch's offset, writing nothing."""
    _check_recovered(directory, original, end_offset)
    for snapshot in directory.glob("*.snapshot"):
        snapshot.unlink()
    with open_log(directory, SMALL_SEGMENTS, recovery_point=0) as log:
        for producer, (batch, offset) in sent.items():
            info = log.append(batch)
            assert info.first_offset == offset, f"producer {producer}'s retry: {info}"
        assert log.log_end_offset == end_offset


def _check_recovered(
    directory: Path, original: list[Record], end_offset: int, config: LogConfig = SMALL_SEGMENTS
) -> None:
    """Reopen as after a crash and check what a consumer reads."""
    with open_log(directory, config) as log:
        assert not [p.name for p in log.dir.iterdir() if p.name.endswith(TEMP_SUFFIXES)]
        recovered = read_all(log)
        offsets = [r.offset for r in recovered]
        assert offsets == sorted(set(offsets)), "a record is duplicated or out of order"
        by_offset = {r.offset: r for r in original}
        assert all(by_offset[r.offset] == r for r in recovered), "a record changed"
        assert set(latest_records(original)) <= set(recovered), "a latest record was lost"
        assert final_values(recovered) == final_values(original)
        assert log.log_end_offset == end_offset
        clean_fully(log)  # and the recovered log cleans as any other
        assert read_all(log) == latest_records(original)


# --- the cleaning process killed (SIGKILL) after each of its steps -----------------------------


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _clean_and_die(task: CleaningTask, step: str) -> None:
    """The cleaning process's work, killed at ``step`` (runs in a child process)."""
    append = LogSegment.append
    change_suffixes = LogSegment.change_file_suffixes
    finish_writing = LogSegment.on_become_inactive_segment
    finished: list[int] = []

    def dying_append(
        segment: LogSegment, largest_offset: int, records: bytes, write_through: bool = False
    ) -> None:
        append(segment, largest_offset, records, write_through=write_through)
        if step == "writing .cleaned":
            _die()

    def dying_rename(segment: LogSegment, old: str, new: str) -> None:
        if step == "before .swap" and new == names.SWAP_FILE_SUFFIX:
            _die()
        change_suffixes(segment, old, new)
        if step == "after .swap" and new == names.SWAP_FILE_SUFFIX:
            _die()

    def dying_finish(segment: LogSegment) -> None:
        finished.append(segment.base_offset)
        if step == "writing the second group" and len(finished) == 2:
            _die()
        finish_writing(segment)

    LogSegment.append = dying_append
    LogSegment.change_file_suffixes = dying_rename
    LogSegment.on_become_inactive_segment = dying_finish
    Cleaner(task).clean()


@pytest.mark.parametrize(
    "step", ["writing .cleaned", "before .swap", "after .swap", "writing the second group"]
)
def test_cleaning_process_killed_at_each_step(tmp_path: Path, step: str) -> None:
    directory = tmp_path / "t-0"
    log, original = _crashable_log(directory)
    task = plan(log, ONE_BATCH_AT_A_TIME)
    assert len(task.segments) >= 4
    context = multiprocessing.get_context(START_METHOD)
    child = context.Process(target=_clean_and_die, args=(task, step))
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    left = sorted(
        p.name.split(".", 1)[1] for p in directory.iterdir() if p.name.endswith(TEMP_SUFFIXES)
    )
    if step == "after .swap":
        assert left == ["index.swap", "log.swap", "timeindex.swap"]
    elif step == "writing the second group":
        assert "log.swap" in left and "log.cleaned" in left
    else:
        assert "log.cleaned" in left and "log.swap" not in left
    _check_recovered(directory, original, log.log_end_offset)


@pytest.mark.parametrize("step", ["writing .cleaned", "after .swap", "writing the second group"])
def test_cleaning_process_killed_with_empty_producer_batches_written(
    tmp_path: Path, step: str
) -> None:
    """The cleaning process killed after writing empty batches (the headers of superseded
    producers' batches): the log recovers, and the producers' state rebuilt from it still
    answers their retries as duplicates."""
    directory = tmp_path / "t-0"
    log, original, sent = _producers_log(directory)
    task = plan(log, ONE_BATCH_AT_A_TIME)
    assert task.producer_last_offsets == {offset + 5 for _, offset in sent.values()}
    context = multiprocessing.get_context(START_METHOD)
    child = context.Process(target=_clean_and_die, args=(task, step))
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    _check_producers_recovered(directory, original, log.log_end_offset, sent)


@pytest.mark.parametrize("renames_done", [0, 1, "all"])
def test_broker_killed_while_swapping_in_empty_producer_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renames_done: int | str
) -> None:
    directory = tmp_path / "t-0"
    log, original, sent = _producers_log(directory)
    result = Cleaner(plan(log)).clean()
    cleaned = names.log_file(directory, result.groups[0][0], names.SWAP_FILE_SUFFIX)
    counts = [b.records_count for b in MemoryRecords(cleaned.read_bytes()).batches()]
    assert counts and counts[0] == 0, "the first producer's batch is kept empty"
    done = {"all": len(result.groups[0]) + 1}.get(renames_done, renames_done)
    _crash_on_call(monkeypatch, LogSegment, "change_file_suffixes", done + 1, lambda *_: True)
    with pytest.raises(Crash):
        swap_in(log, result, lambda: False)
    monkeypatch.undo()
    _check_producers_recovered(directory, original, log.log_end_offset, sent)


def test_cleaning_process_killed_while_writing_is_reported_and_recoverable(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log, original = _crashable_log(directory)
    segments = log.segments.non_active()
    # the run maps only the last segment, then rewrites from the first: it blocks opening the
    # second (a FIFO for now) with the first group's .cleaned half written
    task = plan(log, ONE_BATCH_AT_A_TIME, first_dirty=segments[-1].base_offset)
    second = names.log_file(directory, segments[1].base_offset)
    second.rename(second.with_name("aside"))
    os.mkfifo(second)
    process = CleanerProcess()
    process.start()
    worker = process.pid
    deadline = time.monotonic() + 20
    cleaned = names.log_file(directory, 0, names.CLEANED_FILE_SUFFIX)

    def kill_once_writing() -> bool:
        """Polled while the run goes on: SIGKILL the worker once .cleaned has bytes."""
        assert time.monotonic() < deadline, "the cleaner worker wrote nothing"
        if cleaned.exists() and cleaned.stat().st_size > 0:
            os.kill(worker, signal.SIGKILL)
        return False

    with pytest.raises(LogCleaningError, match="died"):
        process.clean(task, kill_once_writing, poll_interval_s=0.01)
    assert process.pid is None
    second.unlink()
    second.with_name("aside").rename(second)
    _check_recovered(directory, original, log.log_end_offset)


# --- the broker killed while swapping the result in --------------------------------------------


def _crash_on_call(
    monkeypatch: pytest.MonkeyPatch, owner: type, name: str, crash_at: int, when: Callable
) -> None:
    """Make ``owner.name`` raise Crash on its ``crash_at``-th call (from 1) that ``when``
    accepts, before doing anything."""
    original = getattr(owner, name)
    calls = []

    def crashing(self, *args):
        if when(self, *args):
            calls.append(args)
            if len(calls) == crash_at:
                raise Crash
        return original(self, *args)

    monkeypatch.setattr(owner, name, crashing)


@pytest.mark.parametrize("renames_done", [0, 1, "all old", "all"])
def test_broker_killed_while_swapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renames_done: int | str
) -> None:
    directory = tmp_path / "t-0"
    log, original = _crashable_log(directory)
    result = Cleaner(plan(log)).clean()
    group = len(result.groups[0])
    assert group >= 2
    # renames: each old segment of the first group goes .deleted, then the new one drops .swap
    done = {"all old": group, "all": group + 1}.get(renames_done, renames_done)
    _crash_on_call(monkeypatch, LogSegment, "change_file_suffixes", done + 1, lambda *_: True)
    with pytest.raises(Crash):
        swap_in(log, result, lambda: False)
    monkeypatch.undo()
    _check_recovered(directory, original, log.log_end_offset)


def test_broker_killed_between_the_log_and_index_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "t-0"
    log, original = _crashable_log(directory)
    result = Cleaner(plan(log)).clean()

    def swap_index_to_final(index: LazyIndex, new_path: Path) -> bool:
        return index.path.name.endswith(names.SWAP_FILE_SUFFIX)

    _crash_on_call(monkeypatch, LazyIndex, "rename_to", 1, swap_index_to_final)
    with pytest.raises(Crash):
        swap_in(log, result, lambda: False)
    monkeypatch.undo()
    base = result.groups[0][0]
    assert names.log_file(directory, base).exists()
    assert names.offset_index_file(directory, base, names.SWAP_FILE_SUFFIX).exists()
    _check_recovered(directory, original, log.log_end_offset)


def test_broker_killed_before_the_checkpoint(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, original = _crashable_log(directory)
    result = Cleaner(plan(log)).clean()
    swap_in(log, result, lambda: False)
    log.flush()
    # no checkpoint was written: the next cleaning starts again from the log start
    _check_recovered(directory, original, log.log_end_offset)
