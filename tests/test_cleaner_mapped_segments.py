"""The cleaner reads each segment through one read-only map a run (segment_chunks.py): a
segment cut short under that map kills only the process running the cleaning (SIGBUS), and a
segment already shorter than planned is refused."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest
from cleaner_helpers import compact_config, final_values, plan, write
from log_helpers import open_log, read_all

from odradek.cleaner.cleaned_segment_swap import delete_leftovers
from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import LogCleaningAbortedError
from odradek.storage import log_file_names as names

CONFIG = compact_config(segment_bytes=64 * 1024)


def _write_log(directory: Path) -> None:
    with open_log(directory, CONFIG) as log:
        write(log, [(b"key-%d" % (n % 20), b"v" * 100 + b"%d" % n) for n in range(1500)])
        log.roll()
        log.flush()


def _clean_with_the_first_segment_cut(task: CleaningTask) -> None:
    """Clean, cutting the first segment to nothing once the first pass has mapped it (in a
    child process: the second pass then reads past the file's end through the map)."""
    rewrite = Cleaner._clean_segments

    def cut_first(cleaner: Cleaner, group: list, offset_map: object) -> None:
        os.truncate(names.log_file(task.directory, task.segments[0].base_offset), 0)
        rewrite(cleaner, group, offset_map)

    Cleaner._clean_segments = cut_first
    Cleaner(task).clean()


def test_a_segment_cut_under_the_map_kills_only_the_cleaning_process(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    _write_log(directory)
    with open_log(directory, CONFIG) as log:
        task = plan(log)
    # the first segment is dirty: pass 1 maps it, and pass 2 reads it through that map
    assert task.first_dirty_offset == 0 and len(task.segments) >= 2
    child = multiprocessing.get_context("spawn").Process(
        target=_clean_with_the_first_segment_cut, args=(task,)
    )
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGBUS
    assert not list(directory.glob("*.swap"))  # the run never finished a group
    delete_leftovers(directory)  # what the broker does after a failed run
    assert not list(directory.glob("*.cleaned"))


def test_a_segment_shorter_than_planned_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    _write_log(directory)
    with open_log(directory, CONFIG) as log:
        before = read_all(log)
        task = plan(log)
        path = names.log_file(directory, task.segments[1].base_offset)
        original = path.read_bytes()
        os.truncate(path, task.segments[1].size - 1)
        with pytest.raises(LogCleaningAbortedError, match="shrank"):
            Cleaner(task).clean()
        assert not list(directory.glob("*.cleaned")) and not list(directory.glob("*.swap"))
        path.write_bytes(original)
        assert final_values(read_all(log)) == final_values(before)
