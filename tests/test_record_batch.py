"""RecordBatch views, header edits, and MemoryRecords over concatenated batches."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

import pytest

from odradek.errors import CorruptRecordError, UnsupportedCompressionTypeError
from odradek.record.batch_header import BatchHeader
from odradek.record.compression import CompressionType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import Record
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    RecordBatch,
    TimestampType,
    decompresses_within,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    starts_transactional,
    transactional_producer,
    write_crc,
)
from odradek.record.record_batch_builder import RecordBatchBuilder, build_batch

RECORDS = [
    (1000, b"k0", b"v0", ()),
    (1003, None, b"v1", (("h", b"x"),)),
    (999, b"k2", None, (("n", None),)),
]


def _batch(**kwargs: object) -> bytes:
    return build_batch(RECORDS, **kwargs)  # type: ignore[arg-type]


def _edited(batch: bytes, fmt: str, at: int, value: int, *, fix_crc: bool = True) -> bytearray:
    """``batch`` with one header field overwritten, its CRC recomputed unless told not to."""
    edited = bytearray(batch)
    struct.pack_into(fmt, edited, at, value)
    if fix_crc:
        write_crc(edited, 0)
    return edited


def test_field_offsets_follow_the_header_layout() -> None:
    assert HEADER_STRUCT.size == HEADER_SIZE == RECORDS_OFFSET == 61
    assert LOG_OVERHEAD == 12
    offsets = [PARTITION_LEADER_EPOCH_OFFSET, MAGIC_OFFSET, CRC_OFFSET, ATTRIBUTES_OFFSET]
    assert offsets == [12, 16, 17, 21]
    offsets = [LAST_OFFSET_DELTA_OFFSET, MAX_TIMESTAMP_OFFSET, PRODUCER_ID_OFFSET]
    assert offsets == [23, 35, 43]
    assert [PRODUCER_EPOCH_OFFSET, BASE_SEQUENCE_OFFSET, RECORDS_COUNT_OFFSET] == [51, 53, 57]


def test_header_fields() -> None:
    data = _batch(
        compression=CompressionType.LZ4,
        base_offset=40,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
        partition_leader_epoch=5,
        is_transactional=True,
    )
    batch = RecordBatch(data)
    assert (batch.base_offset, batch.last_offset_delta, batch.last_offset) == (40, 2, 42)
    assert batch.next_offset == 43
    assert batch.size_in_bytes == len(data) == batch.batch_length + LOG_OVERHEAD
    assert (batch.magic, batch.partition_leader_epoch) == (2, 5)
    assert batch.compression_type is CompressionType.LZ4
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert batch.is_transactional and not batch.is_control
    assert (batch.base_timestamp, batch.max_timestamp) == (1000, 1003)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 11)
    assert batch.records_count == 3
    assert batch.attributes == 0x13


def test_header_reads_need_only_the_header() -> None:
    data = _batch(base_offset=9)
    header = RecordBatch(data[:HEADER_SIZE])
    assert (header.base_offset, header.last_offset, header.size_in_bytes) == (9, 11, len(data))
    assert header.max_timestamp == 1003 and header.records_count == 3
    with pytest.raises(CorruptRecordError, match=f"truncated to {HEADER_SIZE}"):
        header.ensure_valid()
    assert not header.is_valid()
    with pytest.raises(CorruptRecordError, match="truncated"):
        list(header.records())


@pytest.mark.parametrize("codec", list(CompressionType))
def test_records_come_out_absolute(codec: CompressionType) -> None:
    batch = RecordBatch(_batch(compression=codec, base_offset=100))
    batch.ensure_valid()
    assert list(batch.records()) == [
        Record(100, 1000, b"k0", b"v0", ()),
        Record(101, 1003, None, b"v1", (("h", b"x"),)),
        Record(102, 999, b"k2", None, (("n", None),)),
    ]


def test_views_over_every_buffer_type_and_position(tmp_path: Path) -> None:
    first, second = _batch(base_offset=0), _batch(base_offset=3, compression=CompressionType.GZIP)
    joined = first + second
    path = tmp_path / "batches"
    path.write_bytes(joined)
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        buffers = [joined, bytearray(joined), memoryview(joined), mapped]
        for buffer in buffers:
            batch = RecordBatch(buffer, len(first))
            assert batch.position == len(first) and batch.is_valid()
            assert [record.offset for record in batch.records()] == [3, 4, 5]
            assert batch.to_bytes() == second
        mapped.close()  # BufferError if a view had left an export of the mmap behind


def test_crc_covers_attributes_to_end_only() -> None:
    data = _batch()
    batch = RecordBatch(data)
    assert batch.compute_crc() == batch.crc
    moved = bytearray(data)
    set_base_offset(moved, 0, 12345)
    set_partition_leader_epoch(moved, 0, 77)
    assert RecordBatch(moved).is_valid() and RecordBatch(moved).crc == batch.crc
    assert RecordBatch(moved).base_offset == 12345
    assert RecordBatch(moved).partition_leader_epoch == 77


@pytest.mark.parametrize("at", [ATTRIBUTES_OFFSET, MAX_TIMESTAMP_OFFSET, HEADER_SIZE + 3, -1])
def test_flipped_byte_fails_the_crc(at: int) -> None:
    data = bytearray(_batch(base_offset=8))
    data[at] ^= 0x01
    batch = RecordBatch(data)
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError, match=r"offset 8 \(byte 0\): CRC mismatch"):
        batch.ensure_valid()


def test_wrong_magic_is_invalid() -> None:
    data = _edited(_batch(), ">b", MAGIC_OFFSET, 1)
    with pytest.raises(CorruptRecordError, match="magic is 1"):
        RecordBatch(data).ensure_valid()


def test_batch_length_below_the_header_is_invalid() -> None:
    data = _edited(_batch(), ">i", 8, 10)
    with pytest.raises(CorruptRecordError, match="shorter than the header"):
        RecordBatch(data).ensure_valid()


def test_set_log_append_time() -> None:
    data = bytearray(_batch(compression=CompressionType.ZSTD))
    set_log_append_time(data, 0, 5555)
    batch = RecordBatch(data)
    assert batch.is_valid()
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 5555 and batch.base_timestamp == 1000
    assert batch.compression_type is CompressionType.ZSTD
    assert [record.timestamp for record in batch.records()] == [5555] * 3


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id: int) -> None:
    data = _edited(_batch(), ">h", ATTRIBUTES_OFFSET, codec_id)
    with pytest.raises(UnsupportedCompressionTypeError, match=f"codec id {codec_id}"):
        RecordBatch(data).compression_type  # noqa: B018
    with pytest.raises(UnsupportedCompressionTypeError):
        list(RecordBatch(data).records())


def test_records_count_above_the_records_present() -> None:
    data = _edited(_batch(), ">i", RECORDS_COUNT_OFFSET, 4)
    with pytest.raises(CorruptRecordError, match="record 3"):
        list(RecordBatch(data).records())


def test_records_count_below_the_records_present() -> None:
    data = _edited(_batch(compression=CompressionType.SNAPPY), ">i", RECORDS_COUNT_OFFSET, 2)
    with pytest.raises(CorruptRecordError, match="follow the 2 records it declares"):
        list(RecordBatch(data).records())


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_records_before_a_corrupt_one_come_first(codec: CompressionType) -> None:
    good = build_batch(RECORDS)
    section = bytearray(good[RECORDS_OFFSET:])
    section[-1] = 0x7E  # the last record's last header value claims 63 more bytes
    batch = bytearray(HEADER_SIZE) + codec.compress(section)
    batch[:HEADER_SIZE] = good[:HEADER_SIZE]
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, int(codec))
    write_crc(batch, 0)
    records = RecordBatch(batch).records()
    assert [next(records), next(records)] == list(RecordBatch(good).records())[:2]
    with pytest.raises(CorruptRecordError, match=r"byte 0\): record 2: "):
        next(records)


def test_corrupt_compressed_block() -> None:
    data = bytearray(_batch(compression=CompressionType.GZIP))
    data[-5:] = b"\x00" * 5
    write_crc(data, 0)
    with pytest.raises(CorruptRecordError, match=r"offset 0 \(byte 0\): gzip decompression"):
        list(RecordBatch(data).records())


def test_memory_records_iterates_whole_batches() -> None:
    first = _batch(base_offset=0)
    second = _batch(base_offset=3, compression=CompressionType.LZ4)
    records = MemoryRecords(first + second)
    batches = list(records.batches())
    assert [batch.position for batch in batches] == [0, len(first)]
    assert [record.offset for record in records.records()] == list(range(6))
    assert records.size_in_bytes == records.valid_bytes == len(first) + len(second)


@pytest.mark.parametrize("keep", [1, LOG_OVERHEAD, HEADER_SIZE, HEADER_SIZE + 1, -1])
def test_memory_records_drops_a_trailing_partial_batch(keep: int) -> None:
    first, second = _batch(base_offset=0), _batch(base_offset=3)
    records = MemoryRecords(first + second[:keep])
    assert [batch.base_offset for batch in records.batches()] == [0]
    assert records.valid_bytes == len(first)
    assert records.size_in_bytes == len(first) + len(second[:keep])


def test_memory_records_empty() -> None:
    assert list(MemoryRecords(b"").batches()) == []
    assert MemoryRecords(b"").valid_bytes == 0


def test_memory_records_refuses_an_impossible_header() -> None:
    first = _batch()
    with pytest.raises(CorruptRecordError, match=f"byte {len(first)} declares batchLength 3"):
        list(MemoryRecords(first + bytes(_edited(_batch(), ">i", 8, 3))).batches())
    with pytest.raises(CorruptRecordError, match="magic 0"):
        list(MemoryRecords(first + bytes(_edited(_batch(), ">b", MAGIC_OFFSET, 0))).batches())


def test_builder_and_view_agree_on_timestamp_type() -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder.append(77, b"k", b"v")
    batch = RecordBatch(builder.build())
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [record.timestamp for record in batch.records()] == [77]


def test_header_reads_every_field_at_once() -> None:
    data = _batch(base_offset=40, producer_id=7, producer_epoch=3, base_sequence=11)
    header = RecordBatch(data[:HEADER_SIZE]).header()
    batch = RecordBatch(data)
    assert header == BatchHeader(
        batch.base_offset,
        batch.batch_length,
        batch.partition_leader_epoch,
        batch.magic,
        batch.crc,
        batch.attributes,
        batch.last_offset_delta,
        batch.base_timestamp,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        batch.records_count,
    )
    assert (header.base_offset, header.producer_id, header.records_count) == (40, 7, 3)


@pytest.mark.parametrize(("keep", "offset"), [(4, r"\?"), (30, "0")])
def test_less_than_a_header_is_invalid(keep: int, offset: str) -> None:
    batch = RecordBatch(_batch()[:keep])
    with pytest.raises(CorruptRecordError, match=f"offset {offset} .*only {keep} bytes"):
        batch.ensure_valid()


def test_decompresses_within_decompresses_no_further_than_asked() -> None:
    plain = build_batch([(0, b"k", b"v", ())])
    small = build_batch([(0, b"k", b"v" * 1000, ())], compression=CompressionType.GZIP)
    large = build_batch([(0, b"k", bytes(10**6), ())], compression=CompressionType.ZSTD)
    assert decompresses_within(plain * 3, 0)
    assert decompresses_within(plain + small + small, 4000)
    assert not decompresses_within(plain + small + small, 2000)  # together, past the budget
    assert not decompresses_within(large, 100_000)
    assert decompresses_within(large, 2_000_000)
    assert not decompresses_within(plain * 5, 10**6, max_batches=4)  # too many to look at
    assert decompresses_within(b"\x00" * 10, 0)  # malformed: the validator refuses it at once
    torn = bytearray(plain * 2)
    torn[8:12] = (-20).to_bytes(4, "big", signed=True)
    assert decompresses_within(torn, 0)
    garbage = bytearray(small)
    garbage[-20:] = bytes(20)
    assert decompresses_within(garbage, 10)  # corrupt within the budget: refused as cheaply


def test_the_first_batchs_transactional_flag_and_producer_are_read_from_its_bytes() -> None:
    def batch(**options: object) -> bytes:
        builder = RecordBatchBuilder(**options)
        builder.append(0, b"k", b"v")
        return bytes(builder.build())

    transactional = batch(producer_id=7, producer_epoch=3, base_sequence=0, is_transactional=True)
    idempotent = batch(producer_id=7, producer_epoch=3, base_sequence=0)
    assert starts_transactional(transactional)
    assert starts_transactional(memoryview(transactional + idempotent))
    assert transactional_producer(transactional) == (7, 3)
    for other in (idempotent, batch(), idempotent + transactional, b"", transactional[:22]):
        assert not starts_transactional(other)
        assert transactional_producer(other) is None
    older_format = bytearray(transactional)
    older_format[MAGIC_OFFSET] = 1
    assert not starts_transactional(older_format)
    assert transactional_producer(older_format) is None
