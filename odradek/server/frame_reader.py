"""FrameReader: request frames received in place, for an asyncio BufferedProtocol."""

from __future__ import annotations

from odradek.protocol.frame import (
    SIZE_FIELDS_BYTES,
    Frame,
    FrameError,
    check_frame_size,
    decode_frame,
)
from odradek.server.request_memory_pool import RequestMemoryPool

RECEIVE_BUFFER_BYTES = 64 * 1024
LARGE_FRAME_FIRST_BYTES = 4096
"""A large frame's buffer starts at most this much past what has arrived, then doubles."""


class FrameReader:
    """Hands the socket the buffer to read into next, and returns the frames completed.

    Small frames are read into a receive buffer and copied out whole; the buffer is dropped
    whenever it holds no partial frame, so an idle connection holds none. A frame larger than
    that buffer gets a buffer of its own, once the size fields passed the protocol's checks,
    and the socket reads straight into it: a 1 MB produce request is not copied piece by piece
    as it is joined. That buffer grows as the frame's bytes arrive (doubling, up to the
    frame's size), never ahead of them: a size prefix alone costs nothing.

    Every buffer is reserved in the ``pool`` first. When a large frame's buffer cannot grow,
    ``blocked`` is set: the caller stops reading, waits for the pool and calls ``try_grow``.
    Each frame returned holds a reservation of ``len(frame.payload)`` bytes, which the caller
    releases when done with it; ``close`` releases what the reader itself holds.
    Raises the protocol's FrameError when the stream cannot be framed.
    """

    def __init__(self, max_frame_bytes: int, pool: RequestMemoryPool | None = None) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._pool = pool if pool is not None else RequestMemoryPool(None)
        self._buffer: bytearray | None = None
        self._start = 0  # buffered bytes not yet framed are _buffer[_start:_end]
        self._end = 0
        self._large: bytearray | None = None  # the body of a large frame being received
        self._large_size = 0  # the frame's size: its buffer grows up to it
        self._large_filled = 0
        self._reserved = 0  # reserved for _buffer or _large (their capacity, or what it grows to)
        self.blocked = False

    @property
    def pending(self) -> bool:
        """Whether part of a frame has arrived and the rest has not."""
        return self._buffer is not None or self._large is not None

    @property
    def pending_bytes(self) -> int:
        """How much of the frame being received has arrived."""
        if self._large is not None:
            return self._large_filled
        return self._end - self._start

    def get_buffer(self) -> memoryview:
        """Where the next read goes."""
        if self._large is not None:
            if self._large_filled == len(self._large) == self._reserved:
                # read while blocked (the transport had already decided to): a little more
                extra = min(LARGE_FRAME_FIRST_BYTES, self._large_size - len(self._large))
                self._pool.reserve(extra)
                self._reserved += extra
            if len(self._large) < self._reserved:
                self._grow_large()
            return memoryview(self._large)[self._large_filled :]
        if self._buffer is None:
            size = RECEIVE_BUFFER_BYTES
            if not self._pool.try_reserve(size):  # exhausted: just enough to frame
                size = SIZE_FIELDS_BYTES
                self._pool.reserve(size)
            self._buffer = bytearray(size)
            self._reserved = size
        elif self._end == len(self._buffer):
            self._compact()
        return memoryview(self._buffer)[self._end :]

    def buffer_updated(self, count: int) -> list[Frame]:
        """``count`` bytes were read into the last buffer given; the frames they complete."""
        if self._large is None:
            self._end += count
            return self._frames()
        self._large_filled += count
        if self._large_filled < self._large_size:
            if self._large_filled == len(self._large):
                self.try_grow()
            return []
        received, self._large = self._large, None
        reserved, self._reserved = self._reserved, 0
        try:
            frame = decode_frame(received)
        except FrameError:
            self._pool.release(reserved)
            raise
        self._pool.release(reserved - len(frame.payload))  # the payload's stays, for the caller
        return [frame]

    def try_grow(self) -> bool:
        """Reserve the next size of a full large-frame buffer; False (``blocked``) if the pool
        has no room for it."""
        capacity = min(self._large_size, max(2 * len(self._large), RECEIVE_BUFFER_BYTES))
        extra = capacity - self._reserved
        self.blocked = extra > 0 and not self._pool.try_reserve(extra)
        if not self.blocked:
            self._reserved = max(capacity, self._reserved)
        return not self.blocked

    def _grow_large(self) -> None:
        """Grow the large frame's buffer to what is reserved: in place when no view of it is
        alive (the transport released the last one), else into a new buffer."""
        extra = self._reserved - len(self._large)
        try:
            self._large += bytes(extra)
        except BufferError:
            grown = bytearray(self._reserved)
            grown[: self._large_filled] = memoryview(self._large)[: self._large_filled]
            self._large = grown

    def close(self) -> None:
        """Release what the reader holds; it reads no more."""
        self._pool.release(self._reserved)
        self._reserved = 0
        self._buffer = self._large = None
        self.blocked = False

    def _frames(self) -> list[Frame]:
        frames = []
        buffer = self._buffer
        while self._end - self._start >= 4:
            start, available = self._start, self._end - self._start
            frame_size = int.from_bytes(buffer[start : start + 4], "big")
            header_size = None
            if available >= SIZE_FIELDS_BYTES:
                header_size = int.from_bytes(buffer[start + 4 : start + 8], "big")
            check_frame_size(frame_size, header_size, self._max_frame_bytes)
            if available >= 4 + frame_size:
                frames.append(decode_frame(buffer[start + 4 : start + 4 + frame_size]))
                self._start += 4 + frame_size
            elif 4 + frame_size > len(buffer) and header_size is not None:
                self._start_large_frame(frame_size)
                break
            else:
                break
        if frames:  # copies of the receive buffer's bytes: each payload's reservation
            self._pool.reserve(sum(len(frame.payload) for frame in frames))
        if self._buffer is not None and self._start == self._end:
            self._pool.release(self._reserved)
            self._buffer, self._start, self._end, self._reserved = None, 0, 0, 0
        return frames

    def _start_large_frame(self, frame_size: int) -> None:
        """Move the part of a frame too large for the receive buffer into its own buffer,
        sized from what has arrived, not from what the frame will need."""
        received = self._end - self._start - 4
        capacity = min(frame_size, max(2 * received, LARGE_FRAME_FIRST_BYTES))
        self._pool.reserve(capacity)
        self._pool.release(self._reserved)
        self._large = bytearray(capacity)
        self._large[:received] = self._buffer[self._start + 4 : self._end]
        self._large_size, self._large_filled, self._reserved = frame_size, received, capacity
        self._buffer, self._start, self._end = None, 0, 0

    def _compact(self) -> None:
        """Move the start of an incomplete frame to the front, to read the rest after it."""
        pending = self._end - self._start
        self._buffer[:pending] = self._buffer[self._start : self._end]
        self._start, self._end = 0, pending
