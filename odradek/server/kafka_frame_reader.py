"""KafkaFrameReader: Kafka request frames (``int32 size`` then the request) received in place."""

from __future__ import annotations

from odradek.protocol.frame import FrameError

RECEIVE_BUFFER_BYTES = 64 * 1024
MIN_REQUEST_BYTES = 8
"""api_key, api_version and correlation_id: the smallest request there can be."""


class KafkaFrameReader:
    """Hands the socket the buffer to read into next, and returns the requests completed.

    The size prefix is checked against ``socket.request.max.bytes`` as soon as its 4 bytes
    arrive, before anything is allocated for the frame. Small frames share a receive buffer,
    dropped when it holds no partial frame; a larger one gets a buffer of its own sized from
    its prefix, which the socket reads into directly. Raises FrameError when the stream cannot
    be framed.
    """

    def __init__(self, max_frame_bytes: int) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer: bytearray | None = None
        self._start = 0
        self._end = 0
        self._large: bytearray | None = None
        self._large_filled = 0

    @property
    def max_frame_bytes(self) -> int:
        return self._max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        """The limit changes (raised once a SASL client has authenticated)."""
        self._max_frame_bytes = value

    def get_buffer(self) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        if self._buffer is None:
            self._buffer = bytearray(RECEIVE_BUFFER_BYTES)
        elif self._end == len(self._buffer):
            pending = self._end - self._start
            self._buffer[:pending] = self._buffer[self._start : self._end]
            self._start, self._end = 0, pending
        return memoryview(self._buffer)[self._end :]

    def buffer_updated(self, count: int) -> list[memoryview]:
        """``count`` bytes were read into the last buffer given; the frames they complete,
        each without its size prefix."""
        if self._large is None:
            self._end += count
            return self._frames()
        self._large_filled += count
        if self._large_filled < len(self._large):
            return []
        frame, self._large = memoryview(self._large), None
        return [frame]

    def _frames(self) -> list[memoryview]:
        frames = []
        buffer = self._buffer
        while self._end - self._start >= 4:
            start = self._start
            size = int.from_bytes(buffer[start : start + 4], "big", signed=True)
            if size < MIN_REQUEST_BYTES or size > self._max_frame_bytes:
                raise FrameError(
                    f"Kafka request size {size} is outside 8..socket.request.max.bytes="
                    f"{self._max_frame_bytes}"
                )
            if self._end - start >= 4 + size:
                frames.append(memoryview(bytes(buffer[start + 4 : start + 4 + size])))
                self._start += 4 + size
            elif 4 + size > len(buffer):
                received = self._end - start - 4
                self._large = bytearray(size)
                self._large[:received] = buffer[start + 4 : self._end]
                self._large_filled = received
                self._buffer, self._start, self._end = None, 0, 0
                return frames
            else:
                break
        if self._start == self._end:
            self._buffer, self._start, self._end = None, 0, 0
        return frames
