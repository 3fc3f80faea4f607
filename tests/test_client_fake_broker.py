"""The fake broker the client tests run against: it answers garbage, bad headers and bad fields
as the real one does, and its partition log assigns offsets and reads like a UnifiedLog."""

from __future__ import annotations

import asyncio
import struct

import pytest
from fake_broker import FakeBroker, PartitionLog, async_test

from odradek.errors import KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.frame import FrameDecoder, encode_frame
from odradek.protocol.messages import decode_response
from odradek.record.record_batch_builder import build_batch


async def exchange(broker: FakeBroker, data: bytes) -> bytes:
    """Write raw bytes to the broker and read whatever comes back until it closes or idles."""
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    writer.write(data)
    await writer.drain()
    try:
        async with asyncio.timeout(0.5):
            return await reader.read(1 << 16)
    except TimeoutError:
        return b"<open>"
    finally:
        writer.close()


@async_test
async def test_garbage_makes_the_broker_close_the_connection() -> None:
    async with FakeBroker() as broker:
        assert await exchange(broker, struct.pack(">II", 12, 99) + b"x" * 8) == b""


@async_test
async def test_unanswerable_header_closes_the_connection() -> None:
    async with FakeBroker() as broker:
        assert await exchange(broker, encode_frame({"api": 3, "v": 0})) == b""


@async_test
async def test_unknown_version_is_answered_with_the_supported_range() -> None:
    async with FakeBroker() as broker:
        reply = await exchange(broker, encode_frame({"api": 3, "v": 9, "id": 5}))
    (frame,) = FrameDecoder().feed(reply)
    assert frame.header["id"] == 5
    with pytest.raises(KafkaError, match=r"UNSUPPORTED_VERSION: Metadata v9 .* v0\.\.v0"):
        decode_response(ApiKey.METADATA, frame)


@async_test
async def test_bad_field_is_answered_with_invalid_request() -> None:
    async with FakeBroker() as broker:
        reply = await exchange(broker, encode_frame({"api": 1, "v": 0, "id": 6, "partitions": 3}))
    (frame,) = FrameDecoder().feed(reply)
    message = "partitions must be an array, got int 3"
    assert frame.header == {"id": 6, "error": 42, "message": message}


def test_log_assigns_offsets_and_reads_from_the_batch_holding_the_offset() -> None:
    log = PartitionLog()
    first = build_batch([(1, None, b"a", ()), (2, None, b"b", ())])
    second = build_batch([(3, None, b"c", ())])
    assert log.append(memoryview(first + second)) == 0
    assert log.log_end_offset == 3
    assert log.read(1, 1 << 20) == log.batches[0] + log.batches[1]
    assert log.read(2, 1 << 20) == log.batches[1]
    assert len(log.read(0, len(first) + 5)) == len(first) + 5
    assert log.offset_for_time(3) == (2, 3)
