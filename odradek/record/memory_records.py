"""A buffer of concatenated batches: a fetch response, a produce request, a file's contents."""

from __future__ import annotations

from collections.abc import Iterator

from odradek.errors import CorruptRecordError
from odradek.record.record import Record
from odradek.record.record_batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC, RecordBatch

Buffer = bytes | bytearray | memoryview


class MemoryRecords:
    """Iterates the whole batches of ``buffer``; a trailing partial batch is not one of them.

    A fetch may end in the middle of a batch (design §6), so a partial batch at the end is dropped
    silently. A batch whose header is impossible (length below the header size, magic other
    than 2) raises CorruptRecordError: what follows it cannot be framed.
    """

    __slots__ = ("_buffer",)

    def __init__(self, buffer: Buffer) -> None:
        self._buffer = buffer

    @property
    def size_in_bytes(self) -> int:
        return len(self._buffer)

    @property
    def valid_bytes(self) -> int:
        """Bytes up to the end of the last whole batch."""
        end = 0
        for batch in self.batches():
            end = batch.position + batch.size_in_bytes
        return end

    def batches(self) -> Iterator[RecordBatch]:
        """The whole batches, in order, as views of the buffer (their CRCs are not checked)."""
        buffer = self._buffer
        size = len(buffer)
        position = 0
        while size - position >= HEADER_SIZE:
            batch = RecordBatch(buffer, position)
            batch_size = batch.size_in_bytes
            if batch_size < HEADER_SIZE:
                raise CorruptRecordError(
                    f"batch at byte {position} declares batchLength {batch.batch_length}, "
                    f"less than the {HEADER_SIZE - LOG_OVERHEAD} bytes of its header"
                )
            if size - position < batch_size:
                return
            if batch.magic != MAGIC:
                raise CorruptRecordError(
                    f"batch at byte {position} has magic {batch.magic}, only {MAGIC} is supported"
                )
            yield batch
            position += batch_size

    def records(self) -> Iterator[Record]:
        """Every record of every whole batch."""
        for batch in self.batches():
            yield from batch.records()
