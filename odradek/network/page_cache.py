"""Whether a file range is in the page cache, asked without waiting for the disk."""

from __future__ import annotations

import os

PROBE_STRIDE_BYTES = 64 * 1024
"""Distance between probed bytes: half of Linux's default readahead window, so a range read
or evicted a window at a time is seen whole."""

_PROBE_BUFFER = [bytearray(1)]


def is_resident(fd: int, position: int, length: int) -> bool:
    """True when every probed byte of ``fd[position:position + length]`` is in the page cache.

    One byte every :data:`PROBE_STRIDE_BYTES`, and the last, is read with ``RWF_NOWAIT``, which
    fails with EAGAIN instead of reading the disk (about a microsecond a probe). A sendfile of a
    resident range cannot block on the disk; a cold one belongs on a thread. Where the kernel
    or filesystem cannot answer, the range counts as cold: a thread is slower but never stalls.
    """
    if length <= 0:
        return True
    last = position + length - 1
    try:
        for offset in (*range(position, last, PROBE_STRIDE_BYTES), last):
            os.preadv(fd, _PROBE_BUFFER, offset, os.RWF_NOWAIT)
    except OSError:
        return False
    return True
