"""Reading and writing Kafka's non-flexible binary fields (int16-length strings, int32-length
bytes), as the records of ``__consumer_offsets`` and the consumer protocol use them."""

from __future__ import annotations

import struct

from odradek.errors import CorruptRecordError

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
STRING_MAX_BYTES = 32767


class BinaryWriter:
    """Appends fields to a growing buffer."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int16(self, value: int) -> BinaryWriter:
        self._parts.append(INT16.pack(value))
        return self

    def int32(self, value: int) -> BinaryWriter:
        self._parts.append(INT32.pack(value))
        return self

    def int64(self, value: int) -> BinaryWriter:
        self._parts.append(INT64.pack(value))
        return self

    def string(self, value: str | None) -> BinaryWriter:
        """An int16 length (-1 for None) then UTF-8 bytes."""
        if value is None:
            return self.int16(-1)
        encoded = value.encode()
        if len(encoded) > STRING_MAX_BYTES:
            raise ValueError(f"a string of {len(encoded)} bytes does not fit an int16 length")
        self._parts.append(INT16.pack(len(encoded)))
        self._parts.append(encoded)
        return self

    def bytes(self, value: bytes | None) -> BinaryWriter:
        """An int32 length (-1 for None) then the bytes."""
        if value is None:
            return self.int32(-1)
        self._parts.append(INT32.pack(len(value)))
        self._parts.append(bytes(value))
        return self

    def to_bytes(self) -> bytes:
        return b"".join(self._parts)


class BinaryReader:
    """Reads fields in order; CorruptRecordError when the buffer ends or lies about a length."""

    __slots__ = ("_buffer", "_position", "_what")

    def __init__(self, buffer: bytes | memoryview, what: str) -> None:
        self._buffer = bytes(buffer)
        self._position = 0
        self._what = what

    def _short(self, size: int) -> CorruptRecordError:
        return CorruptRecordError(
            f"{self._what} ends at byte {len(self._buffer)}, before a field of {size} bytes "
            f"at byte {self._position}"
        )

    def _unpack(self, layout: struct.Struct) -> int:
        try:
            (value,) = layout.unpack_from(self._buffer, self._position)
        except struct.error:
            raise self._short(layout.size) from None
        self._position += layout.size
        return value

    def _take(self, size: int) -> bytes:
        end = self._position + size
        if size < 0 or end > len(self._buffer):
            raise self._short(size)
        piece = self._buffer[self._position : end]
        self._position = end
        return piece

    def int16(self) -> int:
        return self._unpack(INT16)

    def int32(self) -> int:
        return self._unpack(INT32)

    def int64(self) -> int:
        return self._unpack(INT64)

    def string(self) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        try:
            return self._take(length).decode()
        except UnicodeDecodeError:
            raise CorruptRecordError(f"{self._what} has a string that is not UTF-8") from None

    def bytes(self) -> bytes | None:
        length = self.int32()
        return None if length == -1 else self._take(length)

    def unsigned_varint(self) -> int:
        """An unsigned varint (flexible versions' lengths and tags): at most 5 bytes."""
        value = 0
        for shift in range(0, 35, 7):
            (byte,) = self._take(1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise CorruptRecordError(f"{self._what} has an unsigned varint longer than 5 bytes")

    def compact_string(self) -> str | None:
        """A flexible version's string: its length plus one as an unsigned varint (0: null)."""
        length = self.unsigned_varint() - 1
        if length == -1:
            return None
        try:
            return self._take(length).decode()
        except UnicodeDecodeError:
            raise CorruptRecordError(f"{self._what} has a string that is not UTF-8") from None

    def compact_bytes(self) -> bytes | None:
        """A flexible version's bytes: their length plus one as an unsigned varint (0: null)."""
        length = self.unsigned_varint() - 1
        return None if length == -1 else self._take(length)

    def skip_tagged_fields(self) -> None:
        """A flexible version's tagged fields, passed over (none of them is needed)."""
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()  # the tag
            self._take(self.unsigned_varint())

    @property
    def remaining(self) -> int:
        return len(self._buffer) - self._position
