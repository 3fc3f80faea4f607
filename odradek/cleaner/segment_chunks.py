"""A segment's ``.log`` as the cleaner reads it: mapped once, handed out in chunks of batches.

Both passes of a run read the dirty segments, so the cleaner maps each segment it reads once,
read-only, and both read the same pages in place: no copy into the process, and the page
tables are set up once (in the first pass). The offset map takes a chunk at a time (the
throttler counts them), so a chunk must start where a batch does; the map reports how far it
got and the next chunk starts there. The ends are those of :meth:`FileRecords.batches`: a
segment ends where fewer bytes than a batch header are left, at a batch length shorter than a
header, or at a batch that runs past its end.

A mapped file that shrinks under its map kills the reader (SIGBUS) at the first byte read past
the new end. No segment a run reads shrinks while it runs: segments below the active one only
change by being deleted (the map keeps a deleted file's pages), and truncating one needs the
cleaner paused on the log, which first stops the run (see log_cleaner.py). The cleaning
process is killed with the run, so an unforeseen truncation fails that run, not the broker.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from odradek.cleaner.batch_keys import Buffer
from odradek.record.record_batch import BATCH_LENGTH_OFFSET, HEADER_SIZE, LOG_OVERHEAD

CHUNK_BYTES = 1024 * 1024


class SegmentShrankError(Exception):
    """A segment's ``.log`` is shorter than the run planned to read."""


def map_log(path: Path, size: int) -> Buffer:
    """The first ``size`` bytes of the ``.log`` at ``path``, mapped read-only (``b""`` when
    ``size`` is 0). FileNotFoundError when the file is gone, SegmentShrankError when it is
    shorter than ``size``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        length = os.fstat(fd).st_size
        if length < size:
            raise SegmentShrankError(f"{path} has {length} bytes, not {size}")
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
    finally:
        os.close(fd)


def chunk_end(data: Buffer, position: int, chunk_bytes: int = CHUNK_BYTES) -> int | None:
    """Where the chunk of ``data`` from ``position`` ends: past the whole batch that starts
    there, past ``chunk_bytes`` when there is room, at most at the end; None where the
    segment ends."""
    size = len(data)
    if size - position < HEADER_SIZE:
        return None
    length_field = data[position + BATCH_LENGTH_OFFSET : position + BATCH_LENGTH_OFFSET + 4]
    batch_size = int.from_bytes(length_field, "big", signed=True) + LOG_OVERHEAD
    if batch_size < HEADER_SIZE or position + batch_size > size:
        return None
    return min(size, position + max(batch_size, chunk_bytes))
