"""LogValidator: every rejection of design §4 step 1 on a crafted request, and offset assignment.

Also the framing walk (record_framing), checked against a reference built on decode_record:
both the C walk (with the Python walk naming the fault) and the Python walk alone, which does
all the work where the C module is not built.
"""

from __future__ import annotations

import struct
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.config.log_config import LogConfig
from odradek.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    MessageTooLargeError,
    RecordError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
)
from odradek.record import record_framing
from odradek.record.compression import CompressionType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import decode_record, encode_record, encode_varint
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
    RecordBatch,
    TimestampType,
    write_crc,
)
from odradek.record.record_batch_builder import RecordBatchBuilder, build_batch
from odradek.record.record_framing import RecordFraming, check_framing
from odradek.storage import log_validator
from odradek.storage.log_validator import validate_and_assign_offsets

NOW = 1_700_000_000_000
CONFIG = LogConfig()
COMPACT = LogConfig(cleanup_policy=("compact",))


def _records(count: int, *, start: int = 0, key: bytes | None = b"k") -> list[tuple]:
    return [(NOW + start + i, key, b"value-%d" % (start + i), ()) for i in range(count)]


def _craft(
    body: bytes,
    count: int,
    *,
    last_offset_delta: int | None = None,
    codec: CompressionType = CompressionType.NONE,
    attributes: int | None = None,
    producer_id: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A batch around raw record bytes ``body``, with a correct CRC whatever the body holds."""
    records = codec.compress(body)
    batch = bytearray(HEADER_SIZE + len(records))
    HEADER_STRUCT.pack_into(
        batch,
        0,
        0,
        len(batch) - LOG_OVERHEAD,
        -1,
        2,
        0,
        int(codec) if attributes is None else attributes,
        count - 1 if last_offset_delta is None else last_offset_delta,
        NOW,
        NOW,
        producer_id,
        0 if producer_id >= 0 else -1,
        base_sequence,
        count,
    )
    batch[HEADER_SIZE:] = records
    write_crc(batch, 0)
    return bytes(batch)


def _body(count: int, *, key: bytes | None = b"k") -> bytes:
    return b"".join(encode_record(i, 0, key, b"v%d" % i) for i in range(count))


def _validate(request: bytes | bytearray | memoryview, config: LogConfig = CONFIG, **kwargs):  # noqa: ANN202
    return validate_and_assign_offsets(
        request, next_offset=kwargs.pop("next_offset", 0), config=config, now_ms=NOW, **kwargs
    )


# ---------------------------------------------------------------- accepted requests


@pytest.mark.parametrize("codec", list(CompressionType))
def test_assigns_offsets_from_the_log_end(codec: CompressionType) -> None:
    request = build_batch(_records(3), compression=codec) + build_batch(
        _records(2, start=3), compression=codec
    )
    original = bytes(request)
    result = _validate(request, next_offset=500, partition_leader_epoch=4)
    assert request == original
    assert (result.first_offset, result.last_offset, result.record_count) == (500, 504, 5)
    assert result.batch_count == 2 and result.size_in_bytes == len(result.records) == len(request)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW + 4, 504)
    assert result.first_batch_max_timestamp == NOW + 2
    batches = list(MemoryRecords(result.records).batches())
    assert [(batch.base_offset, batch.last_offset) for batch in batches] == [(500, 502), (503, 504)]
    assert all(batch.is_valid() and batch.partition_leader_epoch == 4 for batch in batches)
    assert all(batch.compression_type is codec for batch in batches)
    records = list(MemoryRecords(result.records).records())
    assert [record.offset for record in records] == list(range(500, 505))
    assert [record.value for record in records] == [b"value-%d" % i for i in range(5)]


def test_accepts_bytearray_and_memoryview() -> None:
    request = bytearray(build_batch(_records(2)))
    assert _validate(memoryview(request)).record_count == 2
    assert _validate(request, next_offset=7).records != request  # the input is left alone
    assert RecordBatch(request).base_offset == 0


def test_offset_of_max_timestamp_is_the_first_record_holding_it() -> None:
    records = [(NOW + t, b"k", b"v", ()) for t in (5, 9, 2, 9, 1)]
    result = _validate(build_batch(records), next_offset=10)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW + 9, 11)


def test_a_wrong_max_timestamp_is_corrected() -> None:
    batch = bytearray(build_batch(_records(3)))
    struct.pack_into(">q", batch, MAX_TIMESTAMP_OFFSET, NOW + 1000)
    write_crc(batch, 0)
    result = _validate(batch)
    stored = RecordBatch(result.records)
    assert stored.max_timestamp == result.max_timestamp == NOW + 2 and stored.is_valid()


def test_a_producer_batch_marked_log_append_time_becomes_create_time() -> None:
    builder = RecordBatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder.append(NOW, b"k", b"v")
    stored = RecordBatch(_validate(builder.build()).records)
    assert stored.timestamp_type is TimestampType.CREATE_TIME and stored.is_valid()


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_log_append_time(codec: CompressionType) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=10)
    request = build_batch(_records(2, start=-(10**6)), compression=codec) + build_batch(
        _records(2), compression=codec
    )
    result = _validate(request, config, next_offset=30)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW, 30)
    assert result.first_batch_max_timestamp == NOW
    for batch in MemoryRecords(result.records).batches():
        assert batch.is_valid() and batch.timestamp_type is TimestampType.LOG_APPEND_TIME
        assert batch.max_timestamp == NOW and batch.compression_type is codec
    assert {record.timestamp for record in MemoryRecords(result.records).records()} == {NOW}


@pytest.mark.parametrize(
    ("setting", "codec"),
    [("gzip", CompressionType.GZIP), ("uncompressed", CompressionType.NONE)],
)
def test_recompresses_to_the_topic_codec(setting: str, codec: CompressionType) -> None:
    config = LogConfig(compression_type=setting)
    request = build_batch(
        _records(3), compression=CompressionType.LZ4, producer_id=8, base_sequence=0
    ) + build_batch(_records(2, start=3), compression=codec)
    result = _validate(request, config, next_offset=100, partition_leader_epoch=3)
    batches = list(MemoryRecords(result.records).batches())
    assert [batch.compression_type for batch in batches] == [codec, codec]
    assert [(batch.base_offset, batch.records_count) for batch in batches] == [(100, 3), (103, 2)]
    assert (batches[0].producer_id, batches[0].base_sequence) == (8, 0)
    assert all(batch.is_valid() and batch.partition_leader_epoch == 3 for batch in batches)
    assert result.size_in_bytes == len(result.records)
    records = list(MemoryRecords(result.records).records())
    assert [(r.offset, r.timestamp) for r in records] == [(100 + i, NOW + i) for i in range(5)]


def test_compacted_topic_accepts_keyed_records() -> None:
    assert _validate(build_batch(_records(3)), COMPACT).record_count == 3


def test_timestamps_within_bounds_are_accepted() -> None:
    config = LogConfig(message_timestamp_before_max_ms=100, message_timestamp_after_max_ms=100)
    records = [(NOW - 100, b"k", b"v", ()), (NOW + 100, b"k", b"v", ())]
    assert _validate(build_batch(records), config).record_count == 2


@settings(max_examples=examples(60), deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.lists(
                st.tuples(
                    st.integers(NOW - 10**6, NOW + 10**6),
                    st.none() | st.binary(max_size=20),
                    st.none() | st.binary(max_size=150),
                    st.just(()),
                ),
                min_size=1,
                max_size=90,
            ),
            st.sampled_from(list(CompressionType)),
        ),
        min_size=1,
        max_size=3,
    ),
    next_offset=st.integers(0, 2**40),
)
def test_any_valid_request_round_trips(
    batches: list[tuple[list[tuple], CompressionType]], next_offset: int
) -> None:
    request = b"".join(build_batch(records, compression=codec) for records, codec in batches)
    result = _validate(request, next_offset=next_offset)
    flat = [record for records, _ in batches for record in records]
    stored = list(MemoryRecords(result.records).records())
    assert [(r.offset, r.timestamp, r.key, r.value) for r in stored] == [
        (next_offset + i, *record[:3]) for i, record in enumerate(flat)
    ]
    timestamps = [record[0] for record in flat]
    assert result.max_timestamp == max(timestamps)
    assert result.offset_of_max_timestamp == next_offset + timestamps.index(max(timestamps))
    assert result.first_batch_max_timestamp == max(record[0] for record in batches[0][0])
    assert (result.batch_count, result.record_count) == (len(batches), len(flat))


# ---------------------------------------------------------------- rejected requests


def _rejects(request: bytes, error: type[KafkaError], match: str, config: LogConfig = CONFIG):  # noqa: ANN202
    with pytest.raises(error, match=match):
        _validate(request, config)


def test_no_batch() -> None:
    _rejects(b"", CorruptRecordError, "no record batch")


@pytest.mark.parametrize("garbage", [b"\x00", b"\x00" * 60])
def test_trailing_garbage(garbage: bytes) -> None:
    first = build_batch(_records(2))
    _rejects(
        first + garbage, CorruptRecordError, f"{len(garbage)} trailing bytes at byte {len(first)}"
    )


def test_partial_last_batch() -> None:
    first, second = build_batch(_records(2)), build_batch(_records(2))
    _rejects(first + second[:-1], CorruptRecordError, f"batch 1 at byte {len(first)}: .* only")


def test_batch_length_shorter_than_a_header() -> None:
    batch = bytearray(build_batch(_records(1)))
    struct.pack_into(">i", batch, 8, 20)
    _rejects(bytes(batch), CorruptRecordError, "batch 0 at byte 0: batchLength 20")


def test_extended_batch_with_bytes_after_its_records() -> None:
    _rejects(_craft(_body(2) + b"\x00", 2), CorruptRecordError, "1 bytes at byte .* follow the 2")


def test_wrong_magic() -> None:
    batch = bytearray(build_batch(_records(1)))
    batch[MAGIC_OFFSET] = 1
    _rejects(bytes(batch), CorruptRecordError, "magic is 1")


@pytest.mark.parametrize("at", [ATTRIBUTES_OFFSET + 1, MAX_TIMESTAMP_OFFSET, HEADER_SIZE + 2, -1])
def test_crc_mismatch(at: int) -> None:
    first, second = build_batch(_records(2)), bytearray(build_batch(_records(2)))
    second[at] ^= 0x40
    _rejects(first + second, CorruptRecordError, f"batch 1 at byte {len(first)}: CRC mismatch")


def test_batch_over_max_message_bytes() -> None:
    batch = build_batch(_records(10))
    config = LogConfig(max_message_bytes=len(batch) - 1)
    _rejects(
        batch, MessageTooLargeError, f"{len(batch)} bytes is larger than max.message.b", config
    )
    assert _validate(batch, LogConfig(max_message_bytes=len(batch))).record_count == 10


def test_batch_over_max_message_bytes_once_recompressed() -> None:
    records = [(NOW, b"k", b"a" * 2000, ())]
    batch = build_batch(records, compression=CompressionType.ZSTD)
    config = LogConfig(max_message_bytes=1000, compression_type="uncompressed")
    _rejects(batch, MessageTooLargeError, "once recompressed with none", config)


@pytest.mark.parametrize(("count", "last_delta"), [(3, 1), (3, 3), (0, -1)])
def test_count_and_last_offset_delta_disagree(count: int, last_delta: int) -> None:
    batch = _craft(_body(3), count, last_offset_delta=last_delta)
    _rejects(batch, CorruptRecordError, f"recordsCount {count} does not match lastOffsetDelta")


def test_count_above_the_records_present() -> None:
    _rejects(_craft(_body(3), 4), CorruptRecordError, "batch 0 at byte 0: record 3|run past")


def test_count_below_the_records_present() -> None:
    _rejects(_craft(_body(3), 2), CorruptRecordError, "follow the 2 declared records")


def test_impossible_count() -> None:
    _rejects(_craft(_body(3), 1000), CorruptRecordError, "recordsCount 1000 cannot fit")


def test_offset_deltas_must_be_the_record_index() -> None:
    body = encode_record(0, 0, b"k", b"v") + encode_record(2, 0, b"k", b"v")
    _rejects(
        _craft(body, 2), CorruptRecordError, "record 1 at byte 70: offsetDelta is 2, expected 1"
    )


def test_bad_varint() -> None:
    body = _body(1) + b"\xff" * 6
    _rejects(_craft(body, 2), CorruptRecordError, "malformed 32-bit varint")


def test_record_length_past_the_batch_end() -> None:
    record = encode_record(1, 0, b"k", b"v")
    body = _body(1) + encode_varint(len(record) + 5) + record[1:]
    _rejects(_craft(body, 2), CorruptRecordError, "record 1 at byte .*: length .* overruns")


def test_record_fields_shorter_than_its_length() -> None:
    record = encode_record(0, 0, b"k", b"v")
    body = encode_varint(len(record)) + record[1:] + b"\x00"
    _rejects(_craft(body, 1), CorruptRecordError, "record 0 at byte 61: fields end at byte")


@pytest.mark.parametrize(("field", "raw"), [("key", "03"), ("value", "05")])
def test_negative_lengths(field: str, raw: str) -> None:
    body = "00 00 00 03 01 00" if field == "key" else "00 00 00 00 05 00"
    raw_body = bytes.fromhex(body)
    _rejects(
        _craft(encode_varint(len(raw_body)) + raw_body, 1), CorruptRecordError, f"{field} length"
    )


def test_header_lengths_are_checked() -> None:
    body = bytes.fromhex("00 00 00 00 01 02 01 01")  # one header with a null key
    _rejects(_craft(encode_varint(len(body)) + body, 1), CorruptRecordError, "header 0")


def _record_with_header_key(raw_key: bytes, offset_delta: int = 0) -> bytes:
    """A record whose one header has the key bytes ``raw_key``, UTF-8 or not."""
    body = (
        bytes(1)  # attributes
        + encode_varint(0)  # timestampDelta
        + encode_varint(offset_delta)
        + encode_varint(1)
        + b"k"
        + encode_varint(1)
        + b"v"
        + encode_varint(1)  # one header
        + encode_varint(len(raw_key))
        + raw_key
        + encode_varint(1)
        + b"x"
    )
    return encode_varint(len(body)) + body


NOT_UTF8_KEYS = [
    b"\xff",  # never in UTF-8
    b"ok\x80",  # a continuation byte with no lead
    b"\xc0\x80",  # overlong NUL
    b"\xe0\x80\xaf",  # overlong '/'
    b"\xed\xa0\x80",  # a surrogate
    b"\xe2\x82",  # cut short
    b"\xf4\x90\x80\x80",  # above U+10FFFF
]


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
@pytest.mark.parametrize("raw_key", NOT_UTF8_KEYS)
def test_header_keys_must_be_utf8(raw_key: bytes, codec: CompressionType) -> None:
    """Clients read header keys as strings, and some (kafka-python) fail the whole fetch on
    one that does not decode: so none is stored."""
    body = _record_with_header_key(b"fine") + _record_with_header_key(raw_key, offset_delta=1)
    _rejects(
        _craft(body, 2, codec=codec),
        CorruptRecordError,
        r"batch 0 at byte 0.*record 1 at byte \d+: header 0 key is not UTF-8",
    )
    _same_as_reference(body, 2)


@pytest.mark.parametrize("key", ["ключ", "a\u0800", "\U0001f511", "\U0010ffff", "\ufffd"])
def test_header_keys_beyond_ascii_are_accepted(key: str) -> None:
    batch = build_batch([(NOW, b"k", b"v", ((key, b"x"),))])
    assert _validate(batch).record_count == 1
    record = _record_with_header_key(key.encode())
    assert _walk(record, 1, False) == _python_walk(record, 1, False) == RecordFraming(0, 0, 0)


@settings(max_examples=examples(300), deadline=None)
@given(raw_key=st.binary(max_size=12) | st.text(max_size=4).map(str.encode))
def test_header_key_check_is_pythons_utf8(raw_key: bytes) -> None:
    """The C walk's UTF-8 check takes exactly what Python's strict decoder takes."""
    try:
        raw_key.decode("utf-8")
        expected: object = RecordFraming(0, 0, 0)
    except UnicodeDecodeError:
        expected = "rejected"
    record = _record_with_header_key(raw_key)
    assert _outcome(_walk, record, 1, False) == expected
    assert _outcome(_python_walk, record, 1, False) == expected


KEYLESS = "Compacted topic cannot accept message without key in topic partition orders-3"


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.SNAPPY])
def test_keyless_records_on_a_compacted_topic_are_named_as_kafka_names_them(
    codec: CompressionType,
) -> None:
    """Kafka's LogValidator.validateRecord: each keyless record of the batch, by its index in
    the batch (KIP-467's record_errors), and the message of its RecordValidationException."""
    records = _records(2, key=None) + _records(1, start=2) + _records(2, start=3, key=None)
    batch = build_batch(records, compression=codec)
    with pytest.raises(InvalidRecordError) as caught:
        _validate(batch, COMPACT, topic_partition="orders-3")
    named = tuple(RecordError(index, KEYLESS) for index in (0, 1, 3, 4))
    assert caught.value.record_errors == named
    assert caught.value.message == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        "showing the first three errors at most: ["
        + ", ".join(f"RecordError(batchIndex={i}, message='{KEYLESS}')" for i in (0, 1, 3))
        + "]"
    )
    assert _validate(batch).record_count == 5


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
@pytest.mark.parametrize("timestamp", [NOW - 101, NOW + 101])
def test_timestamps_out_of_range_are_named_as_kafka_names_them(
    timestamp: int, codec: CompressionType
) -> None:
    """Kafka's message names the record's offset as the producer sent it (base 0 here)."""
    config = LogConfig(message_timestamp_before_max_ms=100, message_timestamp_after_max_ms=100)
    records = [(NOW, b"k", b"v", ()), (timestamp, b"k", b"v", ()), (NOW, b"k", b"v", ())]
    with pytest.raises(InvalidTimestampError) as caught:
        _validate(build_batch(records, compression=codec), config)
    assert caught.value.message == "One or more records have been rejected due to invalid timestamp"
    assert caught.value.record_errors == (
        RecordError(
            1,
            f"Timestamp {timestamp} of message with offset 1 is out of range. The timestamp "
            f"should be within [{NOW - 100}, {NOW + 100}]",
        ),
    )


def test_a_keyless_record_beside_a_timestamp_out_of_range_is_an_invalid_timestamp() -> None:
    """Per record the key is checked first; any timestamp at fault makes it INVALID_TIMESTAMP."""
    config = LogConfig(cleanup_policy=("compact",), message_timestamp_before_max_ms=100)
    records = [(NOW, None, b"v", ()), (NOW - 101, b"k", b"v", ()), (NOW - 101, None, b"v", ())]
    with pytest.raises(InvalidTimestampError) as caught:
        _validate(build_batch(records), config, topic_partition="orders-3")
    assert [(e.batch_index, e.message.split()[0]) for e in caught.value.record_errors] == [
        (0, "Compacted"),
        (1, "Timestamp"),
        (2, "Compacted"),
    ]


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unsupported_codec(codec_id: int) -> None:
    batch = _craft(_body(1), 1, attributes=codec_id)
    _rejects(batch, UnsupportedCompressionTypeError, f"codec id {codec_id}")


@pytest.mark.parametrize(
    ("flag", "match"),
    [(0x20, "clients may not write control batches"), (0x30, "control"), (0x10, "transactional")],
)
def test_control_batches_and_transactional_ones_without_a_producer(flag: int, match: str) -> None:
    _rejects(_craft(_body(1), 1, attributes=flag), InvalidRecordError, match)


def test_a_transactional_batch_of_a_producer_is_accepted_by_both_checks() -> None:
    batch = _craft(_body(2), 2, attributes=0x10, producer_id=5, base_sequence=0)
    assert _c_layouts(bytearray(batch), False) == _python_layouts(bytearray(batch), False)
    assert _c_layouts(bytearray(batch), False) != "rejected"
    result = validate_and_assign_offsets(batch, next_offset=7, config=CONFIG, now_ms=NOW)
    assert (result.first_offset, result.last_offset) == (7, 8)
    assert result.records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG_MASK


def test_producer_id_without_sequence() -> None:
    batch = _craft(_body(1), 1, producer_id=5, base_sequence=-1)
    _rejects(batch, InvalidRecordError, "invalid base sequence -1")


def test_compressed_block_that_does_not_decompress() -> None:
    batch = bytearray(_craft(_body(3), 3, codec=CompressionType.LZ4))
    batch[HEADER_SIZE + 7 : HEADER_SIZE + 11] = b"\xff\xff\x00\x00"  # first block's size
    write_crc(batch, 0)
    _rejects(bytes(batch), CorruptRecordError, r"batch 0 at byte 0 \(in its decompressed .*lz4")


def test_compressed_records_are_walked() -> None:
    body = _body(3)[:-1]
    batch = _craft(body, 3, codec=CompressionType.GZIP)
    _rejects(batch, CorruptRecordError, r"batch 0 at byte 0 \(in its decompressed records\)")


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD])
def test_records_decompressing_past_the_ratio_are_refused_naming_the_limit(
    codec: CompressionType,
) -> None:
    bomb = _craft(bytes(64 * 1024 * 1024), 1, codec=codec)  # zeros: no valid record
    config = LogConfig(max_message_bytes=len(bomb), message_decompression_max_ratio=4)
    limit = len(bomb) * 4
    _rejects(
        bomb,
        RecordListTooLargeError,
        f"batch 0 at byte 0: {codec.label} records decompress to more than {limit} bytes "
        rf"\(max.message.bytes {len(bomb)} x message.decompression.max.ratio 4\)",
        config,
    )


def test_records_within_the_ratio_are_accepted() -> None:
    batch = build_batch([(NOW, b"k", b"a" * 5000, ())], compression=CompressionType.GZIP)
    config = LogConfig(max_message_bytes=len(batch), message_decompression_max_ratio=1)
    _rejects(batch, RecordListTooLargeError, "records decompress to more than", config)
    ratio = 5100 // len(batch) + 1
    config = LogConfig(max_message_bytes=len(batch), message_decompression_max_ratio=ratio)
    assert _validate(batch, config).record_count == 1


def test_one_bad_batch_rejects_the_whole_request() -> None:
    good = build_batch(_records(3))
    bad = _craft(_body(2), 2, last_offset_delta=5)
    request = bytearray(good + bad + good)
    with pytest.raises(CorruptRecordError, match=f"batch 1 at byte {len(good)}"):
        _validate(request)
    assert request == good + bad + good


# ---------------------------------------------------------------- the framing walk


def _reference(data: bytes, count: int, keys_required: bool) -> RecordFraming:
    """The framing rules restated on top of decode_record, slowly and plainly."""
    if count < 1:
        raise CorruptRecordError("no records")
    position, deltas = 0, []
    for index in range(count):
        record, position = decode_record(data, position, 0, 0)
        if record.offset != index:
            raise CorruptRecordError("offset delta")
        # decode_record reads a key that is not UTF-8 with U+FFFD in its place; no generated
        # key holds U+FFFD itself, so one here marks such a key.
        if any("\ufffd" in key for key, _ in record.headers):
            raise CorruptRecordError("header key not UTF-8")
        if keys_required and record.key is None:
            raise InvalidRecordError("no key")
        deltas.append(record.timestamp)
    if position != len(data):
        raise CorruptRecordError("trailing bytes")
    return RecordFraming(min(deltas), max(deltas), deltas.index(max(deltas)))


def _outcome(check, data: bytes, count: int, keys_required: bool) -> object:  # noqa: ANN001
    try:
        return check(data, count, keys_required)
    except KafkaError:
        return "rejected"


def _walk(data: bytes, count: int, keys_required: bool) -> RecordFraming:
    return check_framing(data, 0, len(data), count, keys_required=keys_required)


def _python_walk(data: bytes, count: int, keys_required: bool) -> RecordFraming:
    with mock.patch.object(record_framing, "_native_walk", None):
        return _walk(data, count, keys_required)


def _same_as_reference(data: bytes, count: int, keys_required: bool = False) -> None:
    expected = _outcome(_reference, data, count, keys_required)
    assert _outcome(_walk, data, count, keys_required) == expected
    assert _outcome(_python_walk, data, count, keys_required) == expected
    # The walk must also hold in the middle of a larger buffer, as in a request.
    padded = b"\xff" * 9 + data + b"\xff" * 9
    try:
        got: object = check_framing(padded, 9, 9 + len(data), count, keys_required=keys_required)
    except KafkaError:
        got = "rejected"
    assert got == expected


def test_the_c_walk_is_built() -> None:
    """The package builds the C walk wherever a compiler is (CI has one): without it every
    append pays the Python walk."""
    assert record_framing._native_walk is not None


@st.composite
def uniform_records(draw: st.DrawFn) -> tuple[bytes, int]:
    """Records of one layout (as most producers send), maybe with one odd record."""
    count = draw(st.integers(1, 150))
    key = draw(st.sampled_from([None, b"", b"key-0001", b"k" * 70]))
    value = draw(st.sampled_from([None, b"", b"v" * 10, b"v" * 100, b"v" * 300]))
    deltas = draw(st.lists(st.integers(-64, 63), min_size=count, max_size=count))
    if draw(st.booleans()):
        deltas.sort()
    records = [encode_record(i, deltas[i], key, value) for i in range(count)]
    odd = draw(st.integers(0, count - 1))
    variant = draw(st.sampled_from(["none", "timestamp", "value", "header", "offset"]))
    if variant == "timestamp":
        records[odd] = encode_record(odd, 5000, key, value)
    elif variant == "value":
        records[odd] = encode_record(odd, deltas[odd], key, (value or b"") + b"x")
    elif variant == "header":
        records[odd] = encode_record(odd, deltas[odd], key, value, [("h", None)])
    elif variant == "offset":
        records[odd] = encode_record(odd + 1, deltas[odd], key, value)
    return b"".join(records), count


@settings(max_examples=examples(400), deadline=None)
@given(
    generated=uniform_records(),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=2),
    count_error=st.sampled_from([0, 0, 0, 1, -1]),
    keys_required=st.booleans(),
)
def test_walk_matches_the_reference(
    generated: tuple[bytes, int],
    flips: list[tuple[int, int]],
    count_error: int,
    keys_required: bool,
) -> None:
    data, count = generated
    mutated = bytearray(data)
    for at, mask in flips:
        mutated[at % len(mutated)] ^= mask
    _same_as_reference(bytes(mutated), count + count_error, keys_required)


# Records of any layout: the walk's inline one- and two-byte varints and the longer ones.
varied_records = st.lists(
    st.tuples(
        st.integers(-70, 8200) | st.integers(-(2**40), 2**40),
        st.none() | st.binary(max_size=80),
        st.none() | st.binary(max_size=200) | st.just(b"v" * 8200),
        st.just(()) | st.just((("h", b"x"),)),
    ),
    min_size=1,
    max_size=100,
).map(
    lambda records: (
        b"".join(encode_record(index, *record) for index, record in enumerate(records)),
        len(records),
    )
)


@settings(max_examples=examples(150), deadline=None)
@given(
    generated=varied_records,
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=2),
    count_error=st.sampled_from([0, 0, 0, 1, -1]),
    keys_required=st.booleans(),
)
def test_walk_of_any_layout_matches_the_reference(
    generated: tuple[bytes, int],
    flips: list[tuple[int, int]],
    count_error: int,
    keys_required: bool,
) -> None:
    data, count = generated
    mutated = bytearray(data)
    for at, mask in flips:
        mutated[at % len(mutated)] ^= mask
    _same_as_reference(bytes(mutated), count + count_error, keys_required)


@pytest.mark.parametrize("victim", [255, 256, 257, 1000, 1500])
def test_long_batches_are_checked_to_the_end(victim: int) -> None:
    """Break a framing byte of one record deep in a long batch."""
    records = [encode_record(i, i % 7, b"key", b"v" * 20) for i in range(1600)]
    start = sum(len(record) for record in records[:victim])
    data = b"".join(records)
    assert _walk(data, 1600, True) == RecordFraming(0, 6, 6)
    for at in (start, start + len(records[victim]) - 1):  # its length and its header count
        mutated = bytearray(data)
        mutated[at] ^= 0x01
        _same_as_reference(bytes(mutated), 1600)


@pytest.mark.parametrize("victim", [1, 30, 63, 64, 65, 100, 149])
def test_every_framing_byte_is_checked(victim: int) -> None:
    """Break each byte of one record among identical layouts, one at a time."""
    records = [encode_record(i, i // 10, b"key-%04d" % i, b"v" * 100) for i in range(150)]
    start = sum(len(record) for record in records[:victim])
    data = b"".join(records)
    assert _walk(data, 150, True) == RecordFraming(0, 14, 140)
    for at in range(start, start + len(records[victim])):
        for mask in (0x01, 0x80, 0x7F):
            mutated = bytearray(data)
            mutated[at] ^= mask
            _same_as_reference(bytes(mutated), 150)


def test_offset_deltas_of_three_bytes() -> None:
    records = [encode_record(i, 0, None, b"") for i in range(8300)]
    data = b"".join(records)
    assert _walk(data, 8300, False) == RecordFraming(0, 0, 0)
    broken = b"".join(records[:8250]) + encode_record(8251, 0, None, b"") + b"".join(records[8251:])
    _same_as_reference(broken, 8300)


def test_timestamp_bounds_when_timestamps_go_back() -> None:
    deltas = [5, 9, 2, 9, 1, 7] * 20
    data = b"".join(encode_record(i, d, b"k", b"v") for i, d in enumerate(deltas))
    assert _walk(data, len(deltas), True) == RecordFraming(1, 9, 1)


def test_walk_names_the_record_and_position() -> None:
    records = [encode_record(i, 0, b"k", b"v") for i in range(5)]
    records[3] = encode_record(7, 0, b"k", b"v")
    with pytest.raises(CorruptRecordError, match="record 3 at byte 27: offsetDelta is 7"):
        _walk(b"".join(records), 5, False)


def _framed(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


@pytest.mark.parametrize(
    "record",
    [
        _framed(b"\x00" + b"\xff" * 9 + b"\x02" + b"\x00\x01\x01\x00"),  # timestamp over 64 bits
        _framed(b"\x00" + b"\xff" * 10 + b"\x00\x01\x01\x00"),  # varlong of 11 bytes
        _framed(b"\x00\x00" + b"\xff" * 4 + b"\x1f" + b"\x01\x01\x00"),  # offsetDelta over 32 bits
        _framed(b"\x00\x00\x00" + encode_varint(2**31 - 1) + b"\x01\x00"),  # key past the end
        _framed(b"\x00\x00\x00\x01" + encode_varint(-(2**31)) + b"\x00"),  # value length min int
        _framed(b"\x00\x00\x00\x01\x01" + encode_varint(2**31 - 1)),  # header count huge
        _framed(b"\x00\x00\x00\x01\x01\x02" + encode_varint(2**31 - 1) + b"\x00"),  # header key
        _framed(b"\x00\x00\x00\x01\x01\x02\x00\x03"),  # header value length -2
        _framed(b"\x00\x00\x00\x01\x01"),  # no header count
        _framed(b""),  # no attributes
        encode_varint(-5) + b"\x00" * 8,  # negative record length
        b"\xff\xff\xff\xff\xff\x01" + b"\x00" * 6,  # record length of six bytes
    ],
)
def test_malformed_records_are_rejected_by_both_walks(record: bytes) -> None:
    for walk in (_walk, _python_walk):
        with pytest.raises(CorruptRecordError):
            walk(record + b"\x00" * 8, 1, False)
        with pytest.raises(CorruptRecordError):
            walk(record, 1, False)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_the_walk_reads_any_buffer(kind: type) -> None:
    data = b"".join(encode_record(i, i, b"k", b"v" * i) for i in range(40))
    assert check_framing(kind(data), 0, len(data), 40, keys_required=True) == (0, 39, 39)


# --- the C batch scan (scan_batches) against the Python format checks ----------------------


def test_the_c_scan_is_built() -> None:
    """Without it every append runs the Python header checks (docs/native.md)."""
    assert log_validator._native_scan is not None


def _python_layouts(data: bytearray, keys_required: bool) -> object:
    """The Python checks' verdict on the batches' format alone: the CRC is taken as stored
    and max.message.bytes as unbounded, which the C scan leaves to its caller."""
    config = LogConfig(
        cleanup_policy=("compact",) if keys_required else ("delete",),
        max_message_bytes=2**31 - 1,
    )
    with mock.patch.object(
        log_validator, "crc_of", lambda buffer, position, size: _stored(buffer, position)
    ):
        try:
            layouts = log_validator._scan_in_python(
                data, log_validator._RecordRules(config, NOW, "")
            )
        except KafkaError:
            return "rejected"
    return [
        tuple(layout[:7]) + (None if layout[7] is None else tuple(layout[7]),) for layout in layouts
    ]


def _stored(buffer: bytearray, position: int) -> int:
    return HEADER_STRUCT.unpack_from(buffer, position)[4]


def _c_layouts(data: bytearray, keys_required: bool) -> object:
    layouts = log_validator._native_scan(data, keys_required)
    return "rejected" if layouts is None else layouts


@st.composite
def requests(draw: st.DrawFn) -> bytearray:
    """One to three batches, some compressed, some with flags or sequences set."""
    batches = []
    for _ in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 20))
        key = draw(st.sampled_from([None, b"k", b"key" * 20]))
        codec = draw(st.sampled_from([CompressionType.NONE] * 3 + [CompressionType.GZIP]))
        batches.append(build_batch(_records(count, key=key), compression=codec))
    return bytearray(b"".join(batches))


@settings(max_examples=examples(400), deadline=None)
@given(
    request=requests(),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
    cut=st.sampled_from([0, 0, 0, 1, 7, 61]),
    keys_required=st.booleans(),
)
def test_the_c_scan_agrees_with_the_python_checks(
    request: bytearray, flips: list[tuple[int, int]], cut: int, keys_required: bool
) -> None:
    for at, mask in flips:
        request[at % len(request)] ^= mask
    if cut:
        del request[-cut:]
    assert _c_layouts(request, keys_required) == _python_layouts(request, keys_required)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.__setitem__(MAGIC_OFFSET, 1),
        lambda b: b.__setitem__(ATTRIBUTES_OFFSET + 1, 0x07),  # codec id 7
        lambda b: b.__setitem__(ATTRIBUTES_OFFSET + 1, 0x10),  # transactional
        lambda b: b.__setitem__(ATTRIBUTES_OFFSET + 1, 0x20),  # control
        lambda b: struct.pack_into(">q", b, 43, 7),  # a producer id with base sequence -1
        lambda b: struct.pack_into(">i", b, 57, 3),  # recordsCount off lastOffsetDelta
        lambda b: struct.pack_into(">i", b, 8, 2**31 - 1),  # batchLength past the end
        lambda b: struct.pack_into(">i", b, 8, -12),  # batchLength below a header
    ],
)
def test_the_c_scan_rejects_each_header_fault(mutate) -> None:  # noqa: ANN001
    request = bytearray(build_batch(_records(2)))
    mutate(request)
    assert log_validator._native_scan(request, False) is None
    assert _python_layouts(request, False) == "rejected"


def test_a_request_the_c_scan_rejects_gets_the_python_error() -> None:
    request = bytearray(build_batch(_records(2)))
    request[MAGIC_OFFSET] = 1
    write_crc(request, 0)
    with pytest.raises(CorruptRecordError, match="batch 0 at byte 0: magic is 1"):
        validate_and_assign_offsets(request, next_offset=0, config=CONFIG, now_ms=NOW)


def test_without_the_c_scan_the_python_checks_do_the_work() -> None:
    good = build_batch(_records(3)) + build_batch(_records(2, key=None))
    with (
        mock.patch.object(log_validator, "_native_scan", None),
        mock.patch.object(log_validator, "_native_validate", None),
    ):
        result = validate_and_assign_offsets(good, next_offset=10, config=CONFIG, now_ms=NOW)
        assert (result.first_offset, result.last_offset, result.batch_count) == (10, 14, 2)
        with pytest.raises(InvalidRecordError, match="batchIndex=0, message='Compacted"):
            validate_and_assign_offsets(good, next_offset=10, config=COMPACT, now_ms=NOW)
