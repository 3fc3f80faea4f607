"""Cross-check against an independent implementation of the v2 format: kafka-python's.

Batches we build must parse there, theirs must parse and validate here, for every codec,
with keys, null keys, null values and headers.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords as KafkaMemoryRecords

from odradek.config.log_config import LogConfig
from odradek.record.compression import CompressionType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import Record
from odradek.record.record_batch import RecordBatch, set_log_append_time
from odradek.record.record_batch_builder import build_batch
from odradek.storage.log_validator import validate_and_assign_offsets

NOW = 1_700_000_000_000
RECORDS = [
    (NOW, b"key", b"value", ()),
    (NOW + 5, None, b"no key", (("trace", b"abc"),)),
    (NOW + 2, b"tombstone", None, (("a", None), ("b", b""))),
    (NOW + 9, b"", b"", ()),
    (NOW + 1, None, None, ()),
    (NOW + 3, b"bulk", b"odradek " * 80, ()),  # so that kafka-python does compress
]

records_strategy = st.lists(
    st.tuples(
        st.integers(0, 2**42),
        st.none() | st.binary(max_size=30),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2).map(
            tuple
        ),
    ),
    min_size=1,
    max_size=20,
)


def _theirs(records: list[tuple], codec: CompressionType) -> bytes:
    """A producer batch from kafka-python: base offset 0, sent uncompressed if that is smaller."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**20,
    )
    for index, (timestamp, key, value, headers) in enumerate(records):
        builder.append(index, timestamp, key, value, list(headers))
    return bytes(builder.build())


def _read_theirs(data: bytes | bytearray) -> list[tuple[DefaultRecordBatch, list[Record]]]:
    """Every batch of ``data`` as kafka-python parses it, its records in our terms."""
    parsed = []
    records = KafkaMemoryRecords(bytes(data))
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        parsed.append(
            (
                batch,
                [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch],
            )
        )
    return parsed


def _expected(records: list[tuple], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, *record) for i, record in enumerate(records)]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_ours_parse_there(codec: CompressionType) -> None:
    data = build_batch(
        RECORDS,
        compression=codec,
        base_offset=42,
        producer_id=3,
        producer_epoch=1,
        base_sequence=17,
    )
    [(batch, records)] = _read_theirs(data)
    assert records == _expected(RECORDS, 42)
    assert (batch.base_offset, batch.last_offset, batch.compression_type) == (42, 47, int(codec))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (3, 1, 17)
    assert (batch.first_timestamp, batch.max_timestamp) == (NOW, NOW + 9)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_theirs_parse_here(codec: CompressionType) -> None:
    batch = RecordBatch(_theirs(RECORDS, codec))
    batch.ensure_valid()
    assert batch.compression_type is codec
    assert (batch.base_offset, batch.last_offset, batch.max_timestamp) == (0, 5, NOW + 9)
    assert list(batch.records()) == _expected(RECORDS)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_theirs_validate_here_and_parse_there_again(codec: CompressionType) -> None:
    request = _theirs(RECORDS, codec) + _theirs(RECORDS[:2], codec)
    result = validate_and_assign_offsets(
        request, next_offset=1000, config=LogConfig(), now_ms=NOW, partition_leader_epoch=2
    )
    parsed = _read_theirs(result.records)
    assert [batch.base_offset for batch, _ in parsed] == [1000, 1006]
    assert [batch.leader_epoch for batch, _ in parsed] == [2, 2]
    assert [record for _, records in parsed for record in records] == _expected(
        RECORDS + RECORDS[:2], 1000
    )


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_log_append_time_reads_the_same_there(codec: CompressionType) -> None:
    data = bytearray(build_batch(RECORDS, compression=codec))
    set_log_append_time(data, 0, NOW + 1000)
    [(batch, records)] = _read_theirs(data)
    assert batch.timestamp_type == 1
    assert {record.timestamp for record in records} == {NOW + 1000}
    assert [record.timestamp for record in RecordBatch(data).records()] == [NOW + 1000] * 6


def test_recompressed_batches_parse_there() -> None:
    request = _theirs(RECORDS, CompressionType.SNAPPY)
    config = LogConfig(compression_type="zstd")
    result = validate_and_assign_offsets(request, next_offset=3, config=config, now_ms=NOW)
    [(batch, records)] = _read_theirs(result.records)
    assert batch.compression_type == int(CompressionType.ZSTD)
    assert records == _expected(RECORDS, 3)


@settings(max_examples=examples(60), deadline=None)
@given(records=records_strategy, codec=st.sampled_from(list(CompressionType)))
def test_both_ways_random(records: list[tuple], codec: CompressionType) -> None:
    [(_, parsed)] = _read_theirs(build_batch(records, compression=codec, base_offset=5))
    assert parsed == _expected(records, 5)
    assert list(MemoryRecords(_theirs(records, codec)).records()) == _expected(records)
