"""Writes v2 record batches: producers, tests and the cleaner build batches here (design §3)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from odradek.int_limits import INT32_MAX
from odradek.record.compression import CompressionType
from odradek.record.record import Record, write_record
from odradek.record.record_batch import (
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TRANSACTIONAL_FLAG_MASK,
    TimestampType,
    write_crc,
)
from odradek.record.record_codec import write_records

HeaderSequence = Sequence[tuple[str, bytes | None]]
RecordTuple = tuple[int, bytes | None, bytes | None, HeaderSequence]


class RecordBatchBuilder:
    """Accumulates records and builds one batch from them.

    ``append`` numbers records base_offset, base_offset + 1, ...; ``append_with_offset`` keeps
    given offsets (strictly increasing), so a rebuilt batch keeps its base offset and its
    records' offsets, as the cleaner needs, and ``override_last_offset`` keeps the last offset
    of the batch it rebuilds (Kafka's ``overrideLastOffset``). The batch's max timestamp is the
    largest record timestamp; for a LogAppendTime batch pass the append time as every record's
    timestamp.
    """

    __slots__ = (
        "_compression",
        "_base_offset",
        "_timestamp_type",
        "_producer_id",
        "_producer_epoch",
        "_base_sequence",
        "_partition_leader_epoch",
        "_is_transactional",
        "_is_control",
        "_records",
        "_num_records",
        "_last_offset",
        "_last_offset_override",
        "_base_timestamp",
        "_max_timestamp",
        "_delete_horizon_ms",
    )

    def __init__(
        self,
        compression: CompressionType = CompressionType.NONE,
        base_offset: int = 0,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        is_transactional: bool = False,
        is_control: bool = False,
        delete_horizon_ms: int | None = None,
    ) -> None:
        """``delete_horizon_ms``: the batch's delete horizon (the cleaner's, see
        odradek/cleaner/batch_filter.py), its base timestamp then, with the records'
        timestamp deltas relative to it; None for none."""
        if delete_horizon_ms is not None and delete_horizon_ms < 0:
            raise ValueError(f"delete horizon {delete_horizon_ms} is negative")
        self._compression = compression
        self._base_offset = base_offset
        self._timestamp_type = timestamp_type
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._is_transactional = is_transactional
        self._is_control = is_control
        self._records = bytearray(HEADER_SIZE)  # room for the header, written by build
        self._num_records = 0
        self._last_offset: int | None = None
        self._last_offset_override: int | None = None
        self._delete_horizon_ms = delete_horizon_ms
        self._base_timestamp = NO_TIMESTAMP if delete_horizon_ms is None else delete_horizon_ms
        self._max_timestamp = NO_TIMESTAMP

    @property
    def compression(self) -> CompressionType:
        return self._compression

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def num_records(self) -> int:
        return self._num_records

    @property
    def is_empty(self) -> bool:
        return self._num_records == 0

    @property
    def estimated_size_in_bytes(self) -> int:
        """Header plus uncompressed records: an upper bound for all but incompressible data."""
        return len(self._records)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderSequence = (),
    ) -> int:
        """Add a record at the next offset; returns that offset."""
        offset = self._base_offset if self._last_offset is None else self._last_offset + 1
        self.append_with_offset(offset, timestamp, key, value, headers)
        return offset

    def append_with_offset(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: HeaderSequence = (),
    ) -> None:
        """Add a record at ``offset``: above the previous one and within int32 of base_offset."""
        last_offset = self._last_offset
        if last_offset is None:
            if self._delete_horizon_ms is None:
                self._base_timestamp = timestamp
        elif offset <= last_offset:
            raise ValueError(f"offset {offset} is not above the previous {last_offset}")
        offset_delta = offset - self._base_offset
        if not 0 <= offset_delta <= INT32_MAX:
            raise ValueError(
                f"offset {offset} is outside [base_offset, base_offset + 2^31 - 1] "
                f"with base_offset {self._base_offset}"
            )
        write_record(
            self._records, offset_delta, timestamp - self._base_timestamp, key, value, headers
        )
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._last_offset = offset
        self._num_records += 1

    def append_many(
        self,
        timestamp: int,
        keys: list[bytes | None] | None,
        values: list[bytes | None],
        start: int,
        stop: int,
        max_size: int,
    ) -> int:
        """Add records ``start`` to ``stop`` of ``values`` (with ``keys``, or none), without
        headers, at the next offsets and all at ``timestamp``, in one call (record_codec),
        while the batch stays within ``max_size`` bytes (:attr:`estimated_size_in_bytes`).

        Returns the index of the first record not added. The same bytes as :meth:`append`
        of each record.
        """
        last_offset = self._last_offset
        if last_offset is None:
            next_offset = self._base_offset
            base_timestamp = timestamp if self._delete_horizon_ms is None else self._base_timestamp
        else:
            next_offset = last_offset + 1
            base_timestamp = self._base_timestamp
        stopped = write_records(
            self._records,
            keys,
            values,
            start,
            stop,
            next_offset - self._base_offset,
            timestamp - base_timestamp,
            max_size,
        )
        added = stopped - start
        if added:
            self._base_timestamp = base_timestamp
            if timestamp > self._max_timestamp:
                self._max_timestamp = timestamp
            self._last_offset = next_offset + added - 1
            self._num_records += added
        return stopped

    def override_last_offset(self, last_offset: int) -> None:
        """Give the batch ``last_offset`` as its last offset, at or past its last record's: a
        cleaned batch keeps its producer's last sequence (base sequence + last offset delta)
        whichever of its records stay."""
        if not 0 <= last_offset - self._base_offset <= INT32_MAX:
            raise ValueError(
                f"last offset {last_offset} is outside [base_offset, base_offset + 2^31 - 1] "
                f"with base_offset {self._base_offset}"
            )
        self._last_offset_override = last_offset

    def build(self) -> bytes:
        """The batch: header, CRC and (compressed) records. An empty builder builds ``b""``."""
        if self._num_records == 0:
            return b""
        batch = self._records  # uncompressed records follow the header's room: no copy
        if self._compression is not CompressionType.NONE:
            with memoryview(batch) as view:
                batch = bytearray(HEADER_SIZE) + self._compression.compress(view[HEADER_SIZE:])
        HEADER_STRUCT.pack_into(
            batch,
            0,
            self._base_offset,
            len(batch) - LOG_OVERHEAD,
            self._partition_leader_epoch,
            MAGIC,
            0,
            self._attributes(),
            self._final_last_offset() - self._base_offset,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._num_records,
        )
        write_crc(batch, 0)
        return bytes(batch)

    def _final_last_offset(self) -> int:
        last_offset = self._last_offset
        override = self._last_offset_override
        if override is None:
            return last_offset
        if override < last_offset:
            raise ValueError(f"last offset {override} is below the last record's {last_offset}")
        return override

    def _attributes(self) -> int:
        attributes = int(self._compression) | (int(self._timestamp_type) << 3)
        if self._is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self._is_control:
            attributes |= CONTROL_FLAG_MASK
        if self._delete_horizon_ms is not None:
            attributes |= DELETE_HORIZON_FLAG_MASK
        return attributes


def build_batch(
    records: Iterable[RecordTuple] | Iterable[Record],
    *,
    compression: CompressionType = CompressionType.NONE,
    base_offset: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    last_offset: int | None = None,
    delete_horizon_ms: int | None = None,
    is_control: bool = False,
) -> bytes:
    """One batch from ``(timestamp, key, value, headers)`` tuples or from :class:`Record`\\ s.

    Tuples are numbered from ``base_offset`` (default 0). Records keep their offsets; the base
    offset defaults to the first record's; ``last_offset`` overrides the last record's as the
    batch's last offset; ``delete_horizon_ms`` gives the batch that delete horizon. Returns
    ``b""`` when there are no records.
    """
    items = list(records)
    if base_offset is None:
        base_offset = items[0].offset if items and isinstance(items[0], Record) else 0
    builder = RecordBatchBuilder(
        compression,
        base_offset,
        timestamp_type,
        producer_id,
        producer_epoch,
        base_sequence,
        partition_leader_epoch,
        is_transactional,
        is_control,
        delete_horizon_ms=delete_horizon_ms,
    )
    for item in items:
        if isinstance(item, Record):
            builder.append_with_offset(
                item.offset, item.timestamp, item.key, item.value, item.headers
            )
        else:
            builder.append(*item)
    if last_offset is not None:
        builder.override_last_offset(last_offset)
    return builder.build()


def build_empty_batch(
    *,
    base_offset: int,
    last_offset: int,
    timestamp_type: TimestampType,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    is_transactional: bool,
    is_control: bool,
) -> bytes:
    """A batch with no records, only a header (Kafka's ``writeEmptyHeader``): what the cleaner
    keeps of a batch whose records all went but whose header must stay (a live producer's last
    batch: its sequence; the last batch a cleaning round reads: its last offset).
    Uncompressed, base timestamp -1, no delete horizon."""
    attributes = int(timestamp_type) << 3
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    batch = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        batch,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset - base_offset,
        NO_TIMESTAMP,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        0,
    )
    write_crc(batch, 0)
    return bytes(batch)
