"""The offset map's bulk operations over a buffer of batches, in Python.

The cleaner hands the offset map whole chunks of a segment: "map the keys of these batches",
"which of these batches stay". The C map (``_offset_map.c``) does that without returning to
Python for each batch or record; :class:`SkimpyOffsetMap` does it with these functions, which
are the reference the C code is tested against (tests/test_offset_map_native.py), so the two
must agree on every input, corrupt ones included. Both stop at the first batch they cannot
finish alone and leave it to the caller (:mod:`odradek.cleaner.cleaner`).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from odradek.cleaner.batch_keys import Buffer, read_keys
from odradek.errors import CorruptRecordError
from odradek.record.record_batch import (
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    RECORDS_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
    crc_of,
)

# Why a bulk operation stopped; _offset_map.c uses the same numbers.
END = 0  # no whole batch left in the buffer (for one batch's records: all mapped)
BAD_LENGTH = 1  # a batch length shorter than a header: the segment ends here
OTHER = 2  # a batch the caller handles itself (compressed, wrong magic, transactional or
# control, bad CRC, corrupt, partly kept)
FULL = 3  # the map has no room for one more key
CORRUPT = 4  # records that do not frame

_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_TRANSACTION_FLAGS = TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK


class KeyMap(Protocol):
    """What the bulk operations need of a map."""

    latest_offset: int

    @property
    def is_full(self) -> bool: ...

    def put(self, key: bytes, offset: int) -> None: ...

    def get(self, key: bytes) -> int: ...


class MapProgress(NamedTuple):
    """Where :func:`map_batches` stopped, why, and the records and bytes it read."""

    position: int
    status: int
    records: int
    bytes: int


class FilterProgress(NamedTuple):
    """Where :func:`filter_batches` stopped and why; ``kept_spans`` are ``(start, end)`` runs of
    whole batches to copy as they are; then its counts, and the last offset of the last batch
    kept (-1 if none)."""

    position: int
    status: int
    kept_spans: list[tuple[int, int]]
    records_read: int
    bytes_read: int
    records_kept: int
    bytes_kept: int
    keyless: int
    last_kept_offset: int


class _Header(NamedTuple):
    base_offset: int
    last_offset: int
    size: int
    count: int
    magic: int
    codec: int
    crc: int
    delete_horizon_ms: int | None
    in_transaction: bool
    """Transactional or control: the caller follows the transactions
    (cleaned_transaction_metadata.py)."""


def _header(data: Buffer, position: int, end: int) -> _Header | int:
    """The header of the whole batch at ``position``, or END / BAD_LENGTH."""
    if end - position < HEADER_SIZE:
        return END
    (base, length, _, magic, crc, attributes, last_delta, base_timestamp, _, _, _, _, count) = (
        HEADER_STRUCT.unpack_from(data, position)
    )
    if length < _MIN_BATCH_LENGTH:
        return BAD_LENGTH
    size = length + LOG_OVERHEAD
    if size > end - position:
        return END
    last = (base + last_delta + 2**63) % 2**64 - 2**63  # int64 arithmetic, as in C
    horizon = base_timestamp if attributes & DELETE_HORIZON_FLAG_MASK else None
    in_transaction = bool(attributes & _TRANSACTION_FLAGS)
    return _Header(base, last, size, count, magic, attributes & 0x07, crc, horizon, in_transaction)


def retains_deletes(delete_horizon_ms: int | None, current_time_ms: int) -> bool:
    """Whether a cleaning at ``current_time_ms`` keeps the tombstones of a batch with this
    delete horizon (Kafka's ``shouldRetainRecord``): until the horizon, which the first cleaning
    that keeps them gives the batch; always in a batch without one."""
    return delete_horizon_ms is None or current_time_ms < delete_horizon_ms


def map_records(
    offset_map: KeyMap,
    data: Buffer,
    position: int,
    end: int,
    count: int,
    base_offset: int,
    start_offset: int,
) -> int:
    """Map the keyed records of one batch's records section with offsets from
    ``start_offset`` on: END when all are mapped, FULL, or CORRUPT."""
    try:
        offsets, keys, _ = read_keys(data, position, end, count, base_offset)
    except CorruptRecordError:
        return CORRUPT
    for offset, key in zip(offsets, keys, strict=True):
        if key is not None and offset >= start_offset:
            if offset_map.is_full:
                return FULL
            offset_map.put(key, offset)
    return END


def retain_records(
    offset_map: KeyMap,
    data: Buffer,
    position: int,
    end: int,
    count: int,
    base_offset: int,
    retain_deletes: bool,
) -> tuple[bytes, int] | None:
    """``(mask, keyless)`` for one batch's records section: ``mask[i]`` is 1 when record ``i``
    stays (Kafka's ``shouldRetainRecord``); None when the records do not frame."""
    try:
        offsets, keys, tombstones = read_keys(data, position, end, count, base_offset)
    except CorruptRecordError:
        return None
    latest = offset_map.latest_offset
    mask = bytearray(count)
    keyless = 0
    for index, (offset, key, tombstone) in enumerate(zip(offsets, keys, tombstones, strict=True)):
        if offset > latest:
            mask[index] = 1
        elif key is None:
            keyless += 1
        elif offset >= offset_map.get(key) and (retain_deletes or not tombstone):
            mask[index] = 1
    return bytes(mask), keyless


def _keeps_tombstone(data: Buffer, position: int, end: int, header: _Header, mask: bytes) -> bool:
    """Whether a record ``mask`` keeps in the batch's records section is a tombstone."""
    if not any(mask):
        return False
    _, _, tombstones = read_keys(data, position, end, header.count, header.base_offset)
    return any(keep and tombstone for keep, tombstone in zip(mask, tombstones, strict=True))


def map_batches(
    offset_map: KeyMap, data: Buffer, position: int, end: int, start_offset: int
) -> MapProgress:
    """Map the keyed records (from ``start_offset`` on) of the whole batches in
    ``data[position:end]``, moving ``latest_offset`` past each batch mapped; stop at the first
    compressed, transactional or control batch or one whose CRC does not match or whose
    records do not frame (OTHER), or when the map fills (FULL, counting that batch as read)."""
    records = size = 0
    while True:
        header = _header(data, position, end)
        if isinstance(header, int):
            return MapProgress(position, header, records, size)
        if header.codec or header.in_transaction:
            return MapProgress(position, OTHER, records, size)
        if header.last_offset >= start_offset:
            if crc_of(data, position, header.size) != header.crc:
                return MapProgress(position, OTHER, records, size)  # the caller names the fault
            status = map_records(
                offset_map,
                data,
                position + RECORDS_OFFSET,
                position + header.size,
                header.count,
                header.base_offset,
                start_offset,
            )
            if status == CORRUPT:
                return MapProgress(position, OTHER, records, size)
            if status == FULL:
                return MapProgress(position, FULL, records + header.count, size + header.size)
            offset_map.latest_offset = header.last_offset
        records += header.count
        size += header.size
        position += header.size


def filter_batches(
    offset_map: KeyMap, data: Buffer, position: int, end: int, current_time_ms: int
) -> FilterProgress:
    """Decide the whole batches of ``data[position:end]`` that keep all of their records or
    none, a batch's tombstones kept until its delete horizon is at or before
    ``current_time_ms`` (:func:`retains_deletes`); stop (OTHER) at the first that is
    compressed, not magic 2, transactional or control, has a CRC that does not match, does not
    frame, keeps some records but not all, or keeps a tombstone and has no delete horizon yet
    (the caller rewrites it with one)."""
    spans: list[tuple[int, int]] = []
    records = size = records_kept = bytes_kept = keyless_total = 0
    last_kept = -1
    span_start = -1
    while True:
        header = _header(data, position, end)
        if isinstance(header, int):
            status = header
            break
        if header.codec or header.magic != MAGIC or header.in_transaction:
            status = OTHER
            break
        if crc_of(data, position, header.size) != header.crc:
            status = OTHER  # the caller names the fault
            break
        if header.base_offset > offset_map.latest_offset and header.delete_horizon_ms is not None:
            keep_all, kept, keyless = True, header.count, 0
        else:
            retained = retain_records(
                offset_map,
                data,
                position + RECORDS_OFFSET,
                position + header.size,
                header.count,
                header.base_offset,
                retains_deletes(header.delete_horizon_ms, current_time_ms),
            )
            if retained is None:
                status = OTHER
                break
            mask, keyless = retained
            kept = sum(mask)
            if kept not in (0, header.count):
                status = OTHER
                break
            if header.delete_horizon_ms is None and _keeps_tombstone(
                data, position + RECORDS_OFFSET, position + header.size, header, mask
            ):
                status = OTHER
                break
            keep_all = kept > 0
        if keep_all:
            if span_start < 0:
                span_start = position
            records_kept += kept
            bytes_kept += header.size
            last_kept = header.last_offset
        elif span_start >= 0:
            spans.append((span_start, position))
            span_start = -1
        keyless_total += keyless
        records += header.count
        size += header.size
        position += header.size
    if span_start >= 0:
        spans.append((span_start, position))
    return FilterProgress(
        position,
        status,
        spans,
        records,
        size,
        records_kept,
        bytes_kept,
        keyless_total,
        last_kept,
    )
