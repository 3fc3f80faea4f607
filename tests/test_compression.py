"""Codecs: round trips, the exact framing Kafka's Java client writes, and broken input."""

from __future__ import annotations

import gzip
import os
import struct
import time
import tracemalloc

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from kafka import codec as kafka_codec

from odradek.errors import (
    CorruptRecordError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
)
from odradek.record.compression import (
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    CompressionType,
)

COMPRESSED = [codec for codec in CompressionType if codec is not CompressionType.NONE]
# Half random, half repetitive: compressible but not trivially so.
PAYLOAD = (os.urandom(5000) + b"odradek " * 5000) * 3


@pytest.mark.parametrize("codec", list(CompressionType))
def test_round_trip(codec: CompressionType) -> None:
    assert codec.decompress(codec.compress(PAYLOAD)) == PAYLOAD
    assert codec.decompress(codec.compress(b"")) == b""


@pytest.mark.parametrize("codec", list(CompressionType))
def test_accepts_bytearray_and_memoryview(codec: CompressionType) -> None:
    compressed = codec.compress(memoryview(bytearray(PAYLOAD)))
    assert codec.decompress(memoryview(bytearray(compressed))) == PAYLOAD


@settings(max_examples=examples(50), deadline=None)
@given(data=st.binary(max_size=3000), codec=st.sampled_from(list(CompressionType)))
def test_round_trip_random(data: bytes, codec: CompressionType) -> None:
    assert codec.decompress(codec.compress(data)) == data


def test_ids_labels_and_names_are_kafkas() -> None:
    assert [(int(codec), codec.label) for codec in CompressionType] == [
        (0, "none"),
        (1, "gzip"),
        (2, "snappy"),
        (3, "lz4"),
        (4, "zstd"),
    ]
    for codec in CompressionType:
        assert CompressionType.for_name(codec.label) is codec


@pytest.mark.parametrize("name", ["brotli", "", "producer", "uncompressed"])
def test_unknown_name_is_refused(name: str) -> None:
    with pytest.raises(UnsupportedCompressionTypeError, match="unknown compression type"):
        CompressionType.for_name(name)


def test_gzip_writes_a_gzip_stream() -> None:
    compressed = CompressionType.GZIP.compress(PAYLOAD)
    assert compressed[:2] == b"\x1f\x8b"
    assert gzip.decompress(compressed) == PAYLOAD


def test_gzip_reads_multi_member_streams() -> None:
    assert CompressionType.GZIP.decompress(gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_snappy_writes_xerial_framing_in_32k_chunks() -> None:
    compressed = CompressionType.SNAPPY.compress(PAYLOAD)
    assert compressed[:16] == XERIAL_HEADER == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    position, chunks = 16, []
    while position < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, position)
        chunks.append(snappy.uncompress(compressed[position + 4 : position + 4 + length]))
        position += 4 + length
    assert position == len(compressed)
    assert [len(chunk) for chunk in chunks[:-1]] == [XERIAL_BLOCK_SIZE] * (len(chunks) - 1)
    assert b"".join(chunks) == PAYLOAD


def test_snappy_reads_raw_blocks_and_other_writers_framing() -> None:
    assert CompressionType.SNAPPY.decompress(snappy.compress(PAYLOAD)) == PAYLOAD
    theirs = kafka_codec.snappy_encode(PAYLOAD, xerial_compatible=True, xerial_blocksize=4096)
    assert CompressionType.SNAPPY.decompress(theirs) == PAYLOAD
    assert kafka_codec.snappy_decode(CompressionType.SNAPPY.compress(PAYLOAD)) == PAYLOAD


def test_lz4_writes_kafkas_frame_descriptor() -> None:
    compressed = CompressionType.LZ4.compress(PAYLOAD)
    assert struct.unpack_from("<I", compressed)[0] == 0x184D2204
    # FLG: version 01, independent blocks, no block/content checksum, no content size.
    assert compressed[4] == 0b0110_0000
    assert compressed[5] == 0x40  # BD: 64 KiB maximum block size
    info = lz4.frame.get_frame_info(compressed)
    assert info["block_linked"] is False and info["content_size"] == 0


def test_lz4_header_checksum_is_verified() -> None:
    compressed = bytearray(CompressionType.LZ4.compress(PAYLOAD))
    compressed[6] ^= 0xFF  # HC: the frame descriptor checksum
    with pytest.raises(CorruptRecordError, match="lz4"):
        CompressionType.LZ4.decompress(compressed)


def test_zstd_reads_frames_without_content_size_and_several_frames() -> None:
    without_size = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert CompressionType.ZSTD.decompress(without_size) == PAYLOAD
    two_frames = CompressionType.ZSTD.compress(b"ab") + CompressionType.ZSTD.compress(b"cd")
    assert CompressionType.ZSTD.decompress(two_frames) == b"abcd"
    assert CompressionType.ZSTD.compress(PAYLOAD)[:4] == b"\x28\xb5\x2f\xfd"


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("keep", [0.5, 0.9, -1])
@pytest.mark.parametrize("max_bytes", [None, 1024 * 1024, len(PAYLOAD)])  # read at once, streamed
def test_truncated_input_is_corrupt(
    codec: CompressionType, keep: float, max_bytes: int | None
) -> None:
    compressed = codec.compress(PAYLOAD)
    cut = len(compressed) - 1 if keep == -1 else int(len(compressed) * keep)
    # A gzip stream's last four bytes declare its size: cut short, they declare anything.
    trusted_trailer = codec is CompressionType.GZIP and max_bytes is not None
    refused = (CorruptRecordError, RecordListTooLargeError) if trusted_trailer else (
        CorruptRecordError
    )
    with pytest.raises(refused, match=codec.label):
        codec.decompress(compressed[:cut], max_bytes)


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("max_bytes", [None, 1024 * 1024])
def test_garbage_is_corrupt(codec: CompressionType, max_bytes: int | None) -> None:
    with pytest.raises(CorruptRecordError, match=codec.label):
        garbage = b"\x82SNAPPY\x00garbage" if codec is CompressionType.SNAPPY else b"junk"
        codec.decompress(garbage, max_bytes)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_bounded_decompression_reads_what_fits(codec: CompressionType) -> None:
    compressed = codec.compress(PAYLOAD)
    assert codec.decompress(compressed, len(PAYLOAD)) == PAYLOAD
    with pytest.raises(RecordListTooLargeError, match=f"more than {len(PAYLOAD) - 1} bytes"):
        codec.decompress(compressed, len(PAYLOAD) - 1)


def test_gzip_refuses_a_trailer_declaring_more_than_the_bound_before_decompressing() -> None:
    forged = bytearray(CompressionType.GZIP.compress(PAYLOAD))
    forged[-4:] = (len(PAYLOAD) + 1).to_bytes(4, "little")  # decompressing would show the lie
    with pytest.raises(RecordListTooLargeError, match=f"declares {len(PAYLOAD) + 1} bytes"):
        CompressionType.GZIP.decompress(forged, len(PAYLOAD))


def test_zstd_refuses_rle_blocks_past_the_bound_from_their_headers() -> None:
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(64 * 1024 * 1024))
    started = time.perf_counter()
    for _ in range(100):
        with pytest.raises(RecordListTooLargeError):
            CompressionType.ZSTD.decompress(bomb, 1024 * 1024)
    assert time.perf_counter() - started < 0.5  # read from headers: not 100 x 1 MiB inflated


def test_bounded_zstd_reads_several_frames_and_frames_without_content_size() -> None:
    without_size = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    checksummed = zstandard.ZstdCompressor(write_checksum=True).compress(PAYLOAD)
    assert CompressionType.ZSTD.decompress(without_size + checksummed, 2 * len(PAYLOAD)) == (
        PAYLOAD + PAYLOAD
    )


BOMB_BYTES = 256 * 1024 * 1024
BOMB_LIMIT = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def bombs() -> dict[CompressionType, bytes]:
    """256 MiB of (mostly) zeros in each codec, a few KiB to a few MiB each."""
    zeros = bytes(BOMB_BYTES)
    made = {codec: codec.compress(zeros) for codec in COMPRESSED}
    # Sizes a stream declares would refuse these at once: hide them, so the codecs must stream
    # (zstd: no content size, and compressed blocks rather than RLE ones).
    mostly_zeros = (bytes(4095) + b"\x01") * (BOMB_BYTES // 4096)
    made[CompressionType.NONE] = zstandard.ZstdCompressor(write_content_size=False).compress(
        mostly_zeros
    )
    made[CompressionType.GZIP] = made[CompressionType.GZIP][:-4] + bytes(4)
    return made


@pytest.mark.parametrize("codec", list(CompressionType))
def test_a_bomb_stops_at_the_bound_without_expanding(
    codec: CompressionType, bombs: dict[CompressionType, bytes]
) -> None:
    # NONE stands for the zstd bomb without a content size here.
    bomb, codec = bombs[codec], CompressionType.ZSTD if codec is CompressionType.NONE else codec
    tracemalloc.start()
    try:
        with pytest.raises(RecordListTooLargeError, match=f"{codec.label} data decompresses"):
            codec.decompress(bomb, BOMB_LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * BOMB_LIMIT + 2 * len(bomb), f"{peak} bytes allocated for a {codec} bomb"


def test_snappy_chunk_overrunning_the_stream_is_corrupt() -> None:
    framed = XERIAL_HEADER + struct.pack(">i", 1000) + b"\x00" * 10
    with pytest.raises(CorruptRecordError, match="overruns"):
        CompressionType.SNAPPY.decompress(framed)
