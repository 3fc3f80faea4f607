"""FrameBuffer: one frame's buffer grows with what arrives, within the request memory pool."""

from __future__ import annotations

from odradek.server.frame_buffer import FIRST_BYTES, MIN_GROWTH_BYTES, FrameBuffer
from odradek.server.request_memory_pool import RequestMemoryPool

MIB = 1024 * 1024


def fill(buffer: FrameBuffer, data: bytes) -> bool:
    """Read ``data`` into ``buffer`` as a socket would, as far as it lets; whether whole."""
    position = 0
    while position < len(data) and not buffer.blocked:
        view = buffer.get_buffer()
        count = min(len(view), len(data) - position)
        view[:count] = data[position : position + count]
        del view
        position += count
        if buffer.advance(count):
            return True
    return False


def test_memory_follows_the_bytes_that_arrived_not_the_size_announced() -> None:
    pool = RequestMemoryPool(None)
    buffer = FrameBuffer(100 * MIB, b"abc", pool)
    assert pool.reserved == buffer.reserved == FIRST_BYTES
    fill(buffer, bytes(MIB - 3))
    assert MIB <= pool.reserved <= 2 * MIB
    buffer.release()
    assert pool.reserved == 0


def test_a_whole_frame_and_its_reservation_are_handed_over() -> None:
    pool = RequestMemoryPool(None)
    data = bytes(range(256)) * 1000
    buffer = FrameBuffer(len(data), data[:10], pool)
    assert fill(buffer, data[10:]) and buffer.complete
    received, reserved = buffer.take()
    assert received == data and reserved == pool.reserved == len(data)


def test_a_buffer_the_pool_cannot_grow_is_blocked_until_it_can() -> None:
    pool = RequestMemoryPool(2 * MIN_GROWTH_BYTES)
    data = bytes(8 * MIN_GROWTH_BYTES)
    buffer = FrameBuffer(len(data), b"", pool)
    assert not fill(buffer, data)
    assert buffer.blocked and pool.reserved <= pool.capacity
    assert not buffer.try_grow()
    pool.capacity = None
    assert buffer.try_grow() and not buffer.blocked
    assert fill(buffer, data[buffer.filled :])
