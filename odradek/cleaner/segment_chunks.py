"""Reading a segment's ``.log`` for the cleaner in large chunks that start at a batch.

The cleaner hands the offset map a chunk at a time (batch_scan.py), so each chunk must start
where a batch does; the map reports how far it got and the next chunk is read from there. The
ends are those of :meth:`FileRecords.batches`: a segment ends where fewer bytes than a batch
header are left, at a batch length shorter than a header, or at a batch that runs past its end.
"""

from __future__ import annotations

import os

from odradek.storage.record_batch import BATCH_LENGTH_OFFSET, HEADER_SIZE, LOG_OVERHEAD

CHUNK_BYTES = 1024 * 1024


def read_chunk(fd: int, position: int, size: int, chunk_bytes: int = CHUNK_BYTES) -> bytes | None:
    """The segment's bytes from ``position`` (of ``size``): a chunk holding at least the whole
    batch that starts there (more than ``chunk_bytes`` when that batch is larger), or None
    where the segment ends."""
    if size - position < HEADER_SIZE:
        return None
    chunk = _pread(fd, min(chunk_bytes, size - position), position)
    if len(chunk) < HEADER_SIZE:
        return None
    batch_length = int.from_bytes(chunk[BATCH_LENGTH_OFFSET : BATCH_LENGTH_OFFSET + 4], "big")
    if batch_length >= 2**31:
        batch_length -= 2**32
    batch_size = batch_length + LOG_OVERHEAD
    if batch_size < HEADER_SIZE or position + batch_size > size:
        return None
    if batch_size > len(chunk):
        chunk = _pread(fd, batch_size, position)
    return chunk if len(chunk) >= batch_size else None  # the file shrank meanwhile


def _pread(fd: int, length: int, position: int) -> bytes:
    """Up to ``length`` bytes at ``position`` (fewer only at the end of the file)."""
    chunk = os.pread(fd, length, position)
    if len(chunk) == length or not chunk:
        return chunk
    parts = [chunk]
    read = len(chunk)
    while read < length and (part := os.pread(fd, length - read, position + read)):
        parts.append(part)
        read += len(part)
    return b"".join(parts)
