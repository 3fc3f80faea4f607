"""Helpers for the power-cut scenarios: the file system fixture's skip rule, abandoning a log
manager whose mount lost power, and reading back what a log holds."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.errors import KafkaStorageError
from odradek.record.memory_records import MemoryRecords
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_manager import LogManager
from odradek.storage.unified_log import UnifiedLog
from tests.powercut_fs import PowerCutFS, fuse_missing_reason

SEED = int(os.environ.get("POWERCUT_SEED", "0"))  # make soak varies it; a failure names it


def require_fuse() -> None:
    """Skip without FUSE (or fail in CI, where .ci/run installs it)."""
    reason = fuse_missing_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"the power-cut file system cannot run: {reason} (.ci/run installs fuse3)")
    pytest.skip(f"the power-cut file system cannot run: {reason}")


def mounted(tmp_path: Path) -> PowerCutFS:
    require_fuse()
    fs = PowerCutFS(tmp_path / "backing", tmp_path / "mnt", tmp_path / "shadow")
    fs.start()
    return fs


@pytest.fixture(name="fs")
def powercut_fs(tmp_path: Path) -> Iterator[PowerCutFS]:
    """The power-cut file system mounted under ``tmp_path`` for one test, stopped after it.
    A test module uses it by importing it (``from tests.powercut_helpers import powercut_fs``)."""
    print(f"POWERCUT_SEED={SEED}")  # shown with a failure, to run it again
    powercut = mounted(tmp_path)
    try:
        yield powercut
    finally:
        powercut.stop()


def abandon(manager: LogManager) -> None:
    """Let go of a manager whose file system lost power: every change it makes fails now, so
    its shutdown only stops its threads and closes its files (its errors are what a dead disk
    gives)."""
    with contextlib.suppress(Exception):
        manager.shutdown()
    for log in list(manager._logs.values()):
        with contextlib.suppress(Exception):
            log.close_handlers()


def log_values(log: UnifiedLog, start: int | None = None) -> list[bytes]:
    """Every record's value from ``start`` (default: the log start) to the log end, checking
    as it goes that the offsets are contiguous and every batch is whole and passes its CRC
    (no garbage served)."""
    values: list[bytes] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
        assert info.records is not None, f"nothing read at {offset} below {log.log_end_offset}"
        data = info.records.read_bytes()
        batches = list(MemoryRecords(data).batches())
        assert batches, f"no whole batch at offset {offset} below {log.log_end_offset}"
        for batch in batches:
            batch.ensure_valid()
            for record in batch.records():
                if record.offset < offset:
                    continue
                assert record.offset == offset, f"offset {record.offset} where {offset} was due"
                values.append(record.value)
                offset += 1
    return values


class CutTimer:
    """Runs ``work`` in a thread until the file system loses power under it."""

    def __init__(self, work: Callable[[threading.Event], None]) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)

    def _run(self, work: Callable[[threading.Event], None]) -> None:
        try:
            work(self.stop)
        except (OSError, KafkaStorageError):
            pass  # the cut: every change fails from then on
        except BaseException as error:
            self.error = error

    def __enter__(self) -> CutTimer:
        self._thread.start()
        return self

    def join(self) -> None:
        """Stop the workload (after the cut it fails anyway) and wait for it."""
        self.stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the workload hung after the power cut"
        if self.error is not None:
            raise AssertionError(f"the workload failed: {self.error!r}") from self.error

    def __exit__(self, *exc: object) -> None:
        self.join()
