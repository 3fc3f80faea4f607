"""FileRecords.append in pieces, written through to disk for the cleaner (storage/writeback.py)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from odradek.storage import file_records as file_records_module
from odradek.storage import writeback
from odradek.storage.file_records import FileRecords
from odradek.storage.writeback import MAX_WRITE_BYTES, write_back

Event = tuple[str, int, int]


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    """Every pwrite and write-back FileRecords makes, in order, as (kind, position, length)."""
    seen: list[Event] = []
    real_pwrite, real_write_back = os.pwrite, file_records_module.write_back

    def pwrite(fd: int, data, position: int) -> int:
        written = real_pwrite(fd, data, position)
        seen.append(("write", position, written))
        return written

    def recorded_write_back(fd: int, position: int, length: int) -> None:
        seen.append(("back", position, length))
        real_write_back(fd, position, length)

    monkeypatch.setattr(os, "pwrite", pwrite)
    monkeypatch.setattr(file_records_module, "write_back", recorded_write_back)
    return seen


def _open(tmp_path: Path) -> FileRecords:
    return FileRecords.open(tmp_path / "00000000000000000000.log")


def test_a_large_append_goes_in_pieces_of_at_most_max_write_bytes(
    tmp_path: Path, events: list[Event]
) -> None:
    data = os.urandom(2 * MAX_WRITE_BYTES + 1000)
    records = _open(tmp_path)
    records.append(b"head")
    assert records.append(data) == len(data)
    assert events[1:] == [
        ("write", 4, MAX_WRITE_BYTES),
        ("write", 4 + MAX_WRITE_BYTES, MAX_WRITE_BYTES),
        ("write", 4 + 2 * MAX_WRITE_BYTES, 1000),
    ]
    assert records.read(0, 10 * MAX_WRITE_BYTES) == b"head" + data
    records.close()


def test_write_through_sends_each_piece_to_disk_before_writing_the_next(
    tmp_path: Path, events: list[Event]
) -> None:
    data = os.urandom(MAX_WRITE_BYTES + 10)
    records = _open(tmp_path)
    records.append(b"x" * 7)
    records.append(data, write_through=True)
    records.append(b"small", write_through=True)
    assert events == [
        ("write", 0, 7),
        ("write", 7, MAX_WRITE_BYTES),
        ("back", 7, MAX_WRITE_BYTES),
        ("write", 7 + MAX_WRITE_BYTES, 10),
        ("back", 7 + MAX_WRITE_BYTES, 10),
        ("write", 17 + MAX_WRITE_BYTES, 5),
        ("back", 17 + MAX_WRITE_BYTES, 5),
    ]
    assert records.size_in_bytes == 22 + MAX_WRITE_BYTES
    records.close()


def test_a_failed_write_back_cuts_the_append_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _open(tmp_path)
    records.append(b"acknowledged")

    def failing(fd: int, position: int, length: int) -> None:
        if position >= 12 + MAX_WRITE_BYTES:  # the second piece's write-back: the disk fails
            raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(file_records_module, "write_back", failing)
    with pytest.raises(OSError) as raised:
        records.append(os.urandom(2 * MAX_WRITE_BYTES), write_through=True)
    assert raised.value.errno == errno.EIO
    assert records.size_in_bytes == 12
    assert os.path.getsize(records.path) == 12
    records.append(b"+next")
    assert records.read(0, 100) == b"acknowledged+next"
    records.close()


def test_write_back_reports_errors_and_does_nothing_without_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"z" * 10_000)
    fd = os.open(path, os.O_RDWR)
    write_back(fd, 0, 10_000)  # a real file: written and waited for, no error
    os.close(fd)
    with pytest.raises(OSError) as raised:
        write_back(fd, 0, 10_000)
    assert raised.value.errno == errno.EBADF
    monkeypatch.setattr(writeback, "_sync_file_range", None)  # a system without the call
    write_back(fd, 0, 10_000)
