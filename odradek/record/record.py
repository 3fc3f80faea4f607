"""One record of a v2 batch, and the zigzag varints its body is made of (design §3).

A record body is: ``length`` varint (bytes after it), ``attributes`` int8 (unused, 0),
``timestampDelta`` varlong, ``offsetDelta`` varint, ``keyLength`` varint (-1 = null), key,
``valueLength`` varint (-1 = null, a tombstone), value, ``headersCount`` varint, then per header
``keyLength`` varint, UTF-8 key, ``valueLength`` varint (-1 = null), value. Varints are zigzag
encoded like protobuf's ``sint32``/``sint64``: at most 5 bytes for a varint, 10 for a varlong.

:func:`encode_record` and :func:`decode_record` are the plain codec, one field at a time.
:func:`write_record` (the builder's) and :func:`decode_records` (a whole records section) are
the hot paths: they produce the same bytes and records, and hand anything unusual to the plain
codec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from odradek.errors import CorruptRecordError
from odradek.int_limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

Buffer = bytes | bytearray | memoryview
Headers = tuple[tuple[str, bytes | None], ...]


_NULL_LENGTH = b"\x01"  # zigzag(-1)
_ATTRIBUTES = b"\x00"
_NO_HEADERS = b"\x00"


@dataclass(frozen=True, slots=True)
class Record:
    """A record with its absolute offset and timestamp, as a reader sees it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    @property
    def is_tombstone(self) -> bool:
        """A null value: on a compacted topic it deletes its key."""
        return self.value is None


# Record's generated __init__ sets each field through object.__setattr__ (it is frozen);
# decode_records fills the slots directly, a third cheaper.
_RECORD_SLOT_SETTERS = tuple(getattr(Record, field.name).__set__ for field in fields(Record))


def _encode_unsigned(value: int) -> bytes:
    """LEB128: 7 bits a byte, least significant first, high bit set on all but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_MIN, _SMALL_LIMIT = -64, 8192  # zigzag values of 1 and 2 bytes, cached
_SMALL = [_encode_unsigned(v << 1) for v in range(_SMALL_LIMIT)]  # [v]: the varint of v
# [v]: the varint of v, for v from -64 to -1 (a negative index counts from the end)
_SMALL_NEGATIVE = [_encode_unsigned(~(v << 1)) for v in range(_SMALL_MIN, 0)]
# One-byte varint -> value, for the decoders' inline fast path.
_ONE_BYTE = [(code >> 1) ^ -(code & 1) for code in range(0x80)]


def encode_varint(value: int) -> bytes:
    """The zigzag varint of a 32-bit signed ``value``."""
    if 0 <= value < _SMALL_LIMIT:
        return _SMALL[value]
    if _SMALL_MIN <= value < 0:
        return _SMALL_NEGATIVE[value]
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (int32)")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def encode_varlong(value: int) -> bytes:
    """The zigzag varlong of a 64-bit signed ``value``."""
    if 0 <= value < _SMALL_LIMIT:
        return _SMALL[value]
    if _SMALL_MIN <= value < 0:
        return _SMALL_NEGATIVE[value]
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong (int64)")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def _decode(buffer: Buffer, position: int, bits: int) -> tuple[int, int]:
    """Zigzag-decode a ``bits``-bit varint at ``position``; returns (value, next position)."""
    result = 0
    shift = 0
    for index in range(position, position + (bits + 6) // 7):
        try:
            byte = buffer[index]
        except IndexError:
            raise CorruptRecordError(f"varint at byte {position} runs past the end") from None
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result >> bits:
                break
            return (result >> 1) ^ -(result & 1), index + 1
        shift += 7
    raise CorruptRecordError(f"malformed {bits}-bit varint at byte {position}")


def decode_varint(buffer: Buffer, position: int) -> tuple[int, int]:
    """Read a zigzag varint (int32) at ``position``; returns (value, next position)."""
    try:
        byte = buffer[position]
        if byte < 0x80:
            return _ONE_BYTE[byte], position + 1
        following = buffer[position + 1]
        if following < 0x80:
            code = (byte & 0x7F) | (following << 7)
            return (code >> 1) ^ -(code & 1), position + 2
    except IndexError:
        pass  # _decode says where it ran out
    return _decode(buffer, position, 32)


def decode_varlong(buffer: Buffer, position: int) -> tuple[int, int]:
    """Read a zigzag varlong (int64) at ``position``; returns (value, next position)."""
    try:
        byte = buffer[position]
        if byte < 0x80:
            return _ONE_BYTE[byte], position + 1
        following = buffer[position + 1]
        if following < 0x80:
            code = (byte & 0x7F) | (following << 7)
            return (code >> 1) ^ -(code & 1), position + 2
    except IndexError:
        pass  # _decode says where it ran out
    return _decode(buffer, position, 64)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    """One record, length prefix included, as it sits in a batch's records section."""
    parts = [_ATTRIBUTES, encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    _append_bytes(parts, key)
    _append_bytes(parts, value)
    parts.append(encode_varint(len(headers)))
    for header_key, header_value in headers:
        _append_bytes(parts, header_key.encode("utf-8"))
        _append_bytes(parts, header_value)
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def write_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> None:
    """Append to ``out`` the bytes :func:`encode_record` returns for the same arguments.

    The producer's hot path: a record without headers whose varints all lie in the table
    (lengths and deltas from 0 to 8191) is one join of table entries; any other record is
    left to encode_record.
    """
    if headers or timestamp_delta < 0 or offset_delta < 0:
        out += encode_record(offset_delta, timestamp_delta, key, value, headers)
        return
    small = _SMALL
    try:
        body = b"".join(
            (
                _ATTRIBUTES,
                small[timestamp_delta],
                small[offset_delta],
                _NULL_LENGTH if key is None else small[len(key)],
                key or b"",
                _NULL_LENGTH if value is None else small[len(value)],
                value or b"",
                _NO_HEADERS,
            )
        )
        length = small[len(body)]
    except IndexError:  # a varint beyond the table
        out += encode_record(offset_delta, timestamp_delta, key, value)
        return
    out += length
    out += body


def _append_bytes(parts: list[bytes], data: bytes | None) -> None:
    """A length-prefixed byte string, or the null length -1."""
    if data is None:
        parts.append(_NULL_LENGTH)
    else:
        parts.append(encode_varint(len(data)))
        parts.append(data)


def decode_record(
    buffer: Buffer,
    position: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> tuple[Record, int]:
    """Read the record at ``position``; returns it and the position after it.

    Offsets and timestamps come out absolute. With ``log_append_time`` (a LogAppendTime batch)
    every record's timestamp is that time, as Kafka reports it. CorruptRecordError when the
    record's fields do not end exactly where its length says.
    """
    length, position = decode_varint(buffer, position)
    end = position + length
    if length < 0 or end > len(buffer):
        raise CorruptRecordError(
            f"record length {length} at byte {position} overruns the {len(buffer)}-byte section"
        )
    timestamp_delta, position = decode_varlong(buffer, position + 1)
    offset_delta, position = decode_varint(buffer, position)
    key, position = _read_bytes(buffer, position, end, "key")
    value, position = _read_bytes(buffer, position, end, "value")
    headers, position = _read_headers(buffer, position, end)
    if position != end:
        raise CorruptRecordError(
            f"record fields end at byte {position} but its length says byte {end}"
        )
    timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
    return Record(base_offset + offset_delta, timestamp, key, value, headers), end


def decode_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> list[Record] | None:
    """The ``count`` records filling ``data``, the same :func:`decode_record` reads one by one.

    None when ``data`` is anything but exactly ``count`` well-formed records; decode_record
    then names the fault. The consumer's hot path, so one loop for the whole section, written
    out: varints of one and two bytes are read inline, longer ones by decode_varint; fields
    are read forward only, and a record is kept only if they end exactly where its length
    says (a field running past the data raises IndexError).
    """
    data = bytes(data)  # no copy when it already is: the records' fields come out as bytes
    one_byte = _ONE_BYTE
    new = object.__new__
    set_offset, set_timestamp, set_key, set_value, set_headers = _RECORD_SLOT_SETTERS
    records: list[Record] = []
    append = records.append
    position = 0
    try:
        for _ in range(count):
            byte = data[position]
            if byte < 0x80:
                length = one_byte[byte]
                position += 1
            else:
                following = data[position + 1]
                if following < 0x80:
                    length = (byte & 0x7F) | (following << 7)
                    length = (length >> 1) ^ -(length & 1)
                    position += 2
                else:
                    length, position = decode_varint(data, position)
            end = position + length
            byte = data[position + 1]  # after the attributes byte, ignored as Kafka does
            if byte < 0x80:
                timestamp_delta = one_byte[byte]
                position += 2
            else:
                following = data[position + 2]
                if following < 0x80:
                    timestamp_delta = (byte & 0x7F) | (following << 7)
                    timestamp_delta = (timestamp_delta >> 1) ^ -(timestamp_delta & 1)
                    position += 3
                else:
                    timestamp_delta, position = decode_varlong(data, position + 1)
            byte = data[position]
            if byte < 0x80:
                offset_delta = one_byte[byte]
                position += 1
            else:
                following = data[position + 1]
                if following < 0x80:
                    offset_delta = (byte & 0x7F) | (following << 7)
                    offset_delta = (offset_delta >> 1) ^ -(offset_delta & 1)
                    position += 2
                else:
                    offset_delta, position = decode_varint(data, position)
            byte = data[position]
            if byte < 0x80:
                length = one_byte[byte]
                position += 1
            else:
                following = data[position + 1]
                if following < 0x80:
                    length = (byte & 0x7F) | (following << 7)
                    length = (length >> 1) ^ -(length & 1)
                    position += 2
                else:
                    length, position = decode_varint(data, position)
            if length >= 0:
                key = data[position : position + length]
                position += length
            elif length == -1:
                key = None
            else:
                return None
            byte = data[position]
            if byte < 0x80:
                length = one_byte[byte]
                position += 1
            else:
                following = data[position + 1]
                if following < 0x80:
                    length = (byte & 0x7F) | (following << 7)
                    length = (length >> 1) ^ -(length & 1)
                    position += 2
                else:
                    length, position = decode_varint(data, position)
            if length >= 0:
                value = data[position : position + length]
                position += length
            elif length == -1:
                value = None
            else:
                return None
            if data[position]:
                headers, position = _read_headers(data, position, end)
            else:
                headers = ()
                position += 1
            if position != end:
                return None
            record = new(Record)
            set_offset(record, base_offset + offset_delta)
            set_timestamp(
                record,
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
            )
            set_key(record, key)
            set_value(record, value)
            set_headers(record, headers)
            append(record)
    except (IndexError, CorruptRecordError):
        return None
    return records if position == len(data) else None


def _read_bytes(buffer: Buffer, position: int, end: int, what: str) -> tuple[bytes | None, int]:
    """A length-prefixed field that must lie before ``end`` (the record's end)."""
    length, position = decode_varint(buffer, position)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"{what} length {length} at byte {position} is negative")
        return None, position
    if position + length > end:
        raise CorruptRecordError(f"{what} of {length} bytes at byte {position} overruns its record")
    return bytes(buffer[position : position + length]), position + length


def _read_headers(buffer: Buffer, position: int, end: int) -> tuple[Headers, int]:
    count, position = decode_varint(buffer, position)
    if count < 0 or count > end - position:
        raise CorruptRecordError(f"header count {count} at byte {position} is impossible")
    headers = []
    for _ in range(count):
        key, position = _read_bytes(buffer, position, end, "header key")
        if key is None:
            raise CorruptRecordError(f"null header key before byte {position}")
        value, position = _read_bytes(buffer, position, end, "header value")
        headers.append((key.decode("utf-8", errors="replace"), value))
    return tuple(headers), position
