"""BatchKeys: the offset, key and tombstone flag of every record of a batch.

The cleaner reads every record twice (to build the offset map, then to filter the log) but
needs only these fields of it. This is the Python reading of them, which the C module
(``_offset_map.c``) mirrors field for field and is tested against: the fallback where that
module is not built, and the oracle. Record bodies are laid out as :mod:`odradek.record.record`
describes; a record frames when its length lies inside the batch, its fields up to the value
length lie inside the record, and the records fill the batch exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import CorruptRecordError
from odradek.int_limits import INT64_MAX, INT64_MIN
from odradek.record.compression import CompressionType
from odradek.record.record import decode_varint, decode_varlong
from odradek.record.record_batch import RECORDS_OFFSET, RecordBatch

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class BatchKeys:
    """Per record of ``batch``: its offset, key (None if it has none) and whether it is a
    tombstone."""

    batch: RecordBatch
    offsets: list[int]
    keys: list[bytes | None]
    tombstones: list[bool]

    @classmethod
    def read(cls, batch: RecordBatch) -> BatchKeys:
        """Walk the batch's records; CorruptRecordError if they do not frame. The CRC is the
        caller's to check (once per batch, where it matters)."""
        data, position = records_section(batch)
        try:
            offsets, keys, tombstones = read_keys(
                data, position, len(data), batch.records_count, batch.base_offset
            )
        except CorruptRecordError as error:
            raise CorruptRecordError(f"{batch}: {error.message}") from None
        return cls(batch, offsets, keys, tombstones)


def records_section(batch: RecordBatch) -> tuple[Buffer, int]:
    """The bytes holding the batch's records and where the first starts in them: the batch
    itself when uncompressed, the decompressed block otherwise."""
    raw = batch.to_bytes()
    codec = batch.compression_type
    if codec is CompressionType.NONE:
        return raw, RECORDS_OFFSET
    return codec.decompress(memoryview(raw)[RECORDS_OFFSET:]), 0


def read_keys(
    data: Buffer, position: int, end: int, count: int, base_offset: int
) -> tuple[list[int], list[bytes | None], list[bool]]:
    """Offsets, keys and tombstone flags of the ``count`` records filling ``data[position:end]``;
    CorruptRecordError when they do not frame."""
    if count < 0:
        raise CorruptRecordError(f"recordsCount {count} is negative")
    offsets: list[int] = []
    keys: list[bytes | None] = []
    tombstones: list[bool] = []
    for index in range(count):
        try:
            offset, key, tombstone, position = _read_record(data, position, end, base_offset)
        except (CorruptRecordError, IndexError):
            raise CorruptRecordError(f"record {index} at byte {position} does not frame") from None
        offsets.append(offset)
        keys.append(key)
        tombstones.append(tombstone)
    if position != end:
        raise CorruptRecordError(f"{end - position} bytes follow the {count} declared records")
    return offsets, keys, tombstones


def _read_record(
    data: Buffer, position: int, end: int, base_offset: int
) -> tuple[int, bytes | None, bool, int]:
    """(offset, key, tombstone, next position) of the record at ``position``; CorruptRecordError
    (or IndexError) when it does not frame. A field read past the record's end is a fault even
    where the bytes exist: the C walk reads no byte past it."""
    if position >= end:
        raise CorruptRecordError("no record length")
    length, position = decode_varint(data, position)
    record_end = position + length
    if length < 0 or record_end > end or position >= record_end:
        raise CorruptRecordError(f"record length {length}")
    _, position = decode_varlong(data, position + 1)  # past attributes and timestamp delta
    _check_inside(position, record_end)
    offset_delta, position = decode_varint(data, position)
    _check_inside(position, record_end)
    offset = base_offset + offset_delta
    if not INT64_MIN <= offset <= INT64_MAX:
        raise CorruptRecordError(f"offset {offset} is out of range")
    key_length, position = decode_varint(data, position)
    _check_inside(position, record_end)
    if key_length < -1:
        raise CorruptRecordError(f"key length {key_length}")
    key = None
    if key_length >= 0:
        key = bytes(data[position : position + key_length])
        position += key_length
        _check_inside(position, record_end)
    value_length, position = decode_varint(data, position)
    _check_inside(position, record_end)
    if value_length < -1:
        raise CorruptRecordError(f"value length {value_length}")
    return offset, key, value_length == -1, record_end


def _check_inside(position: int, record_end: int) -> None:
    if position > record_end:
        raise CorruptRecordError(f"fields run past the record end at byte {record_end}")
