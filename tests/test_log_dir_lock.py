"""LogDirLock: one broker per log directory, and the second one is told who holds it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from odradek.errors import LogDirLockedError
from odradek.storage.log_dir_lock import LOCK_FILE_NAME, LogDirLock


def test_acquire_writes_the_holder_into_the_lock_file(tmp_path):
    lock = LogDirLock.acquire(tmp_path)
    try:
        content = (tmp_path / LOCK_FILE_NAME).read_text()
        assert f"pid {os.getpid()}" in content and socket.gethostname() in content
    finally:
        lock.release()


def test_second_acquire_fails_fast_naming_the_holder(tmp_path):
    lock = LogDirLock.acquire(tmp_path)
    try:
        with pytest.raises(LogDirLockedError, match=f"{tmp_path}.*pid {os.getpid()}"):
            LogDirLock.acquire(tmp_path)
    finally:
        lock.release()


def test_released_lock_can_be_taken_again(tmp_path):
    LogDirLock.acquire(tmp_path).release()
    lock = LogDirLock.acquire(tmp_path)
    assert lock.is_held
    lock.release()
    lock.release()
    assert not lock.is_held


def test_lock_of_a_dead_process_is_free(tmp_path):
    """A crashed broker leaves the file behind but never the lock."""
    code = (
        "import sys; from pathlib import Path; "
        "from odradek.storage.log_dir_lock import LogDirLock; "
        "LogDirLock.acquire(Path(sys.argv[1])); print('locked', flush=True)"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True)
    assert result.stdout == b"locked\n", result.stderr
    lock = LogDirLock.acquire(tmp_path)
    assert f"pid {os.getpid()}" in (tmp_path / LOCK_FILE_NAME).read_text()
    lock.release()


def test_lock_held_by_another_process_is_refused(tmp_path):
    code = (
        "import sys; from pathlib import Path; "
        "from odradek.storage.log_dir_lock import LogDirLock; "
        "LogDirLock.acquire(Path(sys.argv[1])); print('locked', flush=True); sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        with pytest.raises(LogDirLockedError, match=f"pid {holder.pid} on host"):
            LogDirLock.acquire(tmp_path)
    finally:
        holder.stdin.close()
        holder.wait()
