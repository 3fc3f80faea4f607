"""ByteReader: bounded reads of Kafka's primitive types from one request's bytes.

Every length read from the wire is checked against the bytes that remain before anything is
allocated for it, so a hostile size costs nothing: an array of N entries needs at least N
bytes, a string of N bytes needs N bytes. Violations raise InvalidRequestError naming the
field and the byte position.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

from odradek.errors import InvalidRequestError

_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")

MAX_UNSIGNED_VARINT_BYTES = 5


class UnusualShape(Exception):  # noqa: N818 - a signal between readers, never raised to callers
    """A request is not of the usual shape its fast reader takes: the checked reader, built on
    ByteReader, reads it (or names the field that is wrong)."""


def usual_size(
    data: memoryview, position: int, flexible: bool, legacy: struct.Struct = _INT32
) -> tuple[int, int]:
    """A fast reader's array or string length and the position after it: a one-byte compact
    length in flexible versions, else ``legacy`` (int32, or int16 for strings). Anything else,
    null included, is UnusualShape."""
    if flexible:
        byte = data[position]
        if byte == 0 or byte > 0x7F:
            raise UnusualShape
        return byte - 1, position + 1
    size = legacy.unpack_from(data, position)[0]
    if size < 0:
        raise UnusualShape
    return size, position + legacy.size


class ByteReader:
    """Reads ``data[position:end]`` front to back."""

    __slots__ = ("_data", "position", "end")

    def __init__(self, data: memoryview, position: int = 0, end: int | None = None) -> None:
        self._data = data
        self.position = position
        self.end = len(data) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.position

    def fail(self, what: str) -> InvalidRequestError:
        return InvalidRequestError(f"{what} at byte {self.position}")

    def _take(self, count: int, what: str) -> int:
        start = self.position
        if count > self.end - start:
            raise self.fail(f"{what} needs {count} bytes, {self.end - start} remain")
        self.position = start + count
        return start

    def int8(self, what: str = "int8") -> int:
        start = self._take(1, what)
        value = self._data[start]
        return value - 256 if value > 127 else value

    def int16(self, what: str = "int16") -> int:
        return _INT16.unpack_from(self._data, self._take(2, what))[0]

    def uint16(self, what: str = "uint16") -> int:
        return _UINT16.unpack_from(self._data, self._take(2, what))[0]

    def int32(self, what: str = "int32") -> int:
        return _INT32.unpack_from(self._data, self._take(4, what))[0]

    def uint32(self, what: str = "uint32") -> int:
        return _UINT32.unpack_from(self._data, self._take(4, what))[0]

    def int64(self, what: str = "int64") -> int:
        return _INT64.unpack_from(self._data, self._take(8, what))[0]

    def float64(self, what: str = "float64") -> float:
        return _FLOAT64.unpack_from(self._data, self._take(8, what))[0]

    def boolean(self, what: str = "bool") -> bool:
        return self.int8(what) != 0

    def uuid(self, what: str = "uuid") -> uuid.UUID:
        start = self._take(16, what)
        return uuid.UUID(bytes=bytes(self._data[start : start + 16]))

    def unsigned_varint(self, what: str = "varint") -> int:
        position = self.position
        if position < self.end and self._data[position] < 0x80:  # one byte: most lengths
            self.position = position + 1
            return self._data[position]
        value = shift = 0
        for _ in range(MAX_UNSIGNED_VARINT_BYTES):
            byte = self._data[self._take(1, what)]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise self.fail(f"{what} is a varint longer than {MAX_UNSIGNED_VARINT_BYTES} bytes")

    def length(self, compact: bool, nullable: bool, what: str, unit: int = 1) -> int | None:
        """A length prefix (int16 for legacy strings is handled by the caller: pass the
        value); None for null. Checks that ``unit`` bytes per element remain."""
        if compact:
            size = self.unsigned_varint(what) - 1
        else:
            size = self.int32(what)
        return self.check_length(size, nullable, what, unit)

    def check_length(self, size: int, nullable: bool, what: str, unit: int = 1) -> int | None:
        if size < 0:
            if size == -1 and nullable:
                return None
            raise self.fail(f"{what} has length {size}")
        if size * unit > self.remaining:
            raise self.fail(f"{what} has length {size} but only {self.remaining} bytes remain")
        return size

    def string(self, compact: bool, nullable: bool, what: str = "string") -> str | None:
        if compact:
            size = self.check_length(self.unsigned_varint(what) - 1, nullable, what)
        else:
            size = self.check_length(self.int16(what), nullable, what)
        if size is None:
            return None
        start = self._take(size, what)
        try:
            return str(self._data[start : start + size], "utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not valid UTF-8") from None

    def bytes_view(self, compact: bool, nullable: bool, what: str = "bytes") -> memoryview | None:
        """A bytes field as a view into the request (no copy)."""
        size = self.length(compact, nullable, what)
        if size is None:
            return None
        start = self._take(size, what)
        return self._data[start : start + size]

    def sub_reader(self, end: int) -> ByteReader:
        """A reader of this one's bytes from its position to ``end`` (a tagged field)."""
        return ByteReader(self._data, self.position, end)

    def unpack(self, fmt: struct.Struct, start: int) -> Any:
        """``fmt`` unpacked at ``start`` (bytes the caller has taken already)."""
        return fmt.unpack_from(self._data, start)[0]

    def unpack_all(self, fmt: struct.Struct, start: int) -> tuple[Any, ...]:
        """Every value of ``fmt`` unpacked at ``start`` (bytes the caller has taken already)."""
        return fmt.unpack_from(self._data, start)

    def peek(self) -> int:
        """The next byte, not taken (the caller checks one remains)."""
        return self._data[self.position]

    def skip(self, count: int, what: str) -> None:
        self._take(count, what)

    def skip_tagged_fields(self, what: str = "tagged fields") -> None:
        """Read a tagged-field section whose tags this reader does not know: skip them all."""
        position = self.position
        if position < self.end and self._data[position] == 0:  # none: nearly always
            self.position = position + 1
            return
        for tag, size in self.tagged_fields(what):
            self._take(size, f"{what} tag {tag}")

    def tagged_fields(self, what: str = "tagged fields") -> Iterator[tuple[int, int]]:
        """Each field of a tagged-field section as ``(tag, size)``, tags checked to increase
        and sizes to fit; the caller reads or skips each field's ``size`` bytes before the
        next."""
        count = self.check_length(self.unsigned_varint(what), False, what)
        last_tag = -1
        for _ in range(count):
            tag = self.unsigned_varint(what)
            if tag <= last_tag:
                raise self.fail(f"{what}: tag {tag} after tag {last_tag} (tags must increase)")
            last_tag = tag
            yield tag, self.check_length(self.unsigned_varint(what), False, f"{what} tag {tag}")
