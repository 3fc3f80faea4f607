"""Checking the CRCs of batches the cleaner decided in bulk.

The offset map's ``filter_batches`` reports ``(position, size, stored CRC)`` of each batch it
decided; the CRC-32C is checked here with the ``crc32c`` package (hardware accelerated), as
:meth:`RecordBatch.ensure_valid` checks a batch the cleaner handles one at a time.
"""

from __future__ import annotations

import crc32c

from odradek.errors import CorruptRecordError
from odradek.storage.record_batch import ATTRIBUTES_OFFSET, RecordBatch


def verify_crcs(chunk: bytes, checks: list[tuple[int, int, int]]) -> None:
    """CorruptRecordError naming the first batch of ``chunk`` whose CRC does not match."""
    checksum = crc32c.crc32c
    with memoryview(chunk) as view:
        for position, size, stored in checks:
            if checksum(view[position + ATTRIBUTES_OFFSET : position + size]) != stored:
                RecordBatch(chunk, position).ensure_valid()  # raises, naming the batch
                raise CorruptRecordError(f"batch at byte {position}: CRC mismatch")
