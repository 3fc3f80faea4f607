"""Writing a file's fresh pages to disk while it is still being written.

A large file written whole and then fsynced sends all its pages to the disk in one burst. On this
project's reference machine (a VM with a non-preemptible kernel) that burst, and write calls of
several MB, each hold a neighbouring process's wake-ups back (bench/writeback.py: the p99 of a
socket ping-pong beside a nice-19 writer of 50 MB files was 0.35-0.6 ms with 4 MB writes, 0.22-0.32
ms with ``MAX_WRITE_BYTES`` writes, 0.04-0.05 ms alone). Sending each piece to disk before the
next (``sync_file_range`` with wait) brought it to 0.15 ms, for about a third of the writer's own
throughput (405 vs 615 MB/s). For the cleaner beside a broker the gain is smaller
(bench/cleaner.py, docs/operations.md): most of what remains is its CPU time in the kernel.

This is not a durability point: ``sync_file_range`` leaves the file's metadata and the disk's
cache alone, so a writer still fsyncs before relying on the bytes; that fsync then has little left.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

#: The most bytes one write call sends (also the unit that is written back at a time).
MAX_WRITE_BYTES = 256 * 1024

# <linux/fs.h>: wait for earlier writeback of the range, start it, wait for it.
_SYNC_FILE_RANGE_WAIT_BEFORE = 1
_SYNC_FILE_RANGE_WRITE = 2
_SYNC_FILE_RANGE_WAIT_AFTER = 4
_WRITE_AND_WAIT = (
    _SYNC_FILE_RANGE_WAIT_BEFORE | _SYNC_FILE_RANGE_WRITE | _SYNC_FILE_RANGE_WAIT_AFTER
)


def _load_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's ``sync_file_range`` (Linux only; ``os`` has no binding for it on Python 3.11),
    looked up in the symbols the interpreter already has loaded.

    ctypes releases the GIL for the call, so a thread writing back does not hold up the others.
    """
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_sync_file_range = _load_sync_file_range()


def write_back(fd: int, position: int, length: int) -> None:
    """Write the dirty pages of ``fd``'s bytes ``[position, position + length)`` to disk and
    wait for them. Where the system has no ``sync_file_range`` this does nothing (the writer's
    fsync does the work). Raises OSError (EIO, ENOSPC, EBADF...) as the call reports it."""
    if _sync_file_range is None or length <= 0:
        return
    if _sync_file_range(fd, position, length, _WRITE_AND_WAIT) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"sync_file_range of {length} bytes at {position}: {os.strerror(code)}")
