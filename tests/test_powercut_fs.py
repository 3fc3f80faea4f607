"""The power-cut file system keeps exactly what POSIX says survives a power cut: file content
as of its last fsync, directory entries as of their directory's last fsync."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import mounted, powercut_fs  # noqa: F401


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_content_survives_up_to_the_last_fsync(fs: PowerCutFS) -> None:
    path = fs.mount / "a"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 5000)
    os.fsync(fd)
    os.write(fd, b"y" * 100)
    os.pwrite(fd, b"z", 0)
    fsync_dir(fs.mount)
    fs.cut()
    assert path.read_bytes() == b"x" * 5000
    with pytest.raises(OSError):
        os.write(fd, b"after the cut")  # the old mount is gone, not the new one written


def test_fdatasync_counts_as_fsync_and_truncation_waits_for_it(fs: PowerCutFS) -> None:
    path = fs.mount / "a"
    write_file(path, b"a" * 10_000, sync=True)
    fsync_dir(fs.mount)
    fd = os.open(path, os.O_RDWR)
    os.ftruncate(fd, 100)
    fs.cut()
    assert path.read_bytes() == b"a" * 10_000
    fd = os.open(path, os.O_RDWR)
    os.ftruncate(fd, 100)
    os.ftruncate(fd, 9000)
    os.fdatasync(fd)
    os.close(fd)
    fs.cut()
    assert path.read_bytes() == b"a" * 100 + bytes(8900)


def test_new_names_need_their_directory_fsynced(fs: PowerCutFS) -> None:
    (fs.mount / "d").mkdir()
    write_file(fs.mount / "d" / "synced-file-unsynced-name", b"1", sync=True)
    write_file(fs.mount / "kept", b"2", sync=True)
    write_file(fs.mount / "unsynced-content", b"3", sync=False)
    fsync_dir(fs.mount)
    write_file(fs.mount / "late", b"4", sync=True)
    fs.cut()
    assert sorted(os.listdir(fs.mount)) == ["d", "kept", "unsynced-content"]
    assert os.listdir(fs.mount / "d") == []
    assert (fs.mount / "kept").read_bytes() == b"2"
    assert (fs.mount / "unsynced-content").read_bytes() == b""


def test_renames_and_unlinks_need_their_directory_fsynced(fs: PowerCutFS) -> None:
    write_file(fs.mount / "a.tmp", b"new", sync=True)
    write_file(fs.mount / "a", b"old", sync=True)
    write_file(fs.mount / "gone", b"g", sync=True)
    fsync_dir(fs.mount)
    os.replace(fs.mount / "a.tmp", fs.mount / "a")
    os.unlink(fs.mount / "gone")
    fs.cut()
    assert sorted(os.listdir(fs.mount)) == ["a", "a.tmp", "gone"]
    assert (fs.mount / "a").read_bytes() == b"old"
    os.replace(fs.mount / "a.tmp", fs.mount / "a")
    os.unlink(fs.mount / "gone")
    fsync_dir(fs.mount)
    fs.cut()
    assert os.listdir(fs.mount) == ["a"]
    assert (fs.mount / "a").read_bytes() == b"new"


def test_a_renamed_directory_keeps_its_durable_entries(fs: PowerCutFS) -> None:
    (fs.mount / "p.tmp").mkdir()
    write_file(fs.mount / "p.tmp" / "f", b"f", sync=True)
    fsync_dir(fs.mount / "p.tmp")
    os.rename(fs.mount / "p.tmp", fs.mount / "p")
    fsync_dir(fs.mount)
    fs.cut()
    assert (fs.mount / "p" / "f").read_bytes() == b"f"


def test_shared_map_writes_survive_msync_or_fsync_only(fs: PowerCutFS) -> None:
    path = fs.mount / "index"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 3 * 4096)
    fsync_dir(fs.mount)
    index_map = mmap.mmap(fd, 3 * 4096)
    index_map[0:5] = b"msync"
    index_map.flush()
    index_map[4096:4101] = b"fsync"
    os.fsync(fd)
    index_map[8192:8197] = b"never"
    fs.cut()
    data = path.read_bytes()
    assert (data[0:5], data[4096:4101], data[8192:8197]) == (b"msync", b"fsync", bytes(5))


def test_unsynced_pages_may_be_kept_on_request(fs: PowerCutFS) -> None:
    path = fs.mount / "a"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fsync_dir(fs.mount)
    os.write(fd, b"p" * 4096 * 8)
    fs.cut(keep_unsynced=1.0)
    assert path.read_bytes() == b"p" * 4096 * 8
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, b"q" * 4096 * 64, 0)
    fs.cut(keep_unsynced=0.5, seed=7)
    data = path.read_bytes()
    pages = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    assert set(pages[:8]) == {b"p" * 4096, b"q" * 4096}  # some kept, some not
    assert set(pages[8:]) == {b"q" * 4096, bytes(4096)}  # a hole where a page was not kept
    assert 4096 * 8 < len(data) < 4096 * 64  # kept pages past the durable size extend it


def test_a_clean_stop_loses_nothing(tmp_path: Path) -> None:
    fs = mounted(tmp_path)
    write_file(fs.mount / "unsynced", b"kept", sync=False)
    fs.stop()
    assert (fs.backing / "unsynced").read_bytes() == b"kept"
