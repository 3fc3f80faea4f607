"""docs/protocol.md's examples are what the encoder writes, byte for byte, and its statements
about limits and codes are what the code does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgpack
import pytest

from odradek.errors import InvalidRequestError
from odradek.protocol.frame import FrameDecoder, FrameError, check_frame_size
from odradek.protocol.header import RequestHeader
from odradek.protocol.messages import encode_request
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import Acks, ProducePartitionData, ProduceRequest
from odradek.record.record_batch_builder import build_batch

PROTOCOL_MD = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"


def _section(title: str) -> str:
    text = PROTOCOL_MD.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def _documented_bytes() -> bytes:
    """The hex bytes of section 7's dump: the pairs of hex digits before each annotation."""
    dump = _section("7. Example").split("```")[1]
    data = bytearray()
    for line in dump.splitlines():
        hex_part = re.match(r"((?:[0-9a-f]{2} +)*[0-9a-f]{2})(?=\s{2,}|$)", line)
        if hex_part:
            data += bytes.fromhex(hex_part.group(1).replace(" ", ""))
    return bytes(data)


def test_the_metadata_example_is_what_the_encoder_writes() -> None:
    header = RequestHeader(api_key=3, api_version=0, correlation_id=7, client_id="cli")
    request = MetadataRequest(topics=("orders",), allow_auto_topic_creation=False)
    encoded = b"".join(bytes(part) for part in encode_request(header, request))
    documented = _documented_bytes()
    assert documented == encoded
    assert "; 77 bytes:" in _section("7. Example") and len(encoded) == 77
    (frame,) = FrameDecoder().feed(encoded)
    assert frame.header == {
        "api": 3,
        "v": 0,
        "id": 7,
        "client_id": "cli",
        "topics": ["orders"],
        "allow_auto_topic_creation": False,
    }


def test_the_produce_example_is_what_the_encoder_writes() -> None:
    batch = build_batch([(0, None, b"x" * 6, ())])
    assert len(batch) == 74  # "carrying one 74-byte batch"
    header = RequestHeader(api_key=0, api_version=0, correlation_id=8)
    request = ProduceRequest((ProducePartitionData("orders", 0, batch),), Acks.ALL, 30000)
    encoded = b"".join(bytes(part) for part in encode_request(header, request))
    (frame,) = FrameDecoder().feed(encoded)
    documented = re.search(r"the header map is\s+`(\{.*?\})`", _section("7. Example"), re.S)
    expected = json.loads(documented.group(1).replace("\n", " ").replace("nil", "null"))
    assert frame.header == expected
    assert bytes(frame.payload) == batch
    frame_size = int.from_bytes(encoded[:4], "big")
    header_size = int.from_bytes(encoded[4:8], "big")
    assert frame_size == 4 + header_size + len(batch) == len(encoded) - 4
    assert msgpack.unpackb(encoded[8 : 8 + header_size]) == expected


def test_max_request_bytes_bounds_frame_size_without_its_prefix() -> None:
    check_frame_size(1000, None, max_frame_bytes=1000)  # a 1004-byte frame is accepted
    with pytest.raises(FrameError):
        check_frame_size(1001, None, max_frame_bytes=1000)
    assert "the largest frame on the wire is `max_request_bytes + 4`" in _section("2. Frames")


def test_a_bad_acks_is_answered_as_documented() -> None:
    with pytest.raises(InvalidRequestError):
        ProduceRequest.from_header({"partitions": [], "acks": 2})
    row = next(line for line in _section("4. Error codes").splitlines() if "| 21 |" in line)
    assert "INVALID_REQUEST (42)" in row
