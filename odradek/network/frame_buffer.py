"""FrameBuffer: the buffer one large frame is received into, growing as its bytes arrive.

Any frame format whose frames carry their size up front (odradek's msgpack frames, Kafka's
size-prefixed requests) can receive a frame's body into one: the socket reads straight into
it, and its memory follows what has arrived, reserved in the request memory pool first, so a
size prefix alone costs nothing and the broker's total stays within the pool.
"""

from __future__ import annotations

from odradek.network.request_memory_pool import RequestMemoryPool

FIRST_BYTES = 4096
"""A buffer starts at most this much past what has arrived."""
MIN_GROWTH_BYTES = 1024 * 1024
"""Once full, a buffer doubles, to at least this much (and at most the frame's size): a frame
of up to 1 MiB (a producer's batch, at most max.message.bytes by default) grows once, from what
arrived first straight to its size, instead of through a copy at every doubling. A client
claims that much only once it has sent the first buffer's bytes, and only within the pool."""
MIN_STEP_BYTES = 64 * 1024
"""The least a buffer grows by when the pool has no room for the usual step."""


class FrameBuffer:
    """The body of one frame of ``size`` bytes, ``received`` of them already in hand.

    ``get_buffer`` gives where the next read goes and ``advance`` says how much was read;
    when the buffer is full it reserves its next size in the pool, or sets ``blocked`` if the
    pool has no room: the caller then stops reading, waits for the pool and calls
    ``try_grow``. Once ``complete``, ``take`` hands the bytes and their reservation over;
    ``release`` gives the reservation back instead.
    """

    def __init__(self, size: int, received: bytes | memoryview, pool: RequestMemoryPool) -> None:
        capacity = min(size, max(2 * len(received), FIRST_BYTES))
        pool.reserve(capacity)  # what arrived is here already, and the reader must progress
        self._pool = pool
        self._data = bytearray(capacity)
        self._data[: len(received)] = received
        self.size = size
        self.filled = len(received)
        self.reserved = capacity
        self.blocked = False

    @property
    def complete(self) -> bool:
        return self.filled == self.size

    def get_buffer(self) -> memoryview:
        """Where the next read goes: the rest of the buffer, grown first if it may be."""
        data = self._data
        if self.filled == len(data) == self.reserved:
            # read while blocked (the transport had already decided to): a little more
            extra = min(FIRST_BYTES, self.size - len(data))
            self._pool.reserve(extra)
            self.reserved += extra
        if len(data) < self.reserved:
            self._grow()
        return memoryview(self._data)[self.filled :]

    def advance(self, count: int) -> bool:
        """``count`` bytes were read into the last buffer given; whether the frame is whole."""
        self.filled += count
        if self.filled == len(self._data) and self.filled < self.size:
            self.try_grow()
        return self.filled == self.size

    def try_grow(self) -> bool:
        """Reserve the next size of a full buffer (applied on the next ``get_buffer``, when
        no view of it is alive); False, and ``blocked``, if the pool has no room for it. A
        pool short of the usual step may still have room for a doubling: the frame
        progresses with that."""
        doubled = 2 * len(self._data)
        for floor in (MIN_GROWTH_BYTES, MIN_STEP_BYTES):
            capacity = min(self.size, max(doubled, floor))
            extra = capacity - self.reserved
            if extra <= 0 or self._pool.try_reserve(extra):
                self.reserved = max(capacity, self.reserved)
                self.blocked = False
                return True
        self.blocked = True
        return False

    def take(self) -> tuple[bytearray, int]:
        """The whole frame's bytes and the bytes reserved for them, now the caller's to
        release; the buffer holds nothing afterwards."""
        data, reserved = self._data, self.reserved
        self._data, self.reserved = bytearray(), 0
        return data, reserved

    def release(self) -> None:
        """Give back what the buffer reserved; it is not read into again."""
        self._pool.release(self.reserved)
        self._data, self.reserved = bytearray(), 0

    def _grow(self) -> None:
        """Grow to what is reserved: in place when no view of the buffer is alive (the
        transport released the last one), else into a new buffer."""
        try:
            self._data += bytes(self.reserved - len(self._data))
        except BufferError:
            grown = bytearray(self.reserved)
            grown[: self.filled] = memoryview(self._data)[: self.filled]
            self._data = grown
