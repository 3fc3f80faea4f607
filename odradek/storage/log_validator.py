"""Kafka's LogValidator: check a produce request's batches and assign their offsets (SPEC 4).

Step 1 of the append path rejects a malformed request whole, with an error naming the batch
(index and byte position in the request) and the record (index) at fault; nothing of it is
written. Steps 2's edits are then made on one private copy of the request: base offsets from
the log end offset, the partition leader epoch, LogAppendTime when the topic wants it, and a
recompression when the topic's ``compression.type`` is not ``producer``.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.config.log_config import LogConfig
from odradek.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)
from odradek.storage.batch_header import BatchHeader
from odradek.storage.compression import CompressionType
from odradek.storage.record import decode_record
from odradek.storage.record_batch import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    RecordBatch,
    TimestampType,
    crc_of,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from odradek.storage.record_batch_builder import build_batch
from odradek.storage.record_framing import RecordFraming, check_framing

Buffer = bytes | bytearray | memoryview

_CODECS = tuple(CompressionType)  # indexed by codec id


class ValidationResult(NamedTuple):
    """A validated request with offsets assigned, ready to write, and what the log needs.

    A named tuple: one is made per append, in a quarter of the time a frozen dataclass takes.
    """

    records: bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    batch_count: int
    size_in_bytes: int
    first_batch_max_timestamp: int


def validate_and_assign_offsets(
    buffer: Buffer,
    *,
    next_offset: int,
    config: LogConfig,
    now_ms: int,
    partition_leader_epoch: int = 0,
) -> ValidationResult:
    """Validate every batch of ``buffer``, then number its records from ``next_offset``.

    Raises CorruptRecordError (framing, lengths, CRC, counts), MessageTooLargeError,
    InvalidRecordError (keyless record on a compacted topic, control or transactional batch),
    InvalidTimestampError or UnsupportedCompressionTypeError; the request is then rejected
    whole. ``buffer`` itself is never modified.
    """
    records = bytearray(buffer)
    target = _target_compression(config)
    first_offset = next_offset
    max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
    first_batch_max_timestamp = NO_TIMESTAMP
    headers = _batch_headers(records)
    for index, (position, header) in enumerate(headers):
        timestamp_type, batch_max, index_of_max = _validate_batch(
            records, position, header, f"batch {index} at byte {position}", config, now_ms
        )
        _assign(
            records,
            position,
            header,
            next_offset,
            partition_leader_epoch,
            timestamp_type,
            batch_max,
        )
        if index == 0:
            first_batch_max_timestamp = batch_max
        if batch_max > max_timestamp:
            max_timestamp, offset_of_max_timestamp = batch_max, next_offset + index_of_max
        next_offset += header.records_count
    if target is not None:
        records = _recompress(records, [position for position, _ in headers], target, config)
    return ValidationResult(
        records=records,
        first_offset=first_offset,
        last_offset=next_offset - 1,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max_timestamp,
        record_count=next_offset - first_offset,
        batch_count=len(headers),
        size_in_bytes=len(records),
        first_batch_max_timestamp=first_batch_max_timestamp,
    )


def _target_compression(config: LogConfig) -> CompressionType | None:
    """The codec the topic stores, or None for ``producer`` (keep the producer's)."""
    if config.compression_type == "producer":
        return None
    if config.compression_type == "uncompressed":
        return CompressionType.NONE
    return CompressionType.for_name(config.compression_type)


def _batch_headers(records: bytearray) -> list[tuple[int, BatchHeader]]:
    """Where each batch starts, and its header.

    The request must be a whole number of batches, at least one.
    """
    if not records:
        raise CorruptRecordError("the request holds no record batch")
    headers = []
    position = 0
    total = len(records)
    while position < total:
        remaining = total - position
        if remaining < HEADER_SIZE:
            raise CorruptRecordError(
                f"{remaining} trailing bytes at byte {position} are not a whole batch"
            )
        header = BatchHeader._make(HEADER_STRUCT.unpack_from(records, position))
        size = header.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE:
            raise CorruptRecordError(
                f"batch {len(headers)} at byte {position}: batchLength {header.batch_length} "
                f"is shorter than the batch header"
            )
        if size > remaining:
            raise CorruptRecordError(
                f"batch {len(headers)} at byte {position}: batchLength {header.batch_length} "
                f"says {size} bytes but only {remaining} remain"
            )
        headers.append((position, header))
        position += size
    return headers


def _validate_batch(
    records: bytearray,
    position: int,
    header: BatchHeader,
    where: str,
    config: LogConfig,
    now_ms: int,
) -> tuple[TimestampType, int, int]:
    """Every check of the batch at ``position``.

    Returns the timestamp type and max timestamp the topic will store for it, and the index
    of the record holding that timestamp.
    """
    _check_header(records, position, header, where, config)
    framing = _check_records(records, position, header, where, config.compact)
    if config.log_append_time:
        return TimestampType.LOG_APPEND_TIME, now_ms, 0
    _check_timestamps(records, position, header, framing, where, config, now_ms)
    max_timestamp = header.base_timestamp + framing.max_timestamp_delta
    return TimestampType.CREATE_TIME, max_timestamp, framing.index_of_max_timestamp


def _check_header(
    records: bytearray, position: int, header: BatchHeader, where: str, config: LogConfig
) -> None:
    """The checks a batch header allows: format, size, CRC, codec, flags and counts."""
    if header.magic != MAGIC:
        raise CorruptRecordError(f"{where}: magic is {header.magic}, only {MAGIC} is supported")
    size = header.batch_length + LOG_OVERHEAD
    if size > config.max_message_bytes:
        raise MessageTooLargeError(
            f"{where}: {size} bytes is larger than max.message.bytes {config.max_message_bytes}"
        )
    computed = crc_of(records, position, size)
    if computed != header.crc:
        raise CorruptRecordError(
            f"{where}: CRC mismatch: stored {header.crc:#010x}, computed {computed:#010x}"
        )
    codec = header.attributes & COMPRESSION_CODEC_MASK
    if codec >= len(_CODECS):
        raise UnsupportedCompressionTypeError(f"{where}: unknown compression codec id {codec}")
    if header.attributes & CONTROL_FLAG_MASK:
        raise InvalidRecordError(f"{where}: clients may not write control batches")
    if header.attributes & TRANSACTIONAL_FLAG_MASK:
        raise InvalidRecordError(f"{where}: transactional batches are not supported")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"{where}: producer id {header.producer_id} with invalid base sequence "
            f"{header.base_sequence}"
        )
    count = header.records_count
    if count <= 0 or header.last_offset_delta != count - 1:
        raise CorruptRecordError(
            f"{where}: recordsCount {count} does not match lastOffsetDelta "
            f"{header.last_offset_delta} (a producer batch holds offsets 0..count-1)"
        )


def _check_records(
    records: bytearray, position: int, header: BatchHeader, where: str, keys_required: bool
) -> RecordFraming:
    """Walk the batch's records (decompressed if need be) and prove their framing."""
    start = position + RECORDS_OFFSET
    end = position + header.batch_length + LOG_OVERHEAD
    codec = _CODECS[header.attributes & COMPRESSION_CODEC_MASK]
    data = records
    try:
        if codec is not CompressionType.NONE:
            where += " (in its decompressed records)"
            with memoryview(records) as view:
                data = codec.decompress(view[start:end])
            start, end = 0, len(data)
        return check_framing(data, start, end, header.records_count, keys_required=keys_required)
    except KafkaError as error:
        raise type(error)(f"{where}: {error.message}") from None


def _assign(
    records: bytearray,
    position: int,
    header: BatchHeader,
    base_offset: int,
    partition_leader_epoch: int,
    timestamp_type: TimestampType,
    max_timestamp: int,
) -> None:
    """Write what the broker decides into the batch header.

    Base offset and leader epoch lie outside the CRC; the timestamp type and max timestamp lie
    inside it, so they (and the CRC) are rewritten only when they differ from the producer's.
    """
    set_base_offset(records, position, base_offset)
    set_partition_leader_epoch(records, position, partition_leader_epoch)
    stored_type = (header.attributes & TIMESTAMP_TYPE_MASK) >> 3
    if stored_type != timestamp_type or header.max_timestamp != max_timestamp:
        set_max_timestamp(records, position, timestamp_type, max_timestamp)


def _check_timestamps(
    records: bytearray,
    position: int,
    header: BatchHeader,
    framing: RecordFraming,
    where: str,
    config: LogConfig,
    now_ms: int,
) -> None:
    """CreateTime: every record's timestamp within [now - before.max, now + after.max]."""
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    base = header.base_timestamp
    if low <= base + framing.min_timestamp_delta and base + framing.max_timestamp_delta <= high:
        return
    for index, timestamp in enumerate(_record_timestamps(records, position, header)):
        if not low <= timestamp <= high:
            raise InvalidTimestampError(
                f"{where}: record {index} has timestamp {timestamp}, "
                f"outside [{low}, {high}] (now {now_ms}, message.timestamp.before.max.ms "
                f"{config.message_timestamp_before_max_ms}, message.timestamp.after.max.ms "
                f"{config.message_timestamp_after_max_ms})"
            )


def _record_timestamps(records: bytearray, position: int, header: BatchHeader) -> list[int]:
    """The records' own timestamps (base + delta), read only to name a culprit."""
    end = position + header.batch_length + LOG_OVERHEAD
    codec = _CODECS[header.attributes & COMPRESSION_CODEC_MASK]
    data = codec.decompress(records[position + RECORDS_OFFSET : end])
    timestamps = []
    offset = 0
    for _ in range(header.records_count):
        record, offset = decode_record(data, offset, 0, header.base_timestamp)
        timestamps.append(record.timestamp)
    return timestamps


def _recompress(
    records: bytearray, positions: list[int], target: CompressionType, config: LogConfig
) -> bytearray:
    """The batches rebuilt with the topic's codec, keeping offsets, timestamps and producer.

    Batches already in that codec are kept as they are.
    """
    parts = []
    for index, position in enumerate(positions):
        batch = RecordBatch(records, position)
        if batch.compression_type is target:
            parts.append(batch.to_bytes())
            continue
        rebuilt = build_batch(
            batch.records(),
            compression=target,
            base_offset=batch.base_offset,
            timestamp_type=batch.timestamp_type,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            partition_leader_epoch=batch.partition_leader_epoch,
        )
        if len(rebuilt) > config.max_message_bytes:
            raise MessageTooLargeError(
                f"batch {index} at byte {position}: {len(rebuilt)} bytes once recompressed with "
                f"{target.label}, larger than max.message.bytes {config.max_message_bytes}"
            )
        parts.append(rebuilt)
    return bytearray(b"".join(parts))
