"""One record of a v2 batch, and the zigzag varints its body is made of (SPEC 3).

A record body is: ``length`` varint (bytes after it), ``attributes`` int8 (unused, 0),
``timestampDelta`` varlong, ``offsetDelta`` varint, ``keyLength`` varint (-1 = null), key,
``valueLength`` varint (-1 = null, a tombstone), value, ``headersCount`` varint, then per header
``keyLength`` varint, UTF-8 key, ``valueLength`` varint (-1 = null), value. Varints are zigzag
encoded like protobuf's ``sint32``/``sint64``: at most 5 bytes for a varint, 10 for a varlong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from odradek.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview
Headers = tuple[tuple[str, bytes | None], ...]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_NULL_LENGTH = b"\x01"  # zigzag(-1)
_ATTRIBUTES = b"\x00"


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


def _encode_unsigned(value: int) -> bytes:
    """LEB128: 7 bits a byte, least significant first, high bit set on all but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_MIN, _SMALL_LIMIT = -64, 8192  # zigzag values of 1 and 2 bytes, cached
_SMALL = [_encode_unsigned((v << 1) ^ (v >> 63)) for v in range(_SMALL_MIN, _SMALL_LIMIT)]


def encode_varint(value: int) -> bytes:
    """The zigzag varint of a 32-bit signed ``value``."""
    if _SMALL_MIN <= value < _SMALL_LIMIT:
        return _SMALL[value - _SMALL_MIN]
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (int32)")
    return _encode_unsigned((value << 1) ^ (value >> 63))


def encode_varlong(value: int) -> bytes:
    """The zigzag varlong of a 64-bit signed ``value``."""
    if _SMALL_MIN <= value < _SMALL_LIMIT:
        return _SMALL[value - _SMALL_MIN]
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
    if position < len(buffer) and buffer[position] < 0x80:
        byte = buffer[position]
        return (byte >> 1) ^ -(byte & 1), position + 1
    return _decode(buffer, position, 32)


def decode_varlong(buffer: Buffer, position: int) -> tuple[int, int]:
    """Read a zigzag varlong (int64) at ``position``; returns (value, next position)."""
    if position < len(buffer) and buffer[position] < 0x80:
        byte = buffer[position]
        return (byte >> 1) ^ -(byte & 1), position + 1
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
