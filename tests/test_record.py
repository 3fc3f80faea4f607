"""Zigzag varints and one record's body: known encodings, round trips, broken input.

Also the hot paths (write_record, decode_records) against the plain codec they must agree with.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from kafka.record import util as kafka_util

from odradek.errors import CorruptRecordError
from odradek.int_limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from odradek.record.record import (
    Record,
    decode_record,
    decode_records,
    decode_varint,
    decode_varlong,
    encode_record,
    encode_varint,
    encode_varlong,
    write_record,
)

KNOWN_VARINTS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (8192, "808001"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]

headers_strategy = st.lists(
    st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3
).map(tuple)


@pytest.mark.parametrize(("value", "encoded"), KNOWN_VARINTS)
def test_known_varints(value: int, encoded: str) -> None:
    assert encode_varint(value).hex() == encoded
    assert encode_varlong(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)
    assert decode_varlong(bytes.fromhex("aa" + encoded), 1) == (value, 1 + len(encoded) // 2)


def test_varlong_extremes() -> None:
    assert encode_varlong(INT64_MAX).hex() == "fe" + "ff" * 8 + "01"
    assert encode_varlong(INT64_MIN).hex() == "ff" * 9 + "01"
    for value in (INT64_MAX, INT64_MIN):
        assert decode_varlong(encode_varlong(value), 0) == (value, 10)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_matches_an_independent_implementation(value: int) -> None:
    theirs = bytearray()
    kafka_util.encode_varint(value, theirs.append)
    assert encode_varint(value) == bytes(theirs)
    assert decode_varint(theirs, 0) == kafka_util.decode_varint(theirs, 0)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert decode_varlong(encoded + b"\xff", 0) == (value, len(encoded))


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_varint_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varint(value)
    assert decode_varlong(encode_varlong(value), 0)[0] == value


def test_varlong_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_varlong(INT64_MAX + 1)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "past the end"),
        (b"\x80", "past the end"),
        (b"\xff\xff\xff\xff", "past the end"),
        (b"\xff\xff\xff\xff\xff\x01", "malformed 32-bit varint"),  # six bytes
        (b"\xff\xff\xff\xff\x1f", "malformed 32-bit varint"),  # 33 bits
    ],
)
def test_broken_varints(data: bytes, match: str) -> None:
    with pytest.raises(CorruptRecordError, match=match):
        decode_varint(data, 0)


def test_broken_varlongs() -> None:
    with pytest.raises(CorruptRecordError, match="malformed 64-bit varint"):
        decode_varlong(b"\xff" * 10 + b"\x01", 0)
    with pytest.raises(CorruptRecordError, match="malformed 64-bit varint"):
        decode_varlong(b"\xff" * 9 + b"\x02", 0)  # 65 bits


def test_record_layout() -> None:
    encoded = encode_record(3, -2, b"k", None, [("h", b"v"), ("n", None)])
    # length, attributes, timestampDelta -2, offsetDelta 3, key "k", null value,
    # 2 headers: "h" -> "v", "n" -> null
    body = bytes.fromhex("00 03 06 02 6b 01 04 02 68 02 76 02 6e 01")
    assert encoded == encode_varint(len(body)) + body


@settings(max_examples=examples(200), deadline=None)
@given(
    offset_delta=st.integers(0, INT32_MAX),
    timestamp_delta=st.integers(-(2**40), 2**40),
    key=st.none() | st.binary(max_size=200),
    value=st.none() | st.binary(max_size=300),
    headers=headers_strategy,
)
def test_record_round_trip(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
) -> None:
    encoded = b"\x07" + encode_record(offset_delta, timestamp_delta, key, value, headers)
    record, position = decode_record(encoded, 1, 100, 5000)
    assert position == len(encoded)
    assert record == Record(100 + offset_delta, 5000 + timestamp_delta, key, value, headers)


def test_log_append_time_replaces_every_timestamp() -> None:
    encoded = encode_record(0, 17, b"k", b"v")
    record, _ = decode_record(encoded, 0, 0, 1000, log_append_time=99)
    assert record.timestamp == 99


def test_tombstone() -> None:
    assert Record(0, 0, b"k", None).is_tombstone
    assert not Record(0, 0, b"k", b"").is_tombstone


def _corrupt(body: bytes) -> bytes:
    """A record made of ``body`` with a correct length prefix."""
    return encode_varint(len(body)) + body


@pytest.mark.parametrize(
    ("encoded", "match"),
    [
        (encode_record(0, 0, b"key", b"value")[:-1], "overruns"),
        (_corrupt(bytes.fromhex("00 00 00 0a 6b 01 00")), "key of 5 bytes"),
        (_corrupt(bytes.fromhex("00 00 00 03 01 00")), "key length -2"),
        (_corrupt(bytes.fromhex("00 00 00 01 05 00")), "value length -3"),
        (_corrupt(bytes.fromhex("00 00 00 01 01 00 ff")), "length says"),
        (_corrupt(bytes.fromhex("00 00 00 01 01 01")), "header count -1"),
        (_corrupt(bytes.fromhex("00 00 00 01 01 02 01 01")), "null header key"),
        (_corrupt(bytes.fromhex("00 00 00 01 01 7e")), "header count 63"),
        (bytes.fromhex("03"), "length -2"),
    ],
)
def test_broken_records(encoded: bytes, match: str) -> None:
    with pytest.raises(CorruptRecordError, match=match):
        decode_record(encoded, 0, 0, 0)


# ---------------------------------------------------------------- hot paths vs the plain codec

# Small values (the table's range and its edges) most of the time, any value sometimes.
small_or_any_int32 = st.integers(-70, 8200) | st.integers(INT32_MIN, INT32_MAX)
small_or_any_int64 = st.integers(-70, 8200) | st.integers(INT64_MIN, INT64_MAX)
payloads = st.none() | st.binary(max_size=150) | st.binary(min_size=8185, max_size=8195)
record_arguments = st.tuples(
    small_or_any_int32,
    small_or_any_int64,
    payloads,
    payloads,
    st.just(()) | headers_strategy,
)


@settings(max_examples=examples(300), deadline=None)
@given(arguments=record_arguments)
def test_write_record_matches_encode_record(arguments: tuple) -> None:
    out = bytearray(b"before")
    write_record(out, *arguments)
    assert out == b"before" + encode_record(*arguments)


@pytest.mark.parametrize(
    "arguments",
    [
        (INT32_MAX + 1, 0, b"k", b"v"),
        (INT32_MIN - 1, 0, b"k", b"v"),
        (0, INT64_MAX + 1, b"k", b"v"),
        (0, INT64_MIN - 1, None, None),
    ],
)
def test_write_record_refuses_what_encode_record_refuses(arguments: tuple) -> None:
    out = bytearray()
    with pytest.raises(ValueError):
        write_record(out, *arguments)
    assert out == b""


def _decode_one_by_one(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record] | None:
    """The plain decoder over a whole section; None where decode_records must say None."""
    records, position = [], 0
    try:
        for _ in range(count):
            record, position = decode_record(
                data, position, base_offset, base_timestamp, log_append_time
            )
            records.append(record)
    except CorruptRecordError:
        return None
    return records if position == len(data) else None


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.data_too_large],  # up to 80 records a batch, by design
)
@given(
    records=st.lists(record_arguments, max_size=80),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(-(2**62), 2**62),
    log_append_time=st.none() | st.integers(0, 2**45),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=2),
    cut=st.sampled_from([0, 0, 0, 1, 5]),
    count_error=st.sampled_from([0, 0, 0, 1, -1]),
)
def test_decode_records_matches_decode_record(
    records: list[tuple],
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    flips: list[tuple[int, int]],
    cut: int,
    count_error: int,
) -> None:
    data = bytearray(b"".join(encode_record(*arguments) for arguments in records))
    for at, mask in flips:
        if data:
            data[at % len(data)] ^= mask
    data = bytes(data[: len(data) - cut])
    count = len(records) + count_error
    expected = _decode_one_by_one(data, count, base_offset, base_timestamp, log_append_time)
    decoded = decode_records(data, count, base_offset, base_timestamp, log_append_time)
    assert decoded == expected
    if not flips and not cut and not count_error:
        assert decoded is not None and len(decoded) == len(records)
    for record in decoded or ():
        assert type(record) is Record and hash(record) == hash(Record(*_fields(record)))
        assert all(type(field) is bytes for field in (record.key, record.value) if field)


def _fields(record: Record) -> tuple:
    return record.offset, record.timestamp, record.key, record.value, record.headers


def test_decode_records_of_a_bytearray_gives_bytes() -> None:
    data = bytearray(encode_record(0, 3, b"key", b"value", [("h", b"x")]))
    (record,) = decode_records(memoryview(data), 1, 10, 100)
    assert record == Record(10, 103, b"key", b"value", (("h", b"x"),))
    assert type(record.key) is bytes and type(record.value) is bytes
