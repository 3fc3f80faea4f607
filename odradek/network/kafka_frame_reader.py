"""KafkaFrameReader: Kafka request frames (``int32 size`` then the request) received in place."""

from __future__ import annotations

import struct

from odradek.network.frame_reader import SizePrefixedFrameReader
from odradek.protocol.frame import FrameError

MIN_REQUEST_BYTES = 8
"""api_key, api_version and correlation_id: the smallest request there can be."""
_SIZE = struct.Struct(">i")


class KafkaFrameReader(SizePrefixedFrameReader[memoryview]):
    """Kafka's requests, each returned without its size prefix. The prefix is checked
    against ``socket.request.max.bytes`` as soon as its 4 bytes arrive, before anything is
    allocated for the frame; each frame returned holds a reservation of its whole size."""

    min_frame_bytes = MIN_REQUEST_BYTES

    def check_prefix(self, buffer: bytearray, start: int, available: int) -> int:
        size = _SIZE.unpack_from(buffer, start)[0]
        if size < MIN_REQUEST_BYTES or size > self._max_frame_bytes:
            raise FrameError(
                f"Kafka request size {size} is outside {MIN_REQUEST_BYTES}.."
                f"socket.request.max.bytes={self._max_frame_bytes}"
            )
        return size

    decode = memoryview  # (a type and a builtin: called without a Python frame per request)
    retained_bytes = staticmethod(len)
