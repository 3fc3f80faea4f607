"""RecordBatchBuilder and build_batch: offsets, timestamps, flags, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.int_limits import INT32_MAX
from odradek.record.compression import CompressionType
from odradek.record.record import Record, encode_record
from odradek.record.record_batch import (
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    RecordBatch,
    TimestampType,
    write_crc,
)
from odradek.record.record_batch_builder import RecordBatchBuilder, build_batch

headers = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=2)
record_tuples = st.lists(
    st.tuples(
        st.integers(0, 2**45),
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=200),
        headers.map(tuple),
    ),
    min_size=1,
    max_size=30,
)


def test_append_numbers_from_the_base_offset() -> None:
    builder = RecordBatchBuilder(base_offset=50)
    assert builder.is_empty and builder.num_records == 0
    assert builder.estimated_size_in_bytes == HEADER_SIZE
    assert [builder.append(10 + i, b"k", b"v") for i in range(3)] == [50, 51, 52]
    assert not builder.is_empty and builder.num_records == 3
    data = builder.build()
    assert builder.estimated_size_in_bytes == len(data)  # uncompressed: exact
    batch = RecordBatch(data)
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (50, 52, 3)


def test_append_with_offset_keeps_gaps_like_a_cleaned_batch() -> None:
    builder = RecordBatchBuilder(CompressionType.GZIP, base_offset=100)
    builder.append_with_offset(103, 1, b"a", b"1")
    builder.append_with_offset(110, 2, b"b", None)
    assert builder.append(3, b"c", b"3") == 111
    batch = RecordBatch(builder.build())
    assert batch.base_offset == 100 and batch.last_offset_delta == 11
    assert batch.records_count == 3
    assert [record.offset for record in batch.records()] == [103, 110, 111]


@pytest.mark.parametrize("offset", [104, 105])
def test_offsets_must_increase(offset: int) -> None:
    builder = RecordBatchBuilder(base_offset=100)
    builder.append_with_offset(105, 0, b"k", b"v")
    with pytest.raises(ValueError, match="not above"):
        builder.append_with_offset(offset, 0, b"k", b"v")


@pytest.mark.parametrize("offset", [99, 100 + INT32_MAX + 1])
def test_offsets_must_fit_the_batch(offset: int) -> None:
    builder = RecordBatchBuilder(base_offset=100)
    with pytest.raises(ValueError, match="outside"):
        builder.append_with_offset(offset, 0, b"k", b"v")
    builder.append_with_offset(100 + INT32_MAX, 0, b"k", b"v")
    assert RecordBatch(builder.build()).last_offset_delta == INT32_MAX


def test_empty_builder_builds_nothing() -> None:
    assert RecordBatchBuilder().build() == b""
    assert build_batch([]) == b""


def test_timestamps() -> None:
    builder = RecordBatchBuilder()
    for timestamp in (5000, 4000, 9000, 6000):
        builder.append(timestamp, None, b"v")
    batch = RecordBatch(builder.build())
    assert (batch.base_timestamp, batch.max_timestamp) == (5000, 9000)
    assert [record.timestamp for record in batch.records()] == [5000, 4000, 9000, 6000]


def test_producer_fields_and_flags() -> None:
    builder = RecordBatchBuilder(
        CompressionType.SNAPPY,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        producer_id=9,
        producer_epoch=2,
        base_sequence=40,
        partition_leader_epoch=6,
        is_transactional=True,
        is_control=True,
    )
    builder.append(1, b"k", b"v")
    batch = RecordBatch(builder.build())
    assert batch.is_valid()
    assert batch.attributes == 2 | 0x08 | 0x10 | CONTROL_FLAG_MASK
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 40)
    assert batch.partition_leader_epoch == 6


def test_defaults_mean_no_producer() -> None:
    batch = RecordBatch(build_batch([(1, b"k", b"v", ())]))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.partition_leader_epoch == -1 and batch.attributes == 0


def test_build_batch_from_records_keeps_offsets() -> None:
    records = [Record(70, 1, b"a", b"1"), Record(75, 2, b"b", None, (("h", None),))]
    batch = RecordBatch(build_batch(records, compression=CompressionType.LZ4))
    assert batch.base_offset == 70
    assert list(batch.records()) == records
    assert RecordBatch(build_batch(records, base_offset=60)).base_offset == 60


def test_build_batch_accepts_three_tuples() -> None:
    batch = RecordBatch(build_batch([(1, b"k", b"v")], base_offset=4))
    assert list(batch.records()) == [Record(4, 1, b"k", b"v")]


@settings(max_examples=examples(60), deadline=None)
@given(
    records=record_tuples,
    codec=st.sampled_from(list(CompressionType)),
    base_offset=st.integers(0, 2**50),
)
def test_round_trip(
    records: list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]],
    codec: CompressionType,
    base_offset: int,
) -> None:
    batch = RecordBatch(build_batch(records, compression=codec, base_offset=base_offset))
    batch.ensure_valid()
    assert batch.compression_type is codec
    assert batch.max_timestamp == max(record[0] for record in records)
    assert list(batch.records()) == [
        Record(base_offset + index, *record) for index, record in enumerate(records)
    ]


def _reference_batch(records: list[tuple], base_offset: int) -> bytes:
    """An uncompressed batch laid out by hand from encode_record, the plain encoder."""
    body = b"".join(
        encode_record(index, timestamp - records[0][0], key, value, headers)
        for index, (timestamp, key, value, headers) in enumerate(records)
    )
    batch = bytearray(HEADER_SIZE) + body
    HEADER_STRUCT.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        -1,
        2,
        0,
        0,
        len(records) - 1,
        records[0][0],
        max(record[0] for record in records),
        -1,
        -1,
        -1,
        len(records),
    )
    write_crc(batch, 0)
    return bytes(batch)


@settings(max_examples=examples(100), deadline=None)
@given(records=record_tuples, base_offset=st.integers(0, 2**50))
def test_builder_writes_what_the_plain_encoder_writes(
    records: list[tuple], base_offset: int
) -> None:
    builder = RecordBatchBuilder(base_offset=base_offset)
    for record in records:
        builder.append(*record)
    expected = _reference_batch(records, base_offset)
    assert builder.estimated_size_in_bytes == len(expected)
    assert builder.build() == expected


def test_appends_after_a_build_go_into_the_next_build() -> None:
    builder = RecordBatchBuilder(CompressionType.NONE)
    builder.append(10, b"a", b"1")
    first = builder.build()
    builder.append(12, b"b", None)
    assert builder.build() == build_batch([(10, b"a", b"1", ()), (12, b"b", None, ())])
    assert RecordBatch(first).records_count == 1 and builder.build() == builder.build()


def test_a_delete_horizon_is_the_base_timestamp_and_the_records_keep_their_timestamps() -> None:
    """Kafka's ``MemoryRecordsBuilder`` with a delete horizon: attribute bit 6, the base
    timestamp holds the horizon, the records' timestamp deltas are relative to it (negative
    here), the max timestamp is still the records'."""
    records = [(1_000, b"a", None, ()), (1_005, b"b", b"2", ())]
    built = RecordBatch(build_batch(records, delete_horizon_ms=90_000), 0)
    built.ensure_valid()
    assert built.attributes & DELETE_HORIZON_FLAG_MASK
    assert built.delete_horizon_ms == built.base_timestamp == 90_000
    assert built.max_timestamp == 1_005
    assert [(r.timestamp, r.key, r.value) for r in built.records()] == [
        (t, k, v) for t, k, v, _ in records
    ]
    plain = RecordBatch(build_batch(records), 0)
    assert (plain.delete_horizon_ms, plain.base_timestamp) == (None, 1_000)
    with pytest.raises(ValueError, match="negative"):
        build_batch(records, delete_horizon_ms=-5)
