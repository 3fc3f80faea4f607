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

from odradek.errors import CorruptRecordError, UnsupportedCompressionTypeError

GZIP_LEVEL = 6
ZSTD_LEVEL = 3
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

_XERIAL_BLOCK_LENGTH = struct.Struct(">i")
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

    def compress(self, data: bytes | bytearray | memoryview) -> bytes:
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

    def decompress(self, data: bytes | bytearray | memoryview) -> bytes:
        """The bytes ``data`` was compressed from; CorruptRecordError if it is not valid."""
        try:
            return self._decompress(data)
        except CorruptRecordError:
            raise
        except Exception as error:  # each codec library raises its own types
            raise CorruptRecordError(
                f"{self.label} decompression failed: {str(error) or type(error).__name__}"
            ) from error

    def _decompress(self, data: bytes | bytearray | memoryview) -> bytes:
        if self is CompressionType.NONE:
            return bytes(data)
        if self is CompressionType.GZIP:
            return gzip.decompress(data)
        if self is CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if self is CompressionType.LZ4:
            return lz4.frame.decompress(data)
        return _zstd_decompress(data)


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    """Snappy in snappy-java's stream framing: header, then length-prefixed 32 KiB chunks."""
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = snappy.compress(view[start : start + XERIAL_BLOCK_SIZE].tobytes())
        parts.append(_XERIAL_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    """Undo the xerial framing if present (version fields are ignored, as Kafka does)."""
    data = bytes(data)
    if not data.startswith(XERIAL_MAGIC):
        return snappy.uncompress(data)
    if len(data) < len(XERIAL_HEADER):
        raise CorruptRecordError("snappy stream ends inside the xerial header")
    parts = []
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
        parts.append(snappy.uncompress(data[position : position + length]))
        position += length
    return b"".join(parts)


def _zstd_compressor() -> zstandard.ZstdCompressor:
    """One compressor per thread: zstandard contexts are not thread-safe but are worth reusing."""
    compressor = getattr(_zstd, "compressor", None)
    if compressor is None:
        compressor = _zstd.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return compressor


def _zstd_decompress(data: bytes | bytearray | memoryview) -> bytes:
    """Decompress every frame of ``data``; a frame cut short is an error, not a short result."""
    decompressor = getattr(_zstd, "decompressor", None)
    if decompressor is None:
        decompressor = _zstd.decompressor = zstandard.ZstdDecompressor()
    parts = []
    remaining = data
    while remaining:
        frame = decompressor.decompressobj()
        parts.append(frame.decompress(remaining))
        if not frame.eof:
            raise CorruptRecordError("zstd stream is truncated")
        remaining = frame.unused_data
    return b"".join(parts)
