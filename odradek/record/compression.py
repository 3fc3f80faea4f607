"""The compression codecs of a record batch, wire-compatible with Kafka's Java client.

A batch's records are compressed as one block (SPEC 3). Each codec writes exactly what Kafka's
producer writes, so a Java consumer can read our batches and we can read theirs:

- gzip: a gzip stream (``GZIPOutputStream``), deflate level 6 as Java's default;
- snappy: the xerial framing of snappy-java's ``SnappyOutputStream`` (a 16-byte header, then
  32 KiB chunks each as a big-endian int32 length and a raw snappy block); a raw snappy block
  without the framing is also accepted on read, as Kafka's reader does;
- lz4: an LZ4 frame with independent 64 KiB blocks and a correct header checksum, no content
  size and no content checksum (Kafka's ``Lz4BlockOutputStream`` for magic 2);
- zstd: a zstd frame (level 3, Kafka's default); frames without a content size are accepted.

Decompression can be bounded (``max_bytes``): the output is produced a chunk at a time and the
codec stops as soon as it exceeds the bound, so a small "bomb" (a gigabyte of zeros in a few
kilobytes) costs at most the bound in memory and time, never its full expansion. A stream
whose declared sizes (snappy's block lengths, zstd's frame sizes and RLE blocks, gzip's
trailer) already exceed the bound is refused before anything is decompressed.
"""

from __future__ import annotations

import gzip
import struct
import threading
import zlib
from enum import IntEnum

import lz4.frame
import snappy
import zstandard

from odradek.errors import (
    CorruptRecordError,
    KafkaError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
)

GZIP_LEVEL = 6
ZSTD_LEVEL = 3
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

DECOMPRESSION_CHUNK_BYTES = 1024 * 1024
"""Output produced per step of a bounded decompression, between two checks of the bound."""

ZSTD_BLOCK_MAX_BYTES = 128 * 1024
"""The most one zstd block can decompress to (the format's Block_Maximum_Size)."""

GZIP_MIN_MEMBER_BYTES = 18
"""A gzip member's 10-byte header and 8-byte trailer (CRC-32, ISIZE)."""
GZIP_INPUT_PIECE_BYTES = 64 * 1024
"""Compressed input fed to zlib per step."""

_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
Buffer = bytes | bytearray | memoryview
_zstd = threading.local()


class CompressionType(IntEnum):
    """The codec in bits 0-2 of a batch's attributes; the value is Kafka's codec id."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """Kafka's name of the codec (``compression.type`` values, ``none`` for NONE)."""
        return self.name.lower()

    @classmethod
    def for_name(cls, name: str) -> CompressionType:
        """The codec called ``name`` (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        try:
            return cls[name.upper()]
        except KeyError:
            raise UnsupportedCompressionTypeError(
                f"unknown compression type {name!r}; expected one of "
                + ", ".join(codec.label for codec in cls)
            ) from None

    def compress(self, data: Buffer) -> bytes:
        """``data`` compressed as Kafka's Java producer would compress it."""
        if self is CompressionType.NONE:
            return bytes(data)
        if self is CompressionType.GZIP:
            return zlib.compress(data, GZIP_LEVEL, wbits=31)
        if self is CompressionType.SNAPPY:
            return _xerial_compress(data)
        if self is CompressionType.LZ4:
            return lz4.frame.compress(
                data,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        return _zstd_compressor().compress(data)

    def decompress(self, data: Buffer, max_bytes: int | None = None) -> bytes:
        """The bytes ``data`` was compressed from; CorruptRecordError if it is not valid.

        With ``max_bytes``, RecordListTooLargeError as soon as the output would exceed it:
        the codec is stopped there, the rest of the stream is never expanded.
        """
        try:
            return self._decompress(data, max_bytes)
        except KafkaError:
            raise
        except Exception as error:  # each codec library raises its own types
            raise CorruptRecordError(
                f"{self.label} decompression failed: {str(error) or type(error).__name__}"
            ) from error

    def _decompress(self, data: Buffer, max_bytes: int | None) -> bytes:
        if self is CompressionType.NONE:
            _check_output(self, len(data), max_bytes)
            return bytes(data)
        if self is CompressionType.GZIP:
            if max_bytes is None:
                return gzip.decompress(data)
            return _gzip_decompress(data, max_bytes)
        if self is CompressionType.SNAPPY:
            return _snappy_decompress(data, max_bytes)
        if self is CompressionType.LZ4:
            if max_bytes is None:
                return lz4.frame.decompress(data)
            return _lz4_decompress(data, max_bytes)
        return _zstd_decompress(data, max_bytes)


def _check_output(codec: CompressionType, size: int, max_bytes: int | None) -> None:
    """RecordListTooLargeError once ``size`` bytes of output exceed ``max_bytes``."""
    if max_bytes is not None and size > max_bytes:
        raise RecordListTooLargeError(
            f"{codec.label} data decompresses to more than {max_bytes} bytes"
        )


def _gzip_decompress(data: Buffer, max_bytes: int) -> bytes:
    """Every gzip member of ``data``, a chunk of output at a time, stopping past ``max_bytes``.

    A valid stream decompresses to at least the size its last member's trailer declares
    (ISIZE, the size modulo 2^32): past ``max_bytes``, it is refused before decompressing.
    Input is fed a piece at a time, so what is left over between steps stays small (zlib
    copies it, holding the GIL).
    """
    view = memoryview(data)
    total = len(view)
    declared = int.from_bytes(view[-4:], "little") if total >= GZIP_MIN_MEMBER_BYTES else 0
    if declared > max_bytes:
        raise RecordListTooLargeError(
            f"gzip data declares {declared} bytes in its trailer, more than {max_bytes} bytes"
        )
    if not total:
        raise CorruptRecordError("gzip stream is empty")
    parts = []
    produced = position = 0
    member = None
    pending: bytes | memoryview = b""
    while member is not None or pending or position < total:
        if member is None:
            member = zlib.decompressobj(wbits=31)
        if not pending:
            if position >= total:
                raise CorruptRecordError("gzip stream is truncated")
            pending = view[position : position + GZIP_INPUT_PIECE_BYTES]
            position += len(pending)
        chunk = member.decompress(pending, min(DECOMPRESSION_CHUNK_BYTES, max_bytes - produced + 1))
        produced += len(chunk)
        _check_output(CompressionType.GZIP, produced, max_bytes)
        parts.append(chunk)
        if member.eof:
            pending, member = member.unused_data, None
        else:
            pending = member.unconsumed_tail
    return b"".join(parts)


def _lz4_decompress(data: Buffer, max_bytes: int) -> bytes:
    """Every LZ4 frame of ``data``, a chunk of output at a time, stopping past ``max_bytes``."""
    parts = []
    produced = 0
    remaining = bytes(data)
    while remaining:
        frame = lz4.frame.LZ4FrameDecompressor()
        pending = remaining
        while not frame.eof:
            step = min(DECOMPRESSION_CHUNK_BYTES, max_bytes - produced + 1)
            chunk = frame.decompress(pending, max_length=step)
            produced += len(chunk)
            _check_output(CompressionType.LZ4, produced, max_bytes)
            parts.append(chunk)
            if frame.needs_input and not frame.eof:
                raise CorruptRecordError("lz4 stream is truncated")
            pending = b""
        remaining = frame.unused_data
    return b"".join(parts)


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    """Snappy in snappy-java's stream framing: header, then length-prefixed 32 KiB chunks."""
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = snappy.compress(view[start : start + XERIAL_BLOCK_SIZE].tobytes())
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer, max_bytes: int | None) -> bytes:
    """Undo the xerial framing if present (version fields are ignored, as Kafka does); each
    block's declared length is checked against ``max_bytes`` before it is decompressed."""
    data = bytes(data)
    if not data.startswith(XERIAL_MAGIC):
        _check_output(CompressionType.SNAPPY, _snappy_length(data, 0), max_bytes)
        return snappy.uncompress(data)
    if len(data) < len(XERIAL_HEADER):
        raise CorruptRecordError("snappy stream ends inside the xerial header")
    parts = []
    produced = 0
    position = len(XERIAL_HEADER)
    while position < len(data):
        if position + 4 > len(data):
            raise CorruptRecordError("snappy stream ends inside a chunk length")
        (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise CorruptRecordError(
                f"snappy chunk of {length} bytes at byte {position} overruns the stream"
            )
        produced += _snappy_length(data, position)
        _check_output(CompressionType.SNAPPY, produced, max_bytes)
        parts.append(snappy.uncompress(data[position : position + length]))
        position += length
    return b"".join(parts)


def _snappy_length(data: bytes, position: int) -> int:
    """The uncompressed length a raw snappy block at ``position`` declares (its varint)."""
    length = shift = 0
    for byte in data[position : position + 5]:
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return length
        shift += 7
    raise CorruptRecordError(f"snappy block at byte {position} has no valid length")


def _zstd_compressor() -> zstandard.ZstdCompressor:
    """One compressor per thread: zstandard contexts are not thread-safe but are worth reusing."""
    compressor = getattr(_zstd, "compressor", None)
    if compressor is None:
        compressor = _zstd.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return compressor


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    decompressor = getattr(_zstd, "decompressor", None)
    if decompressor is None:
        decompressor = _zstd.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def _zstd_decompress(data: Buffer, max_bytes: int | None) -> bytes:
    """Decompress every frame of ``data``; a frame cut short is an error, not a short result.

    With ``max_bytes``, the frames' headers are read first (see ``_zstd_sizes``): a stream
    whose declared sizes already exceed it is refused without decompressing anything; one
    whose bound fits is decompressed at once; the others are streamed and stopped at
    ``max_bytes``.
    """
    decompressor = _zstd_decompressor()
    if max_bytes is not None:
        at_least, at_most = _zstd_sizes(data, max_bytes)
        _check_output(CompressionType.ZSTD, at_least, max_bytes)
        if at_most > max_bytes:
            return _zstd_stream(decompressor, data, max_bytes)
    parts = []
    remaining = data
    while remaining:
        frame = decompressor.decompressobj()
        parts.append(frame.decompress(remaining))
        if not frame.eof:
            raise CorruptRecordError("zstd stream is truncated")
        remaining = frame.unused_data
    return b"".join(parts)


def _zstd_stream(decompressor: zstandard.ZstdDecompressor, data: Buffer, max_bytes: int) -> bytes:
    """Read the frames' output a chunk at a time, refusing it once it passes ``max_bytes``."""
    parts = []
    produced = 0
    with decompressor.stream_reader(data, read_across_frames=True, closefd=False) as reader:
        while chunk := reader.read(min(DECOMPRESSION_CHUNK_BYTES, max_bytes - produced + 1)):
            produced += len(chunk)
            _check_output(CompressionType.ZSTD, produced, max_bytes)
            parts.append(chunk)
    _zstd_sizes(data)  # within the bound after all: prove the frames whole
    return b"".join(parts)


def _zstd_sizes(data: Buffer, stop_above: int | None = None) -> tuple[int, int]:
    """What the zstd frames of ``data`` decompress to at least and at most, from their headers
    alone (a step per block, not per byte); CorruptRecordError unless they are whole frames.

    At least: the sizes frames declare, and raw and RLE blocks regenerate exactly; at most:
    a compressed block may regenerate up to a whole block. Returns as soon as the least
    passes ``stop_above`` or the most twice that, the rest unread.
    """
    view = memoryview(data)
    total = len(view)
    at_least = at_most = 0
    position = 0
    while position < total:
        if total - position < 8:
            raise CorruptRecordError(f"zstd stream ends inside a frame header at byte {position}")
        magic = int.from_bytes(view[position : position + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: its size, then its bytes
            position += 8 + int.from_bytes(view[position + 4 : position + 8], "little")
            continue
        if magic != 0xFD2FB528:
            raise CorruptRecordError(f"no zstd frame at byte {position}")
        descriptor = view[position + 4]
        header_bytes = view[position : position + 18].tobytes()
        declared = zstandard.frame_content_size(header_bytes)  # -1: not declared
        position += zstandard.frame_header_size(header_bytes)
        frame_least = frame_most = 0
        while True:
            if position + 3 > total:
                raise CorruptRecordError("zstd stream is truncated")
            header = int.from_bytes(view[position : position + 3], "little")
            block_type, block_size = (header >> 1) & 3, header >> 3
            if block_type == 0:  # raw: block_size bytes, as they are
                position += 3 + block_size
                frame_least, frame_most = frame_least + block_size, frame_most + block_size
            elif block_type == 1:  # RLE: one byte, repeated block_size times
                position += 4
                frame_least, frame_most = frame_least + block_size, frame_most + block_size
            elif block_type == 2:  # compressed: block_size bytes in, at most a block out
                position += 3 + block_size
                frame_most += ZSTD_BLOCK_MAX_BYTES
            else:
                raise CorruptRecordError(f"reserved zstd block type at byte {position}")
            if stop_above is not None and (
                at_least + max(frame_least, declared) > stop_above
                or at_most + frame_most > 2 * stop_above
            ):  # too much already: known to be refused, or to be streamed
                return at_least + max(frame_least, declared), at_most + frame_most
            if header & 1:
                break
        at_least += max(frame_least, declared)
        at_most += frame_most
        position += 4 if descriptor & 0x04 else 0  # the content checksum
        if position > total:
            raise CorruptRecordError("zstd stream is truncated")
    return at_least, at_most
