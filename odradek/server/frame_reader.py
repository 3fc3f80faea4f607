"""FrameReader: request frames received in place, for an asyncio BufferedProtocol."""

from __future__ import annotations

from odradek.protocol.frame import SIZE_FIELDS_BYTES, Frame, check_frame_size, decode_frame

RECEIVE_BUFFER_BYTES = 64 * 1024


class FrameReader:
    """Hands the socket the buffer to read into next, and returns the frames completed.

    Small frames are read into a receive buffer and copied out whole; the buffer is dropped
    whenever it holds no partial frame, so an idle connection holds none. A frame larger than
    that buffer gets a buffer of its own, sized from its length prefix once the size fields
    passed the protocol's checks, and the socket reads straight into it: a 1 MB produce
    request is copied once, by the kernel, instead of piece by piece as it is joined.
    Raises the protocol's FrameError when the stream cannot be framed.
    """

    def __init__(self, max_frame_bytes: int) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer: bytearray | None = None
        self._start = 0  # buffered bytes not yet framed are _buffer[_start:_end]
        self._end = 0
        self._large: bytearray | None = None  # the body of a large frame being received
        self._large_filled = 0

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
            return memoryview(self._large)[self._large_filled :]
        if self._buffer is None:
            self._buffer = bytearray(RECEIVE_BUFFER_BYTES)
        elif self._end == len(self._buffer):
            self._compact()
        return memoryview(self._buffer)[self._end :]

    def buffer_updated(self, count: int) -> list[Frame]:
        """``count`` bytes were read into the last buffer given; the frames they complete."""
        if self._large is None:
            self._end += count
            return self._frames()
        self._large_filled += count
        if self._large_filled < len(self._large):
            return []
        frame, self._large = decode_frame(self._large), None
        return [frame]

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
            else:
                break
        if self._start == self._end:
            self._buffer, self._start, self._end = None, 0, 0
        return frames

    def _start_large_frame(self, frame_size: int) -> None:
        """Move the part of a frame too large for the receive buffer into its own buffer."""
        received = self._end - self._start - 4
        self._large = bytearray(frame_size)
        self._large[:received] = self._buffer[self._start + 4 : self._end]
        self._large_filled = received
        self._buffer, self._start, self._end = None, 0, 0

    def _compact(self) -> None:
        """Move the start of an incomplete frame to the front, to read the rest after it."""
        pending = self._end - self._start
        self._buffer[:pending] = self._buffer[self._start : self._end]
        self._start, self._end = 0, pending
