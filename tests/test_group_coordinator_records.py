"""The records of __consumer_offsets: every layout round-trips, bad bytes are CORRUPT_MESSAGE."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.errors import CorruptRecordError
from odradek.server.group.coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    parse_key,
)

texts = st.text(max_size=40)


@given(texts, texts, st.integers(0, 2**31 - 1))
def test_offset_commit_keys_round_trip(group: str, topic: str, partition: int) -> None:
    key = OffsetCommitKey(group, topic, partition)
    assert parse_key(key.to_bytes()) == key


@given(st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1), texts, st.integers(0, 2**62))
def test_offset_commit_values_round_trip(offset: int, epoch: int, meta: str, ts: int) -> None:
    value = OffsetCommitValue(offset, epoch, meta, ts)
    assert OffsetCommitValue.from_bytes(value.to_bytes()) == value


def test_older_offset_commit_values_are_read() -> None:
    v1 = struct.pack(">hqh", 1, 7, 2) + b"md" + struct.pack(">qq", 100, 200)
    assert OffsetCommitValue.from_bytes(v1) == OffsetCommitValue(7, -1, "md", 100, 200)
    v0 = struct.pack(">hqh", 0, 7, 0) + struct.pack(">q", 100)
    assert OffsetCommitValue.from_bytes(v0) == OffsetCommitValue(7, -1, "", 100)


def test_kafka_4_flexible_values_are_read() -> None:
    """OffsetCommitValue and GroupMetadataValue v4 (Kafka 4.4 writes them): compact strings,
    arrays and bytes, tagged fields (an unknown one is passed over)."""
    tagged = b"\x01" + b"\x05" + b"\x02" + b"ab"  # one field: tag 5, two bytes
    v4 = struct.pack(">hqi", 4, 7, 3) + b"\x03md" + struct.pack(">q", 100) + tagged
    assert OffsetCommitValue.from_bytes(v4) == OffsetCommitValue(7, 3, "md", 100)
    member = (
        b"\x02m" + b"\x00" + b"\x02c" + b"\x02h" + struct.pack(">ii", 300, 100)
        + b"\x03sb" + b"\x02a" + b"\x00"
    )  # fmt: skip
    group = (
        struct.pack(">h", 4) + b"\x09consumer" + struct.pack(">i", 2) + b"\x06range"
        + b"\x02m" + struct.pack(">q", 55) + b"\x02" + member + tagged
    )  # fmt: skip
    assert GroupMetadataValue.from_bytes(group) == GroupMetadataValue(
        "consumer",
        2,
        "range",
        "m",
        55,
        (MemberMetadataValue("m", None, "c", "h", 300, 100, b"sb", b"a"),),
    )


def test_group_metadata_round_trips() -> None:
    member = MemberMetadataValue("m", "i", "c", "/h", 30000, 10000, b"sub", b"asg")
    value = GroupMetadataValue("consumer", 3, "range", "m", 1234, (member,))
    assert GroupMetadataValue.from_bytes(value.to_bytes()) == value
    assert parse_key(GroupMetadataKey("g").to_bytes()) == GroupMetadataKey("g")


@given(st.binary(max_size=64))
def test_arbitrary_bytes_parse_or_are_corrupt(data: bytes) -> None:
    for parse in (parse_key, OffsetCommitValue.from_bytes, GroupMetadataValue.from_bytes):
        try:
            parse(data)
        except CorruptRecordError:
            pass


def test_a_member_count_beyond_the_bytes_is_corrupt() -> None:
    data = struct.pack(">hh", 3, 0) + struct.pack(">ihhqi", 1, -1, -1, -1, 2**31 - 1)
    with pytest.raises(CorruptRecordError):
        GroupMetadataValue.from_bytes(data)
