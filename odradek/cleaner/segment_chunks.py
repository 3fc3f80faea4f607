"""Reading a segment's ``.log`` for the cleaner in large chunks that start at a batch.

The cleaner hands the offset map a chunk at a time (batch_scan.py), so each chunk must start
where a batch does; the map reports how far it got and the next chunk is read from there. The
ends are those of :meth:`FileRecords.batches`: a segment ends where fewer bytes than a batch
header are left, at a batch length shorter than a header, or at a batch that runs past its end.
"""

from __future__ import annotations

from odradek.storage.file_records import FileRecords
from odradek.storage.record_batch import BATCH_LENGTH_OFFSET, HEADER_SIZE, LOG_OVERHEAD

CHUNK_BYTES = 1024 * 1024


def read_chunk(
    records: FileRecords, position: int, chunk_bytes: int = CHUNK_BYTES
) -> bytes | None:
    """The segment's bytes from ``position``: a chunk holding at least the whole batch that
    starts there (more than ``chunk_bytes`` when that batch is larger), or None where the
    segment ends."""
    size = records.size_in_bytes
    if size - position < HEADER_SIZE:
        return None
    chunk = records.read(position, chunk_bytes)
    if len(chunk) < HEADER_SIZE:
        return None
    length_field = chunk[BATCH_LENGTH_OFFSET : BATCH_LENGTH_OFFSET + 4]
    batch_size = int.from_bytes(length_field, "big", signed=True) + LOG_OVERHEAD
    if batch_size < HEADER_SIZE or position + batch_size > size:
        return None
    if batch_size > len(chunk):
        chunk = records.read(position, batch_size)
    return chunk if len(chunk) >= batch_size else None  # the file shrank meanwhile
