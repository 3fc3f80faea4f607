"""BatchKeys: the offset, key and tombstone flag of every record of a batch.

The cleaner reads every record twice (to build the offset map, then to filter the log) but
needs only these fields of it, and decodes a record in full only when the batch holding it
must be rewritten. Reading them in place costs a fraction of :meth:`RecordBatch.records`,
which builds a Record with its value and headers for each; record bodies are laid out as
:mod:`odradek.storage.record` describes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.errors import CorruptRecordError
from odradek.storage.compression import CompressionType
from odradek.storage.record import Record, decode_record, decode_varint
from odradek.storage.record_batch import RECORDS_OFFSET, RecordBatch, TimestampType

_NULL_LENGTH = 1  # zigzag(-1) as a one-byte varint: a null key or value


@dataclass(frozen=True, slots=True)
class BatchKeys:
    """Per record of ``batch``: its offset, key (None if it has none), whether it is a
    tombstone, and where it starts in ``data``, the batch's (decompressed) record bytes."""

    batch: RecordBatch
    data: bytes
    offsets: list[int]
    keys: list[bytes | None]
    tombstones: list[bool]
    positions: list[int]

    @classmethod
    def read(cls, batch: RecordBatch) -> BatchKeys:
        """Walk the batch's records; CorruptRecordError if they do not frame. The CRC is the
        caller's to check (once per batch, where it matters)."""
        data, position = _records_section(batch)
        try:
            offsets, keys, tombstones, positions, end = _walk(
                data, position, batch.base_offset, batch.records_count
            )
        except IndexError:
            raise CorruptRecordError(f"{batch}: records run past the end of the batch") from None
        if end != len(data):
            raise CorruptRecordError(f"{batch}: records do not fill the batch exactly")
        return cls(batch, data, offsets, keys, tombstones, positions)

    def records(self, indexes: Iterable[int]) -> list[Record]:
        """The records at ``indexes`` decoded in full, with their offsets and timestamps."""
        batch = self.batch
        base_offset, base_timestamp = batch.base_offset, batch.base_timestamp
        append_time = (
            batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
        )
        return [
            decode_record(self.data, self.positions[i], base_offset, base_timestamp, append_time)[0]
            for i in indexes
        ]


def _records_section(batch: RecordBatch) -> tuple[bytes, int]:
    """The bytes holding the records and where the first starts in them."""
    raw = batch.to_bytes()
    codec = batch.compression_type
    if codec is CompressionType.NONE:
        return raw, RECORDS_OFFSET
    return codec.decompress(memoryview(raw)[RECORDS_OFFSET:]), 0


def _walk(
    data: bytes, position: int, base_offset: int, count: int
) -> tuple[list[int], list[bytes | None], list[bool], list[int], int]:
    """The hot loop: varints are read inline in their one-byte form (two for the record
    length, which is that long for records of 64 bytes to 8 KiB)."""
    offsets: list[int] = []
    keys: list[bytes | None] = []
    tombstones: list[bool] = []
    positions: list[int] = []
    add_offset, add_key = offsets.append, keys.append
    add_tombstone, add_position = tombstones.append, positions.append
    for _ in range(count):
        add_position(position)
        byte = data[position]
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position += 1
        elif data[position + 1] < 0x80:
            length = (byte & 0x7F) | (data[position + 1] << 7)
            length = (length >> 1) ^ -(length & 1)
            position += 2
        else:
            length, position = decode_varint(data, position)
        end = position + length
        position += 1  # attributes
        while data[position] >= 0x80:  # timestamp delta: not needed
            position += 1
        byte = data[position + 1]
        if byte < 0x80:
            add_offset(base_offset + ((byte >> 1) ^ -(byte & 1)))
            position += 2
        else:
            delta, position = decode_varint(data, position + 1)
            add_offset(base_offset + delta)
        byte = data[position]
        if byte < 0x80:
            key_length = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            key_length, position = decode_varint(data, position)
        if key_length >= 0:
            add_key(data[position : position + key_length])
            position += key_length
        else:
            add_key(None)
        add_tombstone(data[position] == _NULL_LENGTH)
        position = end
    return offsets, keys, tombstones, positions, position
