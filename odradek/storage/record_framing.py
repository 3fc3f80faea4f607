"""The framing walk over a producer batch's records: the append path's per-record check.

Before a batch is accepted every record must frame exactly (SPEC 4 step 1): its length varint
lands on the next record, its fields end where its length says, its offsetDelta is its index,
and the records fill the batch. This is the hot loop of the append path, so it reads varints
inline (one- and two-byte forms without a call) and creates no object per record.

Records that repeat one layout (same length, same key and value lengths, one-byte timestamp
delta, no headers: fixed-size payloads, as from many producers and every benchmark) are
checked a run at a time instead: one strided slice per framing byte compares the whole run
in C. A run holds the records, from the template's successor on, whose framing bytes all
equal the template's and whose timestamp delta is one byte, which proves each frames exactly
as the template does; its length is measured in C too (the leading bytes each slice shares
with the template), in windows that grow fourfold, so a run costs what its records do. Every
offsetDelta of the run must then be its index.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.errors import CorruptRecordError, InvalidRecordError
from odradek.storage.record import decode_varint, decode_varlong

Buffer = bytes | bytearray

MIN_RECORD_SIZE = 7  # length, attributes, timestampDelta, offsetDelta, key/value lengths, headers
MAX_FAILED_RUNS = 16  # bounds the cost of near-uniform batches crafted to fail every run

_FIRST_WINDOW = 256  # records a run is first measured over; a slice costs little more

_ZIGZAG = [(code >> 1) ^ -(code & 1) for code in range(0x80)]  # one-byte varint -> value
_ONE_BYTE_CODES = bytes(range(0x80))  # the bytes a one-byte timestamp delta may hold
_BYTES = [bytes((value,)) for value in range(0x100)]  # [b]: the one byte b
_ONE_BYTE_OFFSET_DELTAS = bytes(2 * index for index in range(64))
_TWO_BYTE_OFFSET_DELTAS_LOW = bytes(((2 * index) & 0x7F) | 0x80 for index in range(8192))
_TWO_BYTE_OFFSET_DELTAS_HIGH = bytes((2 * index) >> 7 for index in range(8192))
_ABOVE_ANY_DELTA = 2**64
_BELOW_ANY_DELTA = -(2**64)
_AT_MOST = [bytes(range(code + 1)) for code in range(128)]
_AT_LEAST = [bytes(range(code, 128)) for code in range(128)]
# One-byte zigzag code -> delta + 64, so that byte order is delta order (codes >= 128 unused).
_ZIGZAG_TO_ORDER = bytes(((code >> 1) ^ -(code & 1)) + 64 for code in range(128)) + bytes(128)


class RecordFraming(NamedTuple):
    """What the walk learned: the spread of timestamp deltas and where the largest is.

    A named tuple: one is made per batch on the append path, and a tuple is made in a tenth
    of the time a frozen dataclass takes.
    """

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
    """The per-record loop, written out in one function as the append path's hot loop.

    Varints of one and two bytes are read inline, longer ones by decode_varint; see the module
    docstring for the runs.
    """
    zigzag = _ZIGZAG
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
            length = zigzag[byte]
            position += 1
        else:
            following = data[position + 1]
            if following < 0x80:
                length = (byte & 0x7F) | (following << 7)
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
            delta = zigzag[byte]
            position += 2
        else:
            delta, position = decode_varlong(data, timestamp_at)
        if delta > max_delta:
            max_delta = delta
            index_of_max = index
        if delta < min_delta:
            min_delta = delta
        byte = data[position]
        if byte < 0x80:
            offset_delta = zigzag[byte]
            position += 1
        else:
            following = data[position + 1]
            if following < 0x80:
                offset_delta = (byte & 0x7F) | (following << 7)
                offset_delta = (offset_delta >> 1) ^ -(offset_delta & 1)
                position += 2
            else:
                offset_delta, position = decode(data, position)
        if offset_delta != index:
            raise _fault(index, start, f"offsetDelta is {offset_delta}, expected {index}")
        key_at = position
        byte = data[position]
        if byte < 0x80:
            length = zigzag[byte]
            position += 1
        else:
            following = data[position + 1]
            if following < 0x80:
                length = (byte & 0x7F) | (following << 7)
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
            length = zigzag[byte]
            position += 1
        else:
            following = data[position + 1]
            if following < 0x80:
                length = (byte & 0x7F) | (following << 7)
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
                _layout_columns(data, start, key_at, value_at, stride),
                timestamp_at - start,
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


def _layout_columns(
    data: Buffer, start: int, key_at: int, value_at: int, stride: int
) -> list[tuple[int, bytes]]:
    """The framing bytes a run must share with the record at ``start``, as (offset, byte).

    They are the bytes that do not vary from record to record: the length, key length and
    value length varints, and the header count 0 as its last byte.
    """
    columns = [(stride - 1, _BYTES[0])]
    for at in (start, key_at, value_at):
        while True:
            byte = data[at]
            columns.append((at - start, _BYTES[byte]))
            if byte < 0x80:
                break
            at += 1
    return columns


def _uniform_run(
    data: Buffer,
    template: int,
    stride: int,
    columns: list[tuple[int, bytes]],
    timestamp_offset: int,
    first_index: int,
    limit: int,
) -> tuple[int, int, int, int] | None:
    """Check the records after ``template`` that repeat its layout, as one run.

    The template (of ``stride`` bytes) is known good, with a one-byte timestamp delta at
    ``timestamp_offset`` and no headers; ``columns`` are its framing bytes. The run holds at
    most ``limit`` records and stays within one offsetDelta width (1 byte below index 64, 2
    below 8192). Returns (records in the run, min timestamp delta, max timestamp delta,
    index of the max within the run), or None when the run is shorter than two records or
    one of its offsetDeltas is wrong (the walk then finds it).
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
    size = _run_length(data, template, stride, columns, timestamp_offset, limit)
    timestamp_at = template + stride + timestamp_offset
    if size < 2 or not _offset_deltas_hold(data, timestamp_at + 1, stride, first_index, size):
        return None
    deltas = data[timestamp_at : timestamp_at + size * stride : stride].translate(_ZIGZAG_TO_ORDER)
    low, high = _bounds(deltas)
    return size, low - 64, high - 64, deltas.index(high)


def _run_length(
    data: Buffer,
    template: int,
    stride: int,
    columns: list[tuple[int, bytes]],
    timestamp_offset: int,
    limit: int,
) -> int:
    """How many records after the template, up to ``limit``, share its framing bytes and
    have a timestamp delta of one byte.

    Each window of records is one strided slice per column (a byte offset in the record): it
    passes whole in one comparison, else the run ends where its leading run of the template's
    byte does.
    """
    run = 0
    window = _FIRST_WINDOW
    while True:
        size = min(window, limit - run)
        start = template + (run + 1) * stride
        stop = start + size * stride
        for offset, byte in columns:
            column = data[start + offset : stop : stride]
            if column != byte * size:
                size -= len(column.lstrip(byte))
                stop = start + size * stride
        column = data[start + timestamp_offset : stop : stride]
        if not column.isascii():
            size -= len(column.lstrip(_ONE_BYTE_CODES))
        run += size
        if run == limit or size < window:
            return run
        window *= 4


def _offset_deltas_hold(
    data: Buffer, first_at: int, stride: int, first_index: int, size: int
) -> bool:
    """Whether the ``size`` records whose offsetDelta starts at ``first_at`` (then every
    ``stride`` bytes) hold the indexes from ``first_index`` on, all of one width."""
    stop = first_at + size * stride
    indexes = slice(first_index, first_index + size)
    if first_index < 64:
        return data[first_at:stop:stride] == _ONE_BYTE_OFFSET_DELTAS[indexes]
    return (
        data[first_at:stop:stride] == _TWO_BYTE_OFFSET_DELTAS_LOW[indexes]
        and data[first_at + 1 : stop : stride] == _TWO_BYTE_OFFSET_DELTAS_HIGH[indexes]
    )


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
