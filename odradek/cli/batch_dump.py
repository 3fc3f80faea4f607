"""The ``.log`` half of ``dump-log``: each batch's header, optionally its records, and what is
corrupt (design §3).

The file is memory-mapped read-only, so batches are views at their true file positions and
every problem names the byte it is at. A CRC mismatch does not stop the dump (the batch's
length still frames the next one); an impossible length, a bad magic or a truncated tail does.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.cli.dump_output import DumpPrinter, Fields
from odradek.cli.offsets_decoder import decode_offsets_record
from odradek.errors import CorruptRecordError, UnsupportedCompressionTypeError
from odradek.record.compression import CompressionType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import Record
from odradek.record.record_batch import HEADER_SIZE, RecordBatch, TimestampType
from odradek.storage.batch_metadata import increase_sequence

_TIMESTAMP_TYPE_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


@contextmanager
def map_read_only(path: Path) -> Iterator[bytes | mmap.mmap]:
    """The file's bytes mapped read-only (``b""`` for an empty file, which cannot be mapped)."""
    with open(path, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            yield b""
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            yield mapped


def dump_log_file(
    path: Path, printer: DumpPrinter, with_records: bool, offsets_decoder: bool = False
) -> list[str]:
    """Print every batch of the ``.log`` at ``path`` and a summary; return what is corrupt.

    ``validBytes`` in the summary is where the first bad batch starts (the end of the file
    when there is none): what a broker recovering the segment would keep.
    """
    with map_read_only(path) as buffer:
        problems: list[str] = []
        batches = records = valid_bytes = end = 0
        try:
            for batch in MemoryRecords(buffer).batches():
                problems += _dump_batch(batch, printer, with_records, offsets_decoder)
                batches += 1
                records += batch.records_count
                end = batch.position + batch.size_in_bytes
                if not problems:
                    valid_bytes = end
        except CorruptRecordError as error:
            problems.append(error.message)
        else:
            if end < len(buffer):
                problems.append(_truncation(buffer, end))
        printer.summary(
            {
                "batches": batches,
                "records": records,
                "validBytes": valid_bytes,
                "fileSize": len(buffer),
            }
        )
    return problems


def describe_batch(
    batch: RecordBatch, codec: CompressionType | None, computed_crc: int
) -> dict[str, object]:
    """The header fields of ``batch``, with Kafka's delete horizon when its cleaner set one and
    the CRC it should have when it has another."""
    fields: dict[str, object] = {
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "count": batch.records_count,
        "position": batch.position,
        "size": batch.size_in_bytes,
        "compression": codec.label if codec is not None else "unknown",
        "timestampType": _TIMESTAMP_TYPE_NAMES[batch.timestamp_type],
        "baseTimestamp": batch.base_timestamp,
        "maxTimestamp": batch.max_timestamp,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": _last_sequence(batch),
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "crcValid": computed_crc == batch.crc,
        "crc": batch.crc,
    }
    if batch.delete_horizon_ms is not None:  # then baseTimestamp is that horizon
        fields["deleteHorizonMs"] = batch.delete_horizon_ms
    if computed_crc != batch.crc:
        fields["computedCrc"] = computed_crc
    return fields


def describe_record(record: Record, offsets_decoder: bool = False) -> dict[str, object]:
    """A record's offset, timestamp, key, value and headers (bytes: the printer shows them;
    with ``offsets_decoder``, key and value decoded as ``__consumer_offsets`` records)."""
    key, value = decode_offsets_record(record) if offsets_decoder else (record.key, record.value)
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": key,
        "value": value,
        "headers": tuple(record.headers),
    }


def _dump_batch(
    batch: RecordBatch, printer: DumpPrinter, with_records: bool, offsets_decoder: bool
) -> list[str]:
    """Print one batch (and its records); return what is wrong with it."""
    problems: list[str] = []
    try:
        codec: CompressionType | None = batch.compression_type
    except UnsupportedCompressionTypeError as error:
        codec = None
        problems.append(error.message)
    computed_crc = batch.compute_crc()
    if computed_crc != batch.crc:
        problems.append(
            f"batch at offset {batch.base_offset} (byte {batch.position}): CRC mismatch: "
            f"stored {batch.crc:#010x}, computed {computed_crc:#010x}"
        )
    records = None
    if with_records and codec is not None:
        records, record_problem = _describe_records(batch, offsets_decoder)
        problems += record_problem
    printer.batch(describe_batch(batch, codec, computed_crc), records)
    return problems


def _describe_records(
    batch: RecordBatch, offsets_decoder: bool
) -> tuple[list[Fields], list[str]]:
    """The batch's records up to a corrupt one, and why it is corrupt if one is."""
    described: list[Fields] = []
    try:
        for record in batch.records():
            described.append(describe_record(record, offsets_decoder))
    except CorruptRecordError as error:
        return described, [error.message]
    return described, []


def _truncation(buffer: bytes | mmap.mmap, end: int) -> str:
    """What the bytes after the last whole batch are: the start of a batch cut short."""
    remaining = len(buffer) - end
    if remaining < HEADER_SIZE:
        return f"truncated: {remaining} bytes at byte {end} are less than a batch header"
    declared = RecordBatch(buffer, end).size_in_bytes
    return f"truncated batch at byte {end}: it declares {declared} bytes, only {remaining} remain"


def _last_sequence(batch: RecordBatch) -> int:
    """The batch's last sequence (wrapping after 2^31 - 1); -1 without a producer."""
    if batch.base_sequence < 0:
        return -1
    return increase_sequence(batch.base_sequence, batch.last_offset_delta)
