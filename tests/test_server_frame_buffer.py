"""FrameBuffer: one frame's buffer grows with what arrives, within the request memory pool."""

from __future__ import annotations

from odradek.network.frame_buffer import FIRST_BYTES, MIN_GROWTH_BYTES, FrameBuffer
from odradek.network.request_memory_pool import RequestMemoryPool

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


def test_a_frame_up_to_a_mebibyte_grows_once_straight_to_its_size() -> None:
    """Growing copies what arrived: a producer's large request is copied once, not at every
    doubling from the first few kilobytes."""
    pool = RequestMemoryPool(None)
    size = 900_000
    buffer = FrameBuffer(size, b"abc", pool)
    capacities = [buffer.reserved]
    data = bytes(range(256)) * (size // 256 + 1)
    position = 3
    while not buffer.complete:
        view = buffer.get_buffer()
        capacities.append(len(view) + buffer.filled)
        count = min(len(view), 65536)
        view[:count] = data[position : position + count]
        del view
        position += count
        buffer.advance(count)
    assert sorted(set(capacities)) == [FIRST_BYTES, size]
    received, reserved = buffer.take()
    assert received == b"abc" + data[3:size] and reserved == size == pool.reserved


def test_a_larger_frame_doubles_from_a_mebibyte() -> None:
    pool = RequestMemoryPool(None)
    buffer = FrameBuffer(10 * MIB, b"", pool)
    sizes = {buffer.reserved}
    while buffer.filled < 5 * MIB:
        view = buffer.get_buffer()
        count = min(len(view), 65536)
        del view
        buffer.advance(count)
        sizes.add(buffer.reserved)
    assert sorted(sizes) == [FIRST_BYTES, MIN_GROWTH_BYTES, 2 * MIB, 4 * MIB, 8 * MIB]
    buffer.release()
    assert pool.reserved == 0


def test_a_pool_short_of_the_usual_step_still_lets_the_frame_progress() -> None:
    pool = RequestMemoryPool(MIN_GROWTH_BYTES // 2)
    data = bytes(2 * MIN_GROWTH_BYTES)
    buffer = FrameBuffer(len(data), b"", pool)
    assert not fill(buffer, data)
    assert buffer.blocked
    assert MIN_GROWTH_BYTES // 4 < pool.reserved <= pool.capacity  # it grew while it could
