"""Framing: ``uint32 frame_size | uint32 header_size | msgpack header | payload``.

``frame_size`` counts every byte after itself, so a frame is ``4 + frame_size`` bytes on the
wire and its payload is ``frame_size - 4 - header_size`` bytes. The header is a msgpack map; the
payload is opaque bytes (record batches) that ride untouched, so a broker can send fetch results
from a file with ``sendfile`` right after the header bytes it built in memory.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgpack

from odradek.errors import InvalidRequestError

_SIZES = struct.Struct(">II")
_SIZE = struct.Struct(">I")
SIZE_FIELDS_BYTES = 8
"""``frame_size`` and ``header_size``: the fixed part in front of every header."""

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
"""Kafka's ``socket.request.max.bytes`` default."""


class FrameError(InvalidRequestError):
    """The byte stream is not a well-formed sequence of frames.

    Unlike other errors this one cannot be answered: the reader no longer knows where the next
    frame starts, so the connection must be closed.
    """


class Frame(NamedTuple):
    """One decoded frame: its msgpack header (a map with string keys) and its raw payload
    (a tuple: one is made per request)."""

    header: dict[str, Any]
    payload: memoryview


def encode_frame_prefix(header: Mapping[str, Any], payload_size: int) -> bytes:
    """The bytes of a frame up to its payload, for a payload of ``payload_size`` bytes.

    A writer that knows its payload sizes up front (a broker sending file slices) emits this
    first and the payload pieces after it, without ever joining them in memory.
    """
    packer = getattr(_THREAD, "packer", None)
    if packer is None:
        packer = _THREAD.packer = msgpack.Packer()
    packed = packer.pack(header)
    return _SIZES.pack(4 + len(packed) + payload_size, len(packed)) + packed


_THREAD = threading.local()
"""Each thread's msgpack Packer, made once (``msgpack.packb`` makes one per call)."""


def encode_frame(header: Mapping[str, Any], payload: bytes | memoryview = b"") -> bytes:
    """A whole frame as one bytes object."""
    return encode_frame_prefix(header, len(payload)) + payload


class FrameDecoder:
    """Incremental decoder: feed it whatever the socket delivers, get back the complete frames.

    Sizes are checked as soon as their bytes arrive, before the frame is buffered, so a peer
    cannot make the reader hold more than ``max_frame_bytes`` per frame. After a
    :class:`FrameError` the stream cannot be resynchronised; discard the decoder.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        """Bytes received that do not make a whole frame yet."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Buffer ``data`` and return every frame it completes, in stream order."""
        buffer = self._buffer
        buffer += data
        frames: list[Frame] = []
        position = 0
        with memoryview(buffer) as view:
            while len(buffer) - position >= 4:
                frame_size = self._checked_frame_size(view, position)
                end = position + 4 + frame_size
                if len(buffer) < end:
                    break
                frames.append(decode_frame(view[position + 4 : end].tobytes()))
                position = end
        del buffer[:position]
        return frames

    def _checked_frame_size(self, view: memoryview, position: int) -> int:
        """The frame size at ``position``, validated with the header size when it has arrived."""
        frame_size = int.from_bytes(view[position : position + 4], "big")
        header_size = None
        if len(view) - position >= SIZE_FIELDS_BYTES:
            header_size = int.from_bytes(view[position + 4 : position + 8], "big")
        check_frame_size(frame_size, header_size, self._max_frame_bytes)
        return frame_size


def check_frame_size(frame_size: int, header_size: int | None, max_frame_bytes: int) -> None:
    """Raise FrameError unless a frame of ``frame_size`` bytes (and ``header_size``, once its
    bytes have arrived) can be read: the checks made from the size fields, before buffering."""
    if frame_size > max_frame_bytes:
        raise FrameError(
            f"frame of {frame_size} bytes exceeds the limit of {max_frame_bytes} bytes"
        )
    if frame_size < 4:
        raise FrameError(f"frame size {frame_size} is smaller than the header size field")
    if header_size is not None and header_size > frame_size - 4:
        raise FrameError(f"header size {header_size} exceeds the frame's {frame_size - 4} bytes")


def decode_frame(frame: bytes | bytearray) -> Frame:
    """Split ``frame`` (the bytes after ``frame_size``) into its header map and payload.

    The payload is a view of ``frame``, not a copy: a reader that received a frame into a
    buffer of its own hands that buffer over here, and must not reuse it.
    """
    view = memoryview(frame)
    header_end = 4 + _SIZE.unpack_from(frame)[0]
    try:
        header = msgpack.unpackb(view[4:header_end], raw=False)
    except Exception as error:  # msgpack raises several unrelated types for bad input
        raise FrameError(f"frame header is not valid msgpack: {error}") from None
    if type(header) is not dict:
        raise FrameError(f"frame header must be a msgpack map, not {type(header).__name__}")
    return Frame(header, view[header_end:])
