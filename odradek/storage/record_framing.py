"""The framing walk over a producer batch's records: the append path's per-record check.

Before a batch is accepted every record must frame exactly (SPEC 4 step 1): its length varint
lands on the next record, its fields end where its length says, its offsetDelta is its index,
and the records fill the batch. This is the hot loop of the append path, so it reads varints
inline (one- and two-byte forms without a call) and creates no object per record.

Records that repeat one layout (same length, same key and value lengths, one-byte timestamp
delta, no headers: fixed-size payloads, as from many producers and every benchmark) are
checked a run at a time instead: one strided slice per framing byte compares the whole run
in C. A run passes only if every framing byte equals the template record's, every offsetDelta
is its index and every timestamp delta is one byte, which proves each record frames exactly
as the template does.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.storage.record import decode_varint, decode_varlong

Buffer = bytes | bytearray

MIN_RECORD_SIZE = 7  # length, attributes, timestampDelta, offsetDelta, key/value lengths, headers
MAX_FAILED_RUNS = 16  # bounds the cost of near-uniform batches crafted to fail every run

_ONE_BYTE_OFFSET_DELTAS = bytes(2 * index for index in range(64))
_TWO_BYTE_OFFSET_DELTAS_LOW = bytes(((2 * index) & 0x7F) | 0x80 for index in range(8192))
_TWO_BYTE_OFFSET_DELTAS_HIGH = bytes((2 * index) >> 7 for index in range(8192))
_ABOVE_ANY_DELTA = 2**64
_BELOW_ANY_DELTA = -(2**64)
_AT_MOST = [bytes(range(code + 1)) for code in range(128)]
_AT_LEAST = [bytes(range(code, 128)) for code in range(128)]
# One-byte zigzag code -> delta + 64, so that byte order is delta order (codes >= 128 unused).
_ZIGZAG_TO_ORDER = bytes(((code >> 1) ^ -(code & 1)) + 64 for code in range(128)) + bytes(128)


@dataclass(frozen=True)
class RecordFraming:
    """What the walk learned: the spread of timestamp deltas and where the largest is."""

    min_timestamp_delta: int
    max_timestamp_delta: int
    index_of_max_timestamp: int


def check_framing(
    data: Buffer, position: int, end: int, count: int, *, keys_required: bool
) -> RecordFraming:
    """Walk the ``count`` (at least one) records in ``data[position:end]``; prove they frame.

    CorruptRecordError (InvalidRecordError for a null key when ``keys_required``) names the
    record index and byte position of the first fault.
    """
    if count < 1 or count > (end - position) // MIN_RECORD_SIZE:
        raise CorruptRecordError(
            f"recordsCount {count} cannot fit in {end - position} bytes of records"
        )
    try:
        return _walk(data, position, end, count, keys_required)
    except IndexError:
        raise CorruptRecordError(f"records run past the end of the data at byte {end}") from None


def _walk(data: Buffer, position: int, end: int, count: int, keys_required: bool) -> RecordFraming:
    """The per-record loop; see the module docstring for why it is written out by hand."""
    decode = decode_varint
    min_delta = _ABOVE_ANY_DELTA
    max_delta = _BELOW_ANY_DELTA
    index_of_max = 0
    failed_runs = 0
    index = 0
    while index < count:
        start = position
        byte = data[position]
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position += 1
        elif data[position + 1] < 0x80:
            length = (byte & 0x7F) | (data[position + 1] << 7)
            length = (length >> 1) ^ -(length & 1)
            position += 2
        else:
            length, position = decode(data, position)
        record_end = position + length
        if length < 0 or record_end > end:
            raise _fault(index, start, f"length {length} overruns the batch end at byte {end}")
        timestamp_at = position + 1  # after the attributes byte, which Kafka ignores
        byte = data[timestamp_at]
        if byte < 0x80:
            delta = (byte >> 1) ^ -(byte & 1)
            position = timestamp_at + 1
        else:
            delta, position = decode_varlong(data, timestamp_at)
        if delta > max_delta:
            max_delta = delta
            index_of_max = index
        if delta < min_delta:
            min_delta = delta
        byte = data[position]
        if byte < 0x80:
            offset_delta = (byte >> 1) ^ -(byte & 1)
            position += 1
        else:
            offset_delta, position = decode(data, position)
        if offset_delta != index:
            raise _fault(index, start, f"offsetDelta is {offset_delta}, expected {index}")
        key_at = position
        byte = data[position]
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position += 1
        elif data[position + 1] < 0x80:
            length = (byte & 0x7F) | (data[position + 1] << 7)
            length = (length >> 1) ^ -(length & 1)
            position += 2
        else:
            length, position = decode(data, position)
        if length >= 0:
            position += length
        elif length != -1:
            raise _fault(index, start, f"key length {length} is negative")
        elif keys_required:
            raise InvalidRecordError(
                f"record {index} at byte {start} has no key, which a compacted topic requires"
            )
        value_at = position
        byte = data[position]
        if byte < 0x80:
            length = (byte >> 1) ^ -(byte & 1)
            position += 1
        elif data[position + 1] < 0x80:
            length = (byte & 0x7F) | (data[position + 1] << 7)
            length = (length >> 1) ^ -(length & 1)
            position += 2
        else:
            length, position = decode(data, position)
        if length >= 0:
            position += length
        elif length != -1:
            raise _fault(index, start, f"value length {length} is negative")
        headers_at = position
        if data[position]:
            position = _skip_headers(data, position, record_end, index, start)
        else:
            position += 1
        if position != record_end:
            raise _fault(index, start, f"fields end at byte {position}, length says {record_end}")
        index += 1
        if (
            index < count
            and data[position] == data[start]
            and data[position + 1] == data[start + 1]
            and data[timestamp_at] < 0x80
            and headers_at + 1 == record_end
            and failed_runs < MAX_FAILED_RUNS
        ):
            stride = record_end - start
            run = _uniform_run(
                data,
                start,
                stride,
                _fixed_offsets(data, start, key_at, value_at, record_end),
                index,
                min(count - index, (end - record_end) // stride),
            )
            if run is None:
                failed_runs += 1
                continue
            size, run_min, run_max, run_index_of_max = run
            if run_max > max_delta:
                max_delta = run_max
                index_of_max = index + run_index_of_max
            min_delta = min(min_delta, run_min)
            index += size
            position = record_end + size * stride
    if position != end:
        raise CorruptRecordError(
            f"{end - position} bytes at byte {position} follow the {count} declared records"
        )
    return RecordFraming(min_delta, max_delta, index_of_max)


def _skip_headers(data: Buffer, position: int, record_end: int, index: int, start: int) -> int:
    """Step over a record's headers, checking each length lies inside the record."""
    count, position = decode_varint(data, position)
    if count < 0:
        raise _fault(index, start, f"header count {count} is negative")
    for header in range(count):
        length, position = decode_varint(data, position)
        if length < 0:
            raise _fault(index, start, f"header {header} has key length {length}")
        position += length
        length, position = decode_varint(data, position)
        if length < -1:
            raise _fault(index, start, f"header {header} has value length {length}")
        position += max(length, 0)
        if position > record_end:
            raise _fault(index, start, f"header {header} overruns the record end")
    return position


def _fixed_offsets(data: Buffer, start: int, key_at: int, value_at: int, end: int) -> list[int]:
    """Offsets in the record at ``start`` of the bytes a run must share with it.

    They are the framing bytes that do not vary from record to record: the length, key length
    and value length varints and the header count (the last byte).
    """
    fixed = [*range(_varint_size(data, start)), end - 1 - start]
    fixed += range(key_at - start, key_at - start + _varint_size(data, key_at))
    fixed += range(value_at - start, value_at - start + _varint_size(data, value_at))
    return fixed


def _varint_size(data: Buffer, at: int) -> int:
    size = 1
    while data[at + size - 1] >= 0x80:
        size += 1
    return size


def _uniform_run(
    data: Buffer, template: int, stride: int, fixed: list[int], first_index: int, limit: int
) -> tuple[int, int, int, int] | None:
    """Check the records after ``template`` that repeat its layout, as one run.

    The template (of ``stride`` bytes) is known good, with a one-byte timestamp delta and no
    headers. The run holds at most ``limit`` records and stays within one offsetDelta width
    (1 byte below index 64, 2 below 8192). Returns (records in the run, min timestamp delta,
    max timestamp delta, index of the max within the run), or None when no run of at least
    two records holds; a run that fails is halved until it holds.
    """
    template_index = first_index - 1
    if template_index < 64:
        limit = min(limit, 64 - first_index)
    elif template_index < 8192:
        limit = min(limit, 8192 - first_index)
    else:
        return None
    if limit < 2:
        return None
    timestamp_offset = _varint_size(data, template) + 1
    size = limit
    while size >= 2:
        deltas = _run_timestamp_deltas(
            data, template, stride, fixed, timestamp_offset, first_index, size
        )
        if deltas is not None:
            low, high = _bounds(deltas)
            return size, low - 64, high - 64, deltas.index(high)
        size //= 2
    return None


def _run_timestamp_deltas(
    data: Buffer,
    template: int,
    stride: int,
    fixed: list[int],
    timestamp_offset: int,
    first_index: int,
    size: int,
) -> bytes | bytearray | None:
    """Check ``size`` records after the template; their timestamp deltas (+64) if they hold."""
    run_start = template + stride
    run_stop = run_start + size * stride
    for offset in fixed:
        if data[run_start + offset : run_stop : stride].count(data[template + offset]) != size:
            return None
    offset_delta_at = run_start + timestamp_offset + 1
    if first_index < 64:
        expected = _ONE_BYTE_OFFSET_DELTAS[first_index : first_index + size]
        if data[offset_delta_at:run_stop:stride] != expected:
            return None
    else:
        expected = _TWO_BYTE_OFFSET_DELTAS_LOW[first_index : first_index + size]
        if data[offset_delta_at:run_stop:stride] != expected:
            return None
        expected = _TWO_BYTE_OFFSET_DELTAS_HIGH[first_index : first_index + size]
        if data[offset_delta_at + 1 : run_stop : stride] != expected:
            return None
    deltas = data[run_start + timestamp_offset : run_stop : stride]
    if not deltas.isascii():
        return None
    return deltas.translate(_ZIGZAG_TO_ORDER)


def _bounds(codes: bytes | bytearray) -> tuple[int, int]:
    """Min and max of ``codes`` (all below 128).

    In C when the first is the least and the last the greatest, as in a batch whose
    timestamps never go back; else by iterating.
    """
    low, high = codes[0], codes[-1]
    if codes.translate(None, _AT_LEAST[low]) or codes.translate(None, _AT_MOST[high]):
        return min(codes), max(codes)
    return low, high


def _fault(index: int, start: int, what: str) -> CorruptRecordError:
    return CorruptRecordError(f"record {index} at byte {start}: {what}")
