"""FrameReader and KafkaFrameReader: the frames of any byte stream, however it is split."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.network.frame_buffer import FIRST_BYTES
from odradek.network.frame_reader import RECEIVE_BUFFER_BYTES, FrameReader
from odradek.network.kafka_frame_reader import KafkaFrameReader
from odradek.network.request_memory_pool import RequestMemoryPool
from odradek.protocol.frame import FrameDecoder, FrameError, encode_frame


def read_all(reader: FrameReader, stream: bytes, chunk_sizes: list[int]) -> list:
    """Feed ``stream`` as the socket would, in reads of at most the given sizes."""
    frames = []
    position, turn = 0, 0
    while position < len(stream):
        buffer = reader.get_buffer()
        size = min(len(buffer), chunk_sizes[turn % len(chunk_sizes)], len(stream) - position)
        buffer[:size] = stream[position : position + size]
        frames += reader.buffer_updated(size)
        position, turn = position + size, turn + 1
    return frames


payload_sizes = st.one_of(
    st.integers(0, 100), st.integers(RECEIVE_BUFFER_BYTES - 100, 3 * RECEIVE_BUFFER_BYTES)
)


@settings(max_examples=examples(40), deadline=None)
@given(
    sizes=st.lists(payload_sizes, min_size=1, max_size=6),
    chunk_sizes=st.lists(st.integers(1, 2 * RECEIVE_BUFFER_BYTES), min_size=1, max_size=5),
)
def test_frames_match_the_protocol_decoder(sizes: list[int], chunk_sizes: list[int]) -> None:
    stream = b"".join(
        encode_frame({"id": n, "n": size}, bytes([n % 251]) * size) for n, size in enumerate(sizes)
    )
    expected = FrameDecoder(1 << 30).feed(stream)
    frames = read_all(FrameReader(1 << 30), stream, chunk_sizes)
    assert [(f.header, bytes(f.payload)) for f in frames] == [
        (f.header, bytes(f.payload)) for f in expected
    ]


def test_large_frame_is_received_in_its_own_buffer() -> None:
    reader = FrameReader(1 << 30)
    stream = encode_frame({"id": 1}, b"x" * (2 * RECEIVE_BUFFER_BYTES))
    assert read_all(reader, stream, [RECEIVE_BUFFER_BYTES]) != []
    first = reader.get_buffer()
    assert len(first) == RECEIVE_BUFFER_BYTES  # back to the shared buffer afterwards
    read_all(reader, stream[:100], [100])
    buffer = reader.get_buffer()  # the rest goes straight into its own, as it arrives
    assert len(buffer) == FIRST_BYTES - 96


def test_a_large_frame_buffer_grows_with_what_arrives_not_its_size_prefix() -> None:
    pool = RequestMemoryPool(None)
    reader = FrameReader(1 << 30, pool)
    stream = encode_frame({"id": 1}, b"x" * (100 * 1024 * 1024))
    read_all(reader, stream[:8], [8])
    assert pool.reserved <= FIRST_BYTES  # not 100 MiB
    read_all(reader, stream[:1_000_000], [65536])
    assert 1_000_000 <= pool.reserved <= 2 * 1_000_000 + RECEIVE_BUFFER_BYTES
    reader.close()
    assert pool.reserved == 0


def test_a_frame_waits_when_the_pool_cannot_grow_its_buffer() -> None:
    pool = RequestMemoryPool(RECEIVE_BUFFER_BYTES * 4)
    reader = FrameReader(1 << 30, pool)
    stream = encode_frame({"id": 1}, b"x" * (RECEIVE_BUFFER_BYTES * 8))
    position = 0
    while not reader.blocked:
        buffer = reader.get_buffer()
        size = min(len(buffer), 4096)
        buffer[:size] = stream[position : position + size]
        position += size
        assert reader.buffer_updated(size) == []
    del buffer
    assert pool.reserved <= pool.capacity
    other = FrameReader(1 << 30, pool)
    assert len(other.get_buffer()) < RECEIVE_BUFFER_BYTES  # exhausted: just enough to frame
    other.close()
    pool.capacity = None  # memory freed elsewhere
    assert reader.try_grow()
    frames = read_all(reader, stream[position:], [RECEIVE_BUFFER_BYTES])
    assert [bytes(frame.payload) for frame in frames] == [b"x" * (RECEIVE_BUFFER_BYTES * 8)]
    assert pool.reserved == len(frames[0].payload)  # the caller's, until it releases it
    pool.release(len(frames[0].payload))
    assert pool.reserved == 0


@settings(max_examples=examples(30), deadline=None)
@given(
    sizes=st.lists(payload_sizes, min_size=1, max_size=6),
    chunk_sizes=st.lists(st.integers(1, 2 * RECEIVE_BUFFER_BYTES), min_size=1, max_size=5),
)
def test_every_reserved_byte_is_accounted_for(sizes: list[int], chunk_sizes: list[int]) -> None:
    pool = RequestMemoryPool(None)
    stream = b"".join(encode_frame({"n": size}, b"y" * size) for size in sizes)
    reader = FrameReader(1 << 30, pool)
    frames = read_all(reader, stream + encode_frame({}, b"z" * 100)[:50], chunk_sizes)
    held = sum(len(frame.payload) for frame in frames)
    assert reader.pending and pool.reserved > held
    reader.close()
    assert pool.reserved == held


@pytest.mark.parametrize(
    "prefix",
    [
        (1001).to_bytes(4, "big"),  # over the limit: refused from the first 4 bytes
        (3).to_bytes(4, "big"),
        (10).to_bytes(4, "big") + (7).to_bytes(4, "big"),  # header larger than the frame
    ],
)
def test_bad_sizes_are_refused_before_the_frame_arrives(prefix: bytes) -> None:
    reader = FrameReader(1000)
    buffer = reader.get_buffer()
    buffer[: len(prefix)] = prefix
    with pytest.raises(FrameError):
        reader.buffer_updated(len(prefix))


# --- Kafka's framing on the same reader ---------------------------------------------------------


def kafka_frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big", signed=True) + body


def kafka_request(correlation_id: int, size: int) -> bytes:
    """An 8-byte request header (api key 18, version 0) and ``size`` bytes after it."""
    return (18).to_bytes(2, "big") + bytes(2) + correlation_id.to_bytes(4, "big") + b"k" * size


@settings(max_examples=examples(40), deadline=None)
@given(
    sizes=st.lists(payload_sizes, min_size=1, max_size=6),
    chunk_sizes=st.lists(st.integers(1, 2 * RECEIVE_BUFFER_BYTES), min_size=1, max_size=5),
)
def test_kafka_frames_come_whole_and_each_holds_its_reservation(
    sizes: list[int], chunk_sizes: list[int]
) -> None:
    pool = RequestMemoryPool(None)
    requests = [kafka_request(n, size) for n, size in enumerate(sizes)]
    reader = KafkaFrameReader(1 << 30, pool)
    stream = b"".join(map(kafka_frame, requests))
    frames = read_all(reader, stream + kafka_frame(kafka_request(99, 100))[:50], chunk_sizes)
    assert [bytes(frame) for frame in frames] == requests
    held = sum(map(len, frames))
    assert reader.pending and pool.reserved > held
    reader.close()
    assert pool.reserved == held


def test_a_large_kafka_frame_buffer_grows_with_what_arrives_not_its_size_prefix() -> None:
    pool = RequestMemoryPool(None)
    reader = KafkaFrameReader(1 << 30, pool)
    stream = kafka_frame(kafka_request(1, 100 * 1024 * 1024))
    read_all(reader, stream[:12], [12])
    assert pool.reserved <= FIRST_BYTES  # not 100 MiB
    read_all(reader, stream[12:1_000_000], [65536])
    assert 1_000_000 <= pool.reserved <= 2 * 1_000_000 + RECEIVE_BUFFER_BYTES
    reader.close()
    assert pool.reserved == 0


def test_a_kafka_frame_waits_when_the_pool_cannot_grow_its_buffer() -> None:
    pool = RequestMemoryPool(RECEIVE_BUFFER_BYTES * 4)
    reader = KafkaFrameReader(1 << 30, pool)
    request = kafka_request(1, RECEIVE_BUFFER_BYTES * 8)
    stream = kafka_frame(request)
    position = 0
    while not reader.blocked:
        buffer = reader.get_buffer()
        size = min(len(buffer), 4096)
        buffer[:size] = stream[position : position + size]
        position += size
        assert reader.buffer_updated(size) == []
    del buffer
    assert pool.reserved <= pool.capacity
    pool.capacity = None  # memory freed elsewhere
    assert reader.try_grow()
    frames = read_all(reader, stream[position:], [RECEIVE_BUFFER_BYTES])
    assert [bytes(frame) for frame in frames] == [request]
    assert pool.reserved == len(request)  # the caller's, until it releases it


@pytest.mark.parametrize("size", [7, -1, 1001])
def test_kafka_sizes_outside_the_limits_are_refused_from_the_prefix(size: int) -> None:
    reader = KafkaFrameReader(1000)
    buffer = reader.get_buffer()
    buffer[:4] = size.to_bytes(4, "big", signed=True)
    with pytest.raises(FrameError, match="socket.request.max.bytes=1000"):
        reader.buffer_updated(4)


@pytest.mark.parametrize("size", [8, 1000])
def test_kafka_sizes_at_the_limits_are_taken(size: int) -> None:
    reader = KafkaFrameReader(1000)
    request = size.to_bytes(4, "big") + bytes(range(8)) + bytes(size - 8)
    frames = read_all(reader, request * 2, [len(request) * 2])
    assert [bytes(frame) for frame in frames] == [request[4:]] * 2
    reader.max_frame_bytes = size - 1  # (lowered: the next prefix is refused)
    buffer = reader.get_buffer()
    buffer[:4] = request[:4]
    with pytest.raises(FrameError, match=f"socket.request.max.bytes={size - 1}"):
        reader.buffer_updated(4)


# --- one receive buffer for every connection of a thread ----------------------------------------


@settings(max_examples=examples(40), deadline=None)
@given(
    sizes=st.lists(st.lists(payload_sizes, min_size=1, max_size=4), min_size=2, max_size=3),
    chunk_sizes=st.lists(st.integers(1, 2 * RECEIVE_BUFFER_BYTES), min_size=1, max_size=5),
)
def test_readers_taking_turns_at_the_shared_buffer_each_get_their_own_frames(
    sizes: list[list[int]], chunk_sizes: list[int]
) -> None:
    pool = RequestMemoryPool(None)
    streams = [
        b"".join(encode_frame({"c": c, "n": n}, bytes([c]) * size) for n, size in enumerate(sz))
        for c, sz in enumerate(sizes)
    ]
    readers = [FrameReader(1 << 30, pool) for _ in streams]
    positions = [0] * len(streams)
    frames: list[list] = [[] for _ in streams]
    turn = 0
    while any(position < len(stream) for position, stream in zip(positions, streams, strict=True)):
        for c, (reader, stream) in enumerate(zip(readers, streams, strict=True)):
            if positions[c] == len(stream):
                continue
            buffer = reader.get_buffer()  # a read: its bytes are framed before the next one
            size = min(
                len(buffer), chunk_sizes[turn % len(chunk_sizes)], len(stream) - positions[c]
            )
            buffer[:size] = stream[positions[c] : positions[c] + size]
            frames[c] += reader.buffer_updated(size)
            positions[c] += size
            turn += 1
    for c, stream in enumerate(streams):
        expected = FrameDecoder(1 << 30).feed(stream)
        assert [(f.header, bytes(f.payload)) for f in frames[c]] == [
            (f.header, bytes(f.payload)) for f in expected
        ]
        assert not readers[c].pending
    assert pool.reserved == sum(len(f.payload) for got in frames for f in got)


def test_a_reader_between_frames_holds_no_memory_and_shares_its_buffer() -> None:
    pool = RequestMemoryPool(None)
    reader, other = FrameReader(1 << 30, pool), KafkaFrameReader(1 << 30, pool)
    frames = read_all(reader, encode_frame({"id": 1}, b"p" * 10) * 3, [RECEIVE_BUFFER_BYTES])
    assert len(frames) == 3 and not reader.pending
    assert pool.reserved == 30  # the frames' payloads, nothing for a buffer
    assert reader.get_buffer().obj is other.get_buffer().obj
