"""FrameReader: request frames received in place, for an asyncio BufferedProtocol.

SizePrefixedFrameReader holds what every size-prefixed frame format shares (odradek's msgpack
frames, Kafka's requests): receiving, buffers grown as bytes arrive, the request memory pool.
A format says only how its prefix is checked and how a whole frame is decoded.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from odradek.protocol.frame import (
    SIZE_FIELDS_BYTES,
    Frame,
    FrameError,
    check_frame_size,
    decode_frame,
)
from odradek.server.frame_buffer import FrameBuffer
from odradek.server.request_memory_pool import RequestMemoryPool

RECEIVE_BUFFER_BYTES = 64 * 1024

_SIZES = struct.Struct(">II")
_SIZE = struct.Struct(">I")

FrameT = TypeVar("FrameT")


class SizePrefixedFrameReader(ABC, Generic[FrameT]):
    """Hands the socket the buffer to read into next, and returns the frames completed.

    Every frame is ``uint32 size`` then ``size`` bytes. Small frames are read into a receive
    buffer and copied out whole; the buffer is dropped whenever it holds no partial frame, so
    an idle connection holds none. A frame larger than that buffer gets a FrameBuffer of its
    own, once its prefix passed the format's checks, and the socket reads straight into it: a
    1 MB produce request is not copied piece by piece as it is joined. That buffer grows as
    the frame's bytes arrive, never ahead of them: a size prefix alone costs nothing.

    Every buffer is reserved in the ``pool`` first. When a large frame's buffer cannot grow,
    ``blocked`` is set: the caller stops reading, waits for the pool and calls ``try_grow``.
    Each frame returned holds a reservation of ``retained_bytes(frame)``, which the caller
    releases when done with it; ``close`` releases what the reader itself holds.
    Raises FrameError when the stream cannot be framed.
    """

    prefix_bytes = 4
    """How much of a frame's start ``check_prefix`` needs to vouch for its size."""

    def __init__(self, max_frame_bytes: int, pool: RequestMemoryPool | None = None) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._pool = pool if pool is not None else RequestMemoryPool(None)
        self._buffer: bytearray | None = None
        self._start = 0  # buffered bytes not yet framed are _buffer[_start:_end]
        self._end = 0
        self._reserved = 0  # for _buffer
        self._large: FrameBuffer | None = None  # the body of a large frame being received

    # --- what a frame format says ------------------------------------------------------------

    @abstractmethod
    def check_prefix(self, buffer: bytearray, start: int, available: int) -> int:
        """The size of the frame at ``buffer[start:]``, of which ``available`` bytes (at least
        4, maybe fewer than ``prefix_bytes``) are in; raises FrameError as soon as the bytes
        in hand rule it out."""
        ...

    @abstractmethod
    def decode(self, body: bytearray) -> FrameT:
        """The frame whose bytes after its size prefix are ``body``."""
        ...

    @abstractmethod
    def retained_bytes(self, frame: FrameT) -> int:
        """How much of the frame's reservation stays with it once decoded."""
        ...

    # --- receiving ---------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """Whether part of a frame has arrived and the rest has not."""
        return self._buffer is not None or self._large is not None

    @property
    def pending_bytes(self) -> int:
        """How much of the frame being received has arrived."""
        if self._large is not None:
            return self._large.filled
        return self._end - self._start

    @property
    def blocked(self) -> bool:
        """Whether the frame being received waits for request memory to grow its buffer."""
        return self._large is not None and self._large.blocked

    def try_grow(self) -> bool:
        """Try again to grow the buffer of the frame being received; whether it may read."""
        return self._large is None or self._large.try_grow()

    @property
    def max_frame_bytes(self) -> int:
        return self._max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        """The limit changes (raised once a SASL client has authenticated)."""
        self._max_frame_bytes = value

    def get_buffer(self) -> memoryview:
        """Where the next read goes."""
        if self._large is not None:
            return self._large.get_buffer()
        if self._buffer is None:
            size = RECEIVE_BUFFER_BYTES
            if not self._pool.try_reserve(size):  # exhausted: just enough to frame
                size = self.prefix_bytes
                self._pool.reserve(size)
            self._buffer = bytearray(size)
            self._reserved = size
        elif self._end == len(self._buffer):
            self._compact()
        return memoryview(self._buffer)[self._end :]

    def buffer_updated(self, count: int) -> list[FrameT]:
        """``count`` bytes were read into the last buffer given; the frames they complete."""
        large = self._large
        if large is None:
            self._end += count
            return self._frames()
        if not large.advance(count):
            return []
        self._large = None
        received, reserved = large.take()
        try:
            frame = self.decode(received)
        except FrameError:
            self._pool.release(reserved)
            raise
        self._pool.release(reserved - self.retained_bytes(frame))  # the rest is the caller's
        return [frame]

    def close(self) -> None:
        """Release what the reader holds; it reads no more."""
        self._pool.release(self._reserved)
        if self._large is not None:
            self._large.release()
        self._buffer, self._large, self._reserved = None, None, 0

    def _frames(self) -> list[FrameT]:
        frames = []
        buffer = self._buffer
        while self._end - self._start >= 4:
            start, available = self._start, self._end - self._start
            frame_size = self.check_prefix(buffer, start, available)
            if available >= 4 + frame_size:
                frames.append(self.decode(buffer[start + 4 : start + 4 + frame_size]))
                self._start += 4 + frame_size
            elif 4 + frame_size > len(buffer) and available >= self.prefix_bytes:
                self._start_large_frame(frame_size)
                break
            else:
                break
        if frames:  # copies of the receive buffer's bytes: each frame's reservation
            self._pool.reserve(sum(map(self.retained_bytes, frames)))
        if self._buffer is not None and self._start == self._end:
            self._pool.release(self._reserved)
            self._buffer, self._start, self._end, self._reserved = None, 0, 0, 0
        return frames

    def _start_large_frame(self, frame_size: int) -> None:
        """Move the part of a frame too large for the receive buffer into its own buffer,
        sized from what has arrived, not from what the frame will need."""
        with memoryview(self._buffer) as view:
            self._large = FrameBuffer(frame_size, view[self._start + 4 : self._end], self._pool)
        self._pool.release(self._reserved)
        self._buffer, self._start, self._end, self._reserved = None, 0, 0, 0

    def _compact(self) -> None:
        """Move the start of an incomplete frame to the front, to read the rest after it."""
        pending = self._end - self._start
        self._buffer[:pending] = self._buffer[self._start : self._end]
        self._start, self._end = 0, pending


class FrameReader(SizePrefixedFrameReader[Frame]):
    """odradek's msgpack frames: ``uint32 frame_size | uint32 header_size | header | payload``,
    both sizes checked before anything is allocated for the frame. A frame's reservation is
    its payload's."""

    prefix_bytes = SIZE_FIELDS_BYTES

    def check_prefix(self, buffer: bytearray, start: int, available: int) -> int:
        if available >= SIZE_FIELDS_BYTES:
            frame_size, header_size = _SIZES.unpack_from(buffer, start)
            if 4 <= frame_size <= self._max_frame_bytes and header_size <= frame_size - 4:
                return frame_size  # the common case, without a call
        else:
            frame_size, header_size = _SIZE.unpack_from(buffer, start)[0], None
        check_frame_size(frame_size, header_size, self._max_frame_bytes)
        return frame_size

    decode = staticmethod(decode_frame)

    def retained_bytes(self, frame: Frame) -> int:
        return len(frame.payload)
