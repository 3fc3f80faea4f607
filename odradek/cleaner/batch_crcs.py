"""Checking the CRCs of batches the cleaner decided in bulk.

The offset map's ``filter_batches`` reports ``(position, size, stored CRC)`` of each batch it
decided; the CRC-32C is checked here with ``crc_of``, as
:meth:`RecordBatch.ensure_valid` checks a batch the cleaner handles one at a time.
"""

from __future__ import annotations

from odradek.errors import CorruptRecordError
from odradek.storage.record_batch import RecordBatch, crc_of


def verify_crcs(chunk: bytes, checks: list[tuple[int, int, int]]) -> None:
    """CorruptRecordError naming the first batch of ``chunk`` whose CRC does not match."""
    for position, size, stored in checks:
        if crc_of(chunk, position, size) != stored:
            RecordBatch(chunk, position).ensure_valid()  # raises, naming the batch
            raise CorruptRecordError(f"batch at byte {position}: CRC mismatch")
