"""A v2 record batch (magic 2) read in place, and the header edits the broker makes (design §3).

A batch is a 61-byte header followed by its records, compressed as one block when the codec is
not NONE. :class:`RecordBatch` is a view: it copies nothing and reads each header field when
asked, so it works over a file's bytes, an mmap, or a buffer holding only the 61 header bytes
(enough for a segment to scan batch headers). All integers are big-endian.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import TypeVar

import crc32c

from odradek.errors import (
    CorruptRecordError,
    KafkaError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
)
from odradek.record.batch_header import BatchHeader
from odradek.record.compression import CompressionType
from odradek.record.record import Record, decode_record, decode_records
from odradek.record.record_codec import read_records

Buffer = bytes | bytearray | memoryview
T = TypeVar("T", bound=tuple)

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength

BASE_OFFSET_OFFSET = 0
BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
# Set by Kafka's cleaner on a batch holding a tombstone it kept: the base timestamp field then
# holds the delete horizon, and the records' timestamp deltas are relative to it.
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")


class TimestampType(IntEnum):
    """Bit 3 of the attributes: who set the timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


_CODECS = tuple(CompressionType)  # indexed by codec id: faster than the enum's lookup
_TIMESTAMP_TYPES = tuple(TimestampType)


class RecordBatch:
    """A zero-copy view of the batch starting at ``position`` in ``buffer``."""

    __slots__ = ("_buffer", "_position")

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        self._buffer = buffer
        self._position = position

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, size={self.size_in_bytes}, position={self._position})"
        )

    @property
    def position(self) -> int:
        """Where the batch starts in its buffer."""
        return self._position

    def header(self) -> BatchHeader:
        """Every header field in one read; the buffer needs to hold only the header."""
        return BatchHeader._make(HEADER_STRUCT.unpack_from(self._buffer, self._position))

    @property
    def base_offset(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position)[0]

    @property
    def batch_length(self) -> int:
        """Bytes after the batchLength field, up to the end of the batch."""
        return _INT32.unpack_from(self._buffer, self._position + BATCH_LENGTH_OFFSET)[0]

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + PARTITION_LEADER_EPOCH_OFFSET)[0]

    @property
    def magic(self) -> int:
        return _INT8.unpack_from(self._buffer, self._position + MAGIC_OFFSET)[0]

    @property
    def crc(self) -> int:
        """The stored CRC-32C (unsigned)."""
        return _UINT32.unpack_from(self._buffer, self._position + CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return _INT16.unpack_from(self._buffer, self._position + ATTRIBUTES_OFFSET)[0]

    @property
    def compression_type(self) -> CompressionType:
        """The codec; UnsupportedCompressionTypeError for the undefined ids 5-7."""
        codec = self.attributes & COMPRESSION_CODEC_MASK
        try:
            return _CODECS[codec]
        except IndexError:
            raise UnsupportedCompressionTypeError(
                f"batch at offset {self.base_offset} (byte {self._position}) has unknown "
                f"compression codec id {codec}"
            ) from None

    @property
    def timestamp_type(self) -> TimestampType:
        return _TIMESTAMP_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When a tombstone of this batch may be removed, if Kafka's cleaner set it (bit 6)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None

    @property
    def last_offset_delta(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + LAST_OFFSET_DELTA_OFFSET)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position + BASE_TIMESTAMP_OFFSET)[0]

    @property
    def max_timestamp(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position + MAX_TIMESTAMP_OFFSET)[0]

    @property
    def producer_id(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position + PRODUCER_ID_OFFSET)[0]

    @property
    def producer_epoch(self) -> int:
        return _INT16.unpack_from(self._buffer, self._position + PRODUCER_EPOCH_OFFSET)[0]

    @property
    def base_sequence(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + BASE_SEQUENCE_OFFSET)[0]

    @property
    def records_count(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + RECORDS_COUNT_OFFSET)[0]

    def compute_crc(self) -> int:
        """CRC-32C of attributes..end, as it should be stored; the whole batch must be present."""
        self._ensure_complete()
        return crc_of(self._buffer, self._position, self.size_in_bytes)

    def is_valid(self) -> bool:
        """Whether the batch is complete, magic 2, and its stored CRC matches its bytes."""
        try:
            self.ensure_valid()
        except CorruptRecordError:
            return False
        return True

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError saying what is wrong unless :meth:`is_valid` holds."""
        self._ensure_complete()
        if self.magic != MAGIC:
            raise self._corrupt(f"magic is {self.magic}, only {MAGIC} is supported")
        computed = crc_of(self._buffer, self._position, self.size_in_bytes)
        if computed != self.crc:
            raise self._corrupt(f"CRC mismatch: stored {self.crc:#010x}, computed {computed:#010x}")

    def records(self) -> Iterator[Record]:
        """The records with absolute offsets and timestamps, decompressed as needed.

        In a LogAppendTime batch every record's timestamp is the batch's max timestamp.
        CorruptRecordError if the records do not parse or do not fill the batch exactly; the
        records before the fault are yielded first.
        """
        data = self._records_section()
        header = self.header()
        log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
        records = decode_records(
            data, header.records_count, header.base_offset, header.base_timestamp, log_append_time
        )
        if records is None:
            records = self._records_one_by_one(data, header, log_append_time)
        yield from records

    def record_tuples(
        self, first_offset: int, record_type: type[T], topic: str, partition: int
    ) -> list[T]:
        """The records from offset ``first_offset`` on, read in one call (record_codec), each
        a ``record_type`` tuple of (topic, partition, offset, timestamp, timestamp_type, key,
        value, headers): what :meth:`records` gives, without a Record per record.

        CorruptRecordError, as :meth:`records` names it, if the records do not parse or do not
        fill the batch exactly; then none of them is returned.
        """
        data = self._records_section()
        header = self.header()
        attributes = header.attributes
        log_append_time = header.max_timestamp if attributes & TIMESTAMP_TYPE_MASK else None
        records = read_records(
            data,
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            log_append_time,
            first_offset,
            record_type,
            topic,
            partition,
            _TIMESTAMP_TYPES[(attributes & TIMESTAMP_TYPE_MASK) >> 3],
        )
        if records is None:
            for _ in self._records_one_by_one(data, header, log_append_time):
                pass  # raises, naming the record at fault
            raise self._corrupt("the records do not parse")  # the two readers disagree
        return records

    def _records_one_by_one(
        self, data: bytes, header: BatchHeader, log_append_time: int | None
    ) -> Iterator[Record]:
        """The plain decoder, which names the fault decode_records only detects."""
        position = 0
        for index in range(header.records_count):
            try:
                record, position = decode_record(
                    data, position, header.base_offset, header.base_timestamp, log_append_time
                )
            except CorruptRecordError as error:
                raise self._corrupt(f"record {index}: {error.message}") from None
            yield record
        if position != len(data):
            raise self._corrupt(
                f"{len(data) - position} bytes follow the {header.records_count} records it "
                "declares"
            )

    def to_bytes(self) -> bytes:
        """A copy of the whole batch."""
        self._ensure_complete()
        return bytes(self._buffer[self._position : self._position + self.size_in_bytes])

    def _records_section(self) -> bytes:
        """The records' bytes: a copy when uncompressed, the decompressed block otherwise."""
        self._ensure_complete()
        codec = self.compression_type
        start = self._position + RECORDS_OFFSET
        block = self._buffer[start : self._position + self.size_in_bytes]
        try:
            return codec.decompress(block)
        except CorruptRecordError as error:
            raise self._corrupt(error.message) from None

    def _ensure_complete(self) -> None:
        """The batch declares a sane length and the buffer holds all of it."""
        available = len(self._buffer) - self._position
        if available < HEADER_SIZE:
            raise self._corrupt(f"only {available} bytes, less than a batch header")
        size = self.size_in_bytes
        if size < HEADER_SIZE:
            raise self._corrupt(f"batchLength {self.batch_length} is shorter than the header")
        if available < size:
            raise self._corrupt(f"batch of {size} bytes is truncated to {available}")

    def _corrupt(self, what: str) -> CorruptRecordError:
        """An error naming this batch by base offset and byte position."""
        base_offset = self.base_offset if len(self._buffer) - self._position >= 8 else "?"
        return CorruptRecordError(f"batch at offset {base_offset} (byte {self._position}): {what}")


_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1  # the attributes' flags, big-endian


def starts_transactional(records: Buffer) -> bool:
    """Whether ``records`` start with a v2 batch flagged transactional: a byte test, cheap
    enough for the produce paths to ask of every partition before appending."""
    return (
        len(records) > _ATTRIBUTES_LOW_BYTE
        and records[MAGIC_OFFSET] == MAGIC
        and bool(records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_FLAG_MASK)
    )


def transactional_producer(records: Buffer) -> tuple[int, int] | None:
    """The producer id and epoch of ``records``' first batch when it is transactional; None
    for any other."""
    if len(records) < PRODUCER_EPOCH_OFFSET + 2 or not starts_transactional(records):
        return None
    producer_id = _INT64.unpack_from(records, PRODUCER_ID_OFFSET)[0]
    return producer_id, _INT16.unpack_from(records, PRODUCER_EPOCH_OFFSET)[0]


def crc_of(buffer: Buffer, position: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch of ``size`` bytes at ``position``.

    The caller has checked that the buffer holds the whole batch.
    """
    with memoryview(buffer) as view:
        return crc32c.crc32c(view[position + ATTRIBUTES_OFFSET : position + size])


def write_crc(buffer: bytearray | memoryview, position: int) -> None:
    """Compute the CRC of the whole batch at ``position`` and store it in its header."""
    size = _INT32.unpack_from(buffer, position + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
    _UINT32.pack_into(buffer, position + CRC_OFFSET, crc_of(buffer, position, size))


def set_base_offset(buffer: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Move the batch to ``base_offset``; outside the CRC, so nothing else changes."""
    _INT64.pack_into(buffer, position + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buffer: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the leader epoch the batch was appended under; outside the CRC as well."""
    _INT32.pack_into(buffer, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buffer: bytearray | memoryview,
    position: int,
    timestamp_type: TimestampType,
    max_timestamp: int,
) -> None:
    """Set the timestamp type bit and maxTimestamp, both inside the CRC, and rewrite the CRC."""
    attributes = _INT16.unpack_from(buffer, position + ATTRIBUTES_OFFSET)[0]
    attributes = (attributes & ~TIMESTAMP_TYPE_MASK) | (timestamp_type << 3)
    _INT16.pack_into(buffer, position + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, max_timestamp)
    write_crc(buffer, position)


def set_producer_state(
    buffer: bytearray | memoryview,
    position: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> None:
    """Set the producer id, epoch and base sequence, inside the CRC, and rewrite the CRC (an
    idempotent producer numbers a batch when it first sends it)."""
    _INT64.pack_into(buffer, position + PRODUCER_ID_OFFSET, producer_id)
    _INT16.pack_into(buffer, position + PRODUCER_EPOCH_OFFSET, producer_epoch)
    _INT32.pack_into(buffer, position + BASE_SEQUENCE_OFFSET, base_sequence)
    write_crc(buffer, position)


def set_log_append_time(buffer: bytearray | memoryview, position: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime at ``timestamp``: readers see it as every record's time."""
    set_max_timestamp(buffer, position, TimestampType.LOG_APPEND_TIME, timestamp)


def decompresses_within(buffer: Buffer, max_bytes: int, max_batches: int = 64) -> bool:
    """Whether the compressed batches of ``buffer`` (a producer's, not yet validated) expand to
    at most ``max_bytes`` together, found by decompressing them no further than that: what
    costs a validator little enough to do at once. False too past ``max_batches`` batches.

    Reads each batch's length and attributes, so it costs a step per batch. A malformed batch
    or stream ends the walk with True: the validator refuses it no later than this did.
    """
    total = len(buffer)
    position = 0
    budget = max_bytes
    for _ in range(max_batches):
        if total - position < RECORDS_OFFSET:
            return True
        length_at = position + BATCH_LENGTH_OFFSET
        end = position + LOG_OVERHEAD + int.from_bytes(buffer[length_at : length_at + 4], "big")
        codec_id = buffer[position + ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK
        if codec_id:
            if end > total or codec_id >= len(CompressionType):
                return True
            try:
                with memoryview(buffer) as view:
                    budget -= len(
                        CompressionType(codec_id).decompress(
                            view[position + RECORDS_OFFSET : end], budget
                        )
                    )
            except RecordListTooLargeError:
                return False
            except KafkaError:
                return True
        if end <= length_at:
            return True
        position = end
    return position >= total
