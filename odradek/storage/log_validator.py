"""Kafka's LogValidator: check a produce request's batches and assign their offsets (design §4).

Step 1 of the append path rejects a malformed request whole, with an error naming the batch
(index and byte position in the request) and the record (index) at fault; nothing of it is
written. Steps 2's edits are then made on one private copy of the request: base offsets from
the log end offset, the partition leader epoch, LogAppendTime when the topic wants it, and a
recompression when the topic's ``compression.type`` is not ``producer``.

A request of uncompressed batches kept as the producer sent them (the common case) is checked,
copied (its CRC checked in the same pass over the bytes) and given its offsets in one C call
(``_record_scan.validate_batches``); when that call declines (a fault, a compressed batch, or
the C module not built) the Python checks below do the work and name the fault.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, NoReturn

from crc32c import crc32c

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
from odradek.record.batch_header import BatchHeader
from odradek.record.compression import CompressionType
from odradek.record.record import decode_record
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
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
from odradek.record.record_batch_builder import build_batch
from odradek.record.record_framing import RecordFraming, check_framing

try:
    from odradek.record._record_scan import scan_batches as _native_scan
    from odradek.record._record_scan import validate_batches as _native_validate
except ImportError:  # record_framing warns once that the C checks are not built
    _native_scan = _native_validate = None

Buffer = bytes | bytearray | memoryview

_CODECS = tuple(CompressionType)  # indexed by codec id
_BASE_OFFSET = struct.Struct(">q")


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


class BatchLayout(NamedTuple):
    """A well-formed batch of a request: where it lies and the header fields validation reads.

    ``scan_batches`` (C) returns plain tuples in this order, one per batch; ``framing`` is None
    for a compressed batch, whose records are walked once its CRC has been checked.
    """

    position: int
    size: int
    crc: int
    attributes: int
    records_count: int
    base_timestamp: int
    max_timestamp: int
    framing: RecordFraming | tuple[int, int, int] | None


AppendRules = tuple[bool, int, int, int, bool, int, int]
"""What ``SegmentAppendState.append_batch`` checks a request against: (keys required,
max.message.bytes, message.timestamp.before.max.ms, message.timestamp.after.max.ms,
LogAppendTime, segment.bytes, segment.ms)."""


def append_rules(config: LogConfig) -> AppendRules | None:
    """A topic's rules for the one-call append, or None when its batches must be recompressed
    (``compression.type`` other than ``producer``: only validate_and_assign_offsets does that).
    """
    if config.compression_type != "producer":
        return None
    return (
        config.compact,
        config.max_message_bytes,
        config.message_timestamp_before_max_ms,
        config.message_timestamp_after_max_ms,
        config.log_append_time,
        config.segment_bytes,
        config.segment_ms,
    )


def validate_and_assign_offsets(
    buffer: Buffer,
    *,
    next_offset: int,
    config: LogConfig,
    now_ms: int,
    partition_leader_epoch: int = 0,
    topic_partition: object = "",
) -> ValidationResult:
    """Validate every batch of ``buffer``, then number its records from ``next_offset``.

    Raises CorruptRecordError (framing, lengths, CRC, counts), MessageTooLargeError,
    InvalidRecordError (keyless record on a compacted topic, a control batch: only the
    transaction coordinator writes those, see UnifiedLog.append_end_txn_marker),
    InvalidTimestampError or UnsupportedCompressionTypeError; the request is then rejected
    whole. ``buffer`` itself is never modified. Keyless records and timestamps out of range
    are refused as Kafka's LogValidator refuses them: the first batch holding one is named
    whole, each of its records at fault in the error's ``record_errors``, with Kafka's
    messages (which name ``topic_partition``).
    """
    if _native_validate is not None and config.compression_type == "producer":
        validated = _native_validate(
            buffer,
            config.compact,
            config.max_message_bytes,
            now_ms,
            config.message_timestamp_before_max_ms,
            config.message_timestamp_after_max_ms,
            config.log_append_time,
            next_offset,
            partition_leader_epoch,
            ValidationResult,
        )
        if validated is not None:
            return validated
    records = bytearray(buffer)
    rules = _RecordRules(config, now_ms, str(topic_partition))
    layouts = _scan(records, rules)
    log_append_time = config.log_append_time
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    first_offset = next_offset
    max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
    first_batch_max_timestamp = NO_TIMESTAMP
    with memoryview(records) as view:
        for index, layout in enumerate(layouts):
            position, size, crc, _, count, base_timestamp, _, framing = layout
            if size > config.max_message_bytes or crc != crc32c(
                view[position + ATTRIBUTES_OFFSET : position + size]
            ):
                _check_size_and_crc(records, position, size, crc, _where(index, position), config)
            if framing is None:
                framing = _check_records(records, layout, _where(index, position), rules)
            min_delta, max_delta, index_of_max = framing
            if log_append_time:
                timestamp_type, batch_max, index_of_max = TimestampType.LOG_APPEND_TIME, now_ms, 0
            elif low <= base_timestamp + min_delta and base_timestamp + max_delta <= high:
                timestamp_type, batch_max = TimestampType.CREATE_TIME, base_timestamp + max_delta
            else:
                _raise_for_timestamps(records, layout, _where(index, position), rules)
            _assign(records, layout, next_offset, partition_leader_epoch, timestamp_type, batch_max)
            if index == 0:
                first_batch_max_timestamp = batch_max
            if batch_max > max_timestamp:
                max_timestamp, offset_of_max_timestamp = batch_max, next_offset + index_of_max
            next_offset += count
    if config.compression_type != "producer":
        records = _recompress(records, [layout[0] for layout in layouts], config)
    return ValidationResult(
        records=records,
        first_offset=first_offset,
        last_offset=next_offset - 1,
        max_timestamp=max_timestamp,
        offset_of_max_timestamp=offset_of_max_timestamp,
        record_count=next_offset - first_offset,
        batch_count=len(layouts),
        size_in_bytes=len(records),
        first_batch_max_timestamp=first_batch_max_timestamp,
    )


def _where(index: int, position: int) -> str:
    """How errors name a batch of the request."""
    return f"batch {index} at byte {position}"


class _RecordRules(NamedTuple):
    """What the per-record checks read: the topic's config, the broker's clock, and the
    partition Kafka's messages name."""

    config: LogConfig
    now_ms: int
    topic_partition: str


def _scan(records: bytearray, rules: _RecordRules) -> list[tuple]:
    """The layout of each batch (BatchLayout's fields), once every format check has passed.

    The C scan gives the verdict; when it finds a fault, or is not built, the Python checks
    run and raise the error that names it.
    """
    if _native_scan is not None:
        layouts = _native_scan(records, rules.config.compact)
        if layouts is not None:
            return layouts
    layouts = _scan_in_python(records, rules)
    if _native_scan is not None:  # the C and Python checks disagree: trust the stricter
        raise CorruptRecordError("the request's record batches are malformed")
    return layouts


def _scan_in_python(records: bytearray, rules: _RecordRules) -> list[BatchLayout]:
    """The format checks batch by batch, each error naming its batch, record and byte."""
    config = rules.config
    layouts = []
    for index, (position, header) in enumerate(_batch_headers(records)):
        where = _where(index, position)
        _check_header(records, position, header, where, config)
        layout = BatchLayout(
            position,
            header.batch_length + LOG_OVERHEAD,
            header.crc,
            header.attributes,
            header.records_count,
            header.base_timestamp,
            header.max_timestamp,
            None,
        )
        if not header.attributes & COMPRESSION_CODEC_MASK:
            layout = layout._replace(framing=_check_records(records, layout, where, rules))
        layouts.append(layout)
    return layouts


def _target_compression(config: LogConfig) -> CompressionType:
    """The codec a topic with a ``compression.type`` other than ``producer`` stores."""
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


def _check_header(
    records: bytearray, position: int, header: BatchHeader, where: str, config: LogConfig
) -> None:
    """The checks a batch header allows: format, size, CRC, codec, flags and counts."""
    if header.magic != MAGIC:
        raise CorruptRecordError(f"{where}: magic is {header.magic}, only {MAGIC} is supported")
    size = header.batch_length + LOG_OVERHEAD
    _check_size_and_crc(records, position, size, header.crc, where, config)
    codec = header.attributes & COMPRESSION_CODEC_MASK
    if codec >= len(_CODECS):
        raise UnsupportedCompressionTypeError(f"{where}: unknown compression codec id {codec}")
    if header.attributes & CONTROL_FLAG_MASK:
        raise InvalidRecordError(f"{where}: clients may not write control batches")
    if header.attributes & TRANSACTIONAL_FLAG_MASK and header.producer_id < 0:
        raise InvalidRecordError(f"{where}: a transactional batch without a producer id")
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


def _check_size_and_crc(
    records: bytearray, position: int, size: int, crc: int, where: str, config: LogConfig
) -> None:
    """At most max.message.bytes, and the CRC-32C the producer computed."""
    if size > config.max_message_bytes:
        raise MessageTooLargeError(
            f"{where}: {size} bytes is larger than max.message.bytes {config.max_message_bytes}"
        )
    computed = crc_of(records, position, size)
    if computed != crc:
        raise CorruptRecordError(
            f"{where}: CRC mismatch: stored {crc:#010x}, computed {computed:#010x}"
        )


def _check_records(
    records: bytearray, layout: tuple, where: str, rules: _RecordRules
) -> RecordFraming:
    """Walk the batch's records (decompressed if need be) and prove their framing; a keyless
    record on a compacted topic refuses the batch naming its records at fault, once the batch
    is proven to frame (a fault of framing refuses the request as corrupt first, as on Kafka)."""
    config = rules.config
    position, size, _, attributes, count, _, _, _ = layout
    start, end = position + RECORDS_OFFSET, position + size
    codec = _CODECS[attributes & COMPRESSION_CODEC_MASK]
    data = records
    if codec is not CompressionType.NONE:
        with memoryview(records) as view:
            data = _decompress(codec, view[start:end], where, config)
        start, end = 0, len(data)
        where += " (in its decompressed records)"
    try:
        try:
            return check_framing(data, start, end, count, keys_required=config.compact)
        except InvalidRecordError:
            if not config.compact:
                raise
            check_framing(data, start, end, count, keys_required=False)
    except KafkaError as error:
        raise type(error)(f"{where}: {error.message}") from None
    raise _record_validation_error(records, layout, rules)


def _decompress(codec: CompressionType, block: Buffer, where: str, config: LogConfig) -> bytes:
    """The batch's records decompressed, at most max.message.bytes times
    message.decompression.max.ratio of them: the codec stops there (RECORD_LIST_TOO_LARGE)."""
    try:
        return codec.decompress(block, config.max_decompressed_bytes)
    except CorruptRecordError as error:
        raise CorruptRecordError(
            f"{where} (in its decompressed records): {error.message}"
        ) from None
    except RecordListTooLargeError:
        raise RecordListTooLargeError(
            f"{where}: {codec.label} records decompress to more than "
            f"{config.max_decompressed_bytes} bytes (max.message.bytes "
            f"{config.max_message_bytes} x message.decompression.max.ratio "
            f"{config.message_decompression_max_ratio})"
        ) from None


def _assign(
    records: bytearray,
    layout: tuple,
    base_offset: int,
    partition_leader_epoch: int,
    timestamp_type: TimestampType,
    max_timestamp: int,
) -> None:
    """Write what the broker decides into the batch header.

    Base offset and leader epoch lie outside the CRC; the timestamp type and max timestamp lie
    inside it, so they (and the CRC) are rewritten only when they differ from the producer's.
    """
    position, _, _, attributes, _, _, stored_max_timestamp, _ = layout
    set_base_offset(records, position, base_offset)
    set_partition_leader_epoch(records, position, partition_leader_epoch)
    stored_type = (attributes & TIMESTAMP_TYPE_MASK) >> 3
    if stored_type != timestamp_type or stored_max_timestamp != max_timestamp:
        set_max_timestamp(records, position, timestamp_type, max_timestamp)


def _raise_for_timestamps(
    records: bytearray, layout: tuple, where: str, rules: _RecordRules
) -> NoReturn:
    """CreateTime: refuse the batch naming each record timestamped outside
    [now - before.max, now + after.max]; where none is (records without a timestamp, which
    Kafka takes), name the batch."""
    config, now_ms = rules.config, rules.now_ms
    error = _record_validation_error(records, layout, rules)
    if error is not None:
        raise error
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    bounds = (
        f"[{low}, {high}] (now {now_ms}, message.timestamp.before.max.ms "
        f"{config.message_timestamp_before_max_ms}, message.timestamp.after.max.ms "
        f"{config.message_timestamp_after_max_ms})"
    )
    raise InvalidTimestampError(f"{where}: a record's timestamp is outside {bounds}")


def _record_validation_error(
    records: bytearray, layout: tuple, rules: _RecordRules
) -> InvalidRecordError | InvalidTimestampError | None:
    """Kafka's verdict on a well-framed batch's records (LogValidator.validateRecord): each
    record without a key on a compacted topic, else each CreateTime record timestamped out of
    range, named by its index in the batch with Kafka's message; INVALID_TIMESTAMP if any
    timestamp is at fault, else INVALID_RECORD. Read only to name the culprits."""
    config, now_ms = rules.config, rules.now_ms
    position, size, _, attributes, count, base_timestamp, _, _ = layout
    codec = _CODECS[attributes & COMPRESSION_CODEC_MASK]
    data = codec.decompress(
        records[position + RECORDS_OFFSET : position + size], config.max_decompressed_bytes
    )
    (base_offset,) = _BASE_OFFSET.unpack_from(records, position)  # the producer's, unassigned
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    create_time = not config.log_append_time
    errors = []
    timestamp_at_fault = False
    offset = 0
    for index in range(count):
        record, offset = decode_record(data, offset, base_offset, base_timestamp)
        if config.compact and record.key is None:
            errors.append(
                RecordError(
                    index,
                    "Compacted topic cannot accept message without key in topic partition "
                    f"{rules.topic_partition}",
                )
            )
        elif (
            create_time and record.timestamp != NO_TIMESTAMP and not low <= record.timestamp <= high
        ):
            timestamp_at_fault = True
            errors.append(
                RecordError(
                    index,
                    f"Timestamp {record.timestamp} of message with offset {record.offset} is out "
                    f"of range. The timestamp should be within [{low}, {high}]",
                )
            )
    if not errors:
        return None
    if timestamp_at_fault:
        return InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", tuple(errors)
        )
    shown = ", ".join(str(error) for error in errors[:3])
    return InvalidRecordError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        tuple(errors),
    )


def _recompress(records: bytearray, positions: list[int], config: LogConfig) -> bytearray:
    """The batches rebuilt with the topic's codec, keeping offsets, timestamps and producer.

    Batches already in that codec are kept as they are.
    """
    target = _target_compression(config)
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
