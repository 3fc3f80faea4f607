"""Framing: encode/decode, incremental feeding, and every way a stream can be malformed."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.errors import InvalidRequestError
from odradek.protocol.frame import (
    Frame,
    FrameDecoder,
    FrameError,
    encode_frame,
    encode_frame_prefix,
)


def raw_frame(header_bytes: bytes, payload: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header_bytes) + len(payload), len(header_bytes)) + (
        header_bytes + payload
    )


def as_tuples(frames: list[Frame]) -> list[tuple[dict, bytes]]:
    return [(frame.header, bytes(frame.payload)) for frame in frames]


def test_frame_layout_matches_the_documented_bytes() -> None:
    data = encode_frame({"id": 1}, b"xyz")
    header = msgpack.packb({"id": 1})
    assert data == struct.pack(">II", 4 + len(header) + 3, len(header)) + header + b"xyz"


def test_prefix_plus_payload_is_the_whole_frame() -> None:
    header = {"id": 9, "partitions": [{"size": 4}]}
    assert encode_frame_prefix(header, 4) + b"abcd" == encode_frame(header, b"abcd")


def test_round_trip_of_several_frames_in_one_chunk() -> None:
    frames = [({"id": i, "s": "x" * i}, bytes([i]) * i) for i in range(5)]
    data = b"".join(encode_frame(header, payload) for header, payload in frames)
    decoder = FrameDecoder()
    assert as_tuples(decoder.feed(data)) == frames
    assert decoder.buffered_bytes == 0


def test_partial_frame_waits_for_the_rest() -> None:
    data = encode_frame({"id": 1}, b"payload")
    decoder = FrameDecoder()
    assert decoder.feed(data[:-1]) == []
    assert decoder.buffered_bytes == len(data) - 1
    assert as_tuples(decoder.feed(data[-1:])) == [({"id": 1}, b"payload")]


def test_fed_byte_by_byte() -> None:
    frames = [({"id": 1}, b""), ({"id": 2, "k": [1, 2]}, b"\x00" * 300)]
    data = b"".join(encode_frame(h, p) for h, p in frames)
    decoder = FrameDecoder()
    decoded: list[Frame] = []
    for byte in data:
        decoded += decoder.feed(bytes([byte]))
    assert as_tuples(decoded) == frames


headers = st.dictionaries(
    st.text(max_size=8),
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20), st.none(), st.booleans()),
    max_size=5,
)


@given(
    frames=st.lists(st.tuples(headers, st.binary(max_size=200)), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20),
)
def test_any_chunking_yields_the_same_frames(frames, cuts) -> None:
    data = b"".join(encode_frame(h, p) for h, p in frames)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    decoder = FrameDecoder()
    decoded: list[Frame] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        decoded += decoder.feed(data[start:end])
    assert as_tuples(decoded) == [(h, p) for h, p in frames]
    assert decoder.buffered_bytes == 0


@given(st.binary(min_size=1, max_size=300))
def test_garbage_either_waits_or_raises_frame_error(data) -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    try:
        frames = decoder.feed(data)
    except FrameError:
        return
    for frame in frames:
        assert isinstance(frame.header, dict)


def test_oversized_length_is_refused_from_the_first_four_bytes() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    with pytest.raises(FrameError, match="exceeds the limit of 1000"):
        decoder.feed(struct.pack(">I", 1001))


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    header = msgpack.packb({})
    payload = b"p" * (100 - 4 - len(header))
    decoder = FrameDecoder(max_frame_bytes=100)
    assert as_tuples(decoder.feed(raw_frame(header, payload))) == [({}, payload)]


def test_frame_too_small_for_its_header_size_field() -> None:
    with pytest.raises(FrameError, match="smaller than the header size"):
        FrameDecoder().feed(struct.pack(">I", 3) + b"abc")


def test_header_size_larger_than_frame_is_refused_before_the_frame_arrives() -> None:
    with pytest.raises(FrameError, match="header size 50 exceeds the frame's 10 bytes"):
        FrameDecoder().feed(struct.pack(">II", 14, 50))


def test_undecodable_msgpack_header() -> None:
    with pytest.raises(FrameError, match="not valid msgpack"):
        FrameDecoder().feed(raw_frame(b"\xc1"))


def test_truncated_msgpack_header() -> None:
    header = msgpack.packb({"id": 1, "name": "abcdef"})
    with pytest.raises(FrameError, match="not valid msgpack"):
        FrameDecoder().feed(raw_frame(header[:-2]))


def test_header_with_trailing_bytes_is_refused() -> None:
    with pytest.raises(FrameError, match="not valid msgpack"):
        FrameDecoder().feed(raw_frame(msgpack.packb({}) + b"\x01"))


@pytest.mark.parametrize("header", [[1, 2], 7, "text", None, b"bin"])
def test_header_that_is_not_a_map(header) -> None:
    with pytest.raises(FrameError, match="must be a msgpack map"):
        FrameDecoder().feed(raw_frame(msgpack.packb(header)))


def test_header_with_non_string_keys_is_refused() -> None:
    with pytest.raises(FrameError, match="not valid msgpack"):
        FrameDecoder().feed(raw_frame(msgpack.packb({1: 2})))


def test_frame_error_is_an_invalid_request() -> None:
    assert issubclass(FrameError, InvalidRequestError)


def test_payload_survives_later_feeds() -> None:
    decoder = FrameDecoder()
    (first,) = decoder.feed(encode_frame({}, b"first"))
    decoder.feed(encode_frame({}, b"second-and-longer"))
    assert bytes(first.payload) == b"first"
