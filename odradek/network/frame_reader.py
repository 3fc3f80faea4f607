"""FrameReader: request frames received in place, for an asyncio BufferedProtocol.

SizePrefixedFrameReader holds what every size-prefixed frame format shares (odradek's msgpack
frames, Kafka's requests): receiving, buffers grown as bytes arrive, the request memory pool.
A format says only how its prefix is checked and how a whole frame is decoded.
"""

from __future__ import annotations

import struct
import threading
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from odradek.network.frame_buffer import FrameBuffer
from odradek.network.request_memory_pool import RequestMemoryPool
from odradek.protocol.frame import (
    SIZE_FIELDS_BYTES,
    Frame,
    FrameError,
    check_frame_size,
    decode_frame,
)

RECEIVE_BUFFER_BYTES = 64 * 1024

_SIZES = struct.Struct(">II")
_SIZE = struct.Struct(">I")

FrameT = TypeVar("FrameT")


class SizePrefixedFrameReader(ABC, Generic[FrameT]):
    """Hands the socket the buffer to read into next, and returns the frames completed.

    Every frame is ``uint32 size`` then ``size`` bytes. Small frames are read into the
    thread's receive buffer, which every connection of its event loop reads into in turn (a
    read and the framing of its bytes happen in one callback), and copied out whole; the start
    of a frame whose end has not arrived is copied out too, and back in front of the next read,
    so an idle connection holds no buffer and a busy one allocates none per read. A frame larger
    than that buffer gets a FrameBuffer of its own, once its prefix passed the format's checks,
    and the socket reads straight into it: a 1 MB produce request is not copied piece by piece
    as it is joined. That buffer grows as the frame's bytes arrive, never ahead of them: a size
    prefix alone costs nothing.

    The memory a connection holds is reserved in the ``pool``: the whole receive buffer while
    the start of a frame waits for its end, a large frame's buffer as it grows. When the pool
    has no room for a receive buffer, the next frame is read ``prefix_bytes`` at a time (then
    in a buffer of its own). When a large frame's buffer cannot grow, ``blocked`` is set: the
    caller stops reading, waits for the pool and calls ``try_grow``. Each frame returned holds
    a reservation of ``retained_bytes(frame)``, which the caller releases when done with it;
    ``close`` releases what the reader itself holds. ``get_buffer`` and ``buffer_updated`` of
    one read must not be interleaved with those of another reader of the same thread.
    Raises FrameError when the stream cannot be framed.
    """

    prefix_bytes = 4
    """How much of a frame's start ``check_prefix`` needs to vouch for its size."""
    min_frame_bytes: int | None = None
    """For a format whose prefix is vouched for by its size alone, the smallest size allowed
    (the largest is ``max_frame_bytes``): a size in between is taken without a call to
    ``check_prefix``, which sees the others. None: every prefix goes to ``check_prefix``."""

    def __init__(self, max_frame_bytes: int, pool: RequestMemoryPool | None = None) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._pool = pool if pool is not None else RequestMemoryPool(None)
        self._buffer, self._view = _receive_buffer()
        self._window = RECEIVE_BUFFER_BYTES  # how much of it the frame being read may use
        self._partial: bytes | bytearray = b""  # the start of a frame whose end is to come
        self._reserved = 0  # for the partial frame's window
        self._large: FrameBuffer | None = None  # the body of a large frame being received
        self.pending = False
        """Whether part of a frame has arrived and the rest has not."""

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
    def pending_bytes(self) -> int:
        """How much of the frame being received has arrived."""
        if self._large is not None:
            return self._large.filled
        return len(self._partial)

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

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next read goes (``sizehint`` is the transport's, and not needed)."""
        if self._large is not None:
            return self._large.get_buffer()
        partial = self._partial
        if partial:
            self._buffer[: len(partial)] = partial
            return self._view[len(partial) : self._window]
        pool = self._pool
        if pool.reserved + RECEIVE_BUFFER_BYTES > pool.limit:  # exhausted: just enough to frame
            self._window = self.prefix_bytes
            return self._view[: self.prefix_bytes]
        self._window = RECEIVE_BUFFER_BYTES
        return self._view

    def buffer_updated(self, count: int) -> list[FrameT]:
        """``count`` bytes were read into the last buffer given; the frames they complete."""
        large = self._large
        if large is None:
            return self._frames(len(self._partial) + count)
        if not large.advance(count):
            return []
        self._large = None
        self.pending = False
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
        self._partial, self._large, self._reserved, self.pending = b"", None, 0, False

    def _frames(self, end: int) -> list[FrameT]:
        """The frames whole in the receive buffer's first ``end`` bytes; the rest is kept."""
        frames: list[FrameT] = []
        retained = 0
        buffer, check_prefix, decode, retained_bytes = (
            self._buffer,
            self.check_prefix,
            self.decode,
            self.retained_bytes,
        )
        start = 0
        min_size, max_size = self.min_frame_bytes, self._max_frame_bytes
        while end - start >= 4:
            if min_size is not None:
                frame_size = _SIZE.unpack_from(buffer, start)[0]
                if not min_size <= frame_size <= max_size:
                    frame_size = check_prefix(buffer, start, end - start)
            else:
                frame_size = check_prefix(buffer, start, end - start)
            frame_end = start + 4 + frame_size
            if frame_end > end:
                if 4 + frame_size > self._window and end - start >= self.prefix_bytes:
                    self._start_large_frame(frame_size, start, end)
                    start = end
                break
            frame = decode(buffer[start + 4 : frame_end])  # a copy
            frames.append(frame)
            retained += retained_bytes(frame)
            start = frame_end
        if start < end:
            self._partial = buffer[start:end]  # a copy
            self.pending = True
            if not self._reserved:  # the window it may fill, as long as it waits
                self._reserved = self._window
                retained += self._window
        else:
            self._partial = b""
            self.pending = self._large is not None
            if self._reserved:
                retained -= self._reserved
                self._reserved = 0
        if retained > 0:  # the frames' copies are each frame's reservation
            self._pool.reserve(retained)
        elif retained < 0:
            self._pool.release(-retained)
        return frames

    def _start_large_frame(self, frame_size: int, start: int, end: int) -> None:
        """Move the part of a frame too large for the receive buffer into its own buffer,
        sized from what has arrived, not from what the frame will need."""
        self._large = FrameBuffer(frame_size, self._view[start + 4 : end], self._pool)


def _receive_buffer() -> tuple[bytearray, memoryview]:
    """The calling thread's receive buffer, and a view of it, made on first use."""
    shared = getattr(_RECEIVING, "buffer", None)
    if shared is None:
        buffer = bytearray(RECEIVE_BUFFER_BYTES)
        shared = _RECEIVING.buffer = (buffer, memoryview(buffer))
    return shared


_RECEIVING = threading.local()
"""Each thread's receive buffer: one per event loop, shared by its connections."""


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
