"""Kafka's request header (v1 and v2) and the response frame around a body."""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.protocol.kafka.byte_reader import ByteReader
from odradek.protocol.kafka.message_codec import PartsWriter, Payload

_SIZE = struct.Struct(">i")
_RESPONSE_HEADER_V0 = struct.Struct(">ii")
_RESPONSE_HEADER_V1 = struct.Struct(">iib")
_START = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT16 = struct.Struct(">h")


class KafkaRequestHeader(NamedTuple):
    """``api_key``, ``api_version``, ``correlation_id``, ``client_id``; ``body_offset`` is
    where the request body starts in the frame."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def read_request_start(frame: memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the fixed first 8 bytes of any version.

    Raises InvalidRequestError when the frame is shorter than that.
    """
    if len(frame) < _START.size:
        reader = ByteReader(frame)
        reader.skip(_START.size, "request header (api_key, api_version, correlation_id)")
    return _START.unpack_from(frame)


def read_request_header(frame: memoryview, flexible: bool) -> KafkaRequestHeader:
    """The whole header: v2 (with tagged fields) for flexible request versions, else v1."""
    api_key, api_version, correlation_id = read_request_start(frame)
    client_id, body_offset = read_client_id(frame, flexible)
    return KafkaRequestHeader(api_key, api_version, correlation_id, client_id, body_offset)


def read_client_id(frame: memoryview, flexible: bool) -> tuple[str | None, int]:
    """The rest of a header whose first 8 bytes were read (``read_request_start``): its
    client id, a legacy nullable string in every version, and where the body starts (after
    the tagged fields of a v2 header, for flexible request versions)."""
    start = _START.size
    try:  # the usual header: a client id, no tagged fields
        size = _INT16.unpack_from(frame, start)[0]
        end = start + 2 + size
        if size >= 0 and end <= len(frame) and not (flexible and frame[end]):
            return str(frame[start + 2 : end], "utf-8"), end + 1 if flexible else end
    except (struct.error, IndexError, UnicodeDecodeError):
        pass
    reader = ByteReader(frame, start)
    client_id = reader.string(False, True, "client_id")
    if flexible:
        reader.skip_tagged_fields("request header tagged fields")
    return client_id, reader.position


def start_response(correlation_id: int, header_version: int) -> PartsWriter:
    """A writer for a response whose body is written after its header: room for the frame's
    size, the correlation id, (v1: empty tagged fields); ``finish_frame`` fills in the size."""
    out = PartsWriter()
    if header_version >= 1:
        out.buffer += _RESPONSE_HEADER_V1.pack(0, correlation_id, 0)
    else:
        out.buffer += _RESPONSE_HEADER_V0.pack(0, correlation_id)
    return out


def response_frame(correlation_id: int, header_version: int, body: list[Payload]) -> list[Payload]:
    """The frame of a response: size, correlation id, (v1: empty tagged fields), body."""
    header = _RESPONSE_HEADER_V0.pack(0, correlation_id)
    if header_version >= 1:
        header += b"\x00"
    size = len(header) - 4 + sum(map(len, body))
    return [_SIZE.pack(size) + header[4:], *body]
