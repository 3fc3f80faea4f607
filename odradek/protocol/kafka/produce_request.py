"""Produce requests read and their responses written by hand: the hot path of Kafka's protocol.

The same layout the schema codec reads (tests/test_kafka_codec.py checks that both agree on
every served version), without building a dict per field: a Produce of one batch costs a few
microseconds to read, and its records stay views into the request frame (no copy).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.protocol.kafka.byte_reader import ByteReader
from odradek.protocol.produce import ProducePartitionResponse

FIRST_FLEXIBLE_VERSION = 9


@dataclass(frozen=True)
class ProducePartition:
    """One partition's records: ``records`` is a view into the request (None when null)."""

    topic: str
    partition: int
    records: memoryview | None


@dataclass(frozen=True)
class KafkaProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    partitions: list[ProducePartition]


def read_produce_request(frame: memoryview, offset: int, version: int) -> KafkaProduceRequest:
    """The body of a Produce v3+ request starting at ``offset`` of ``frame``.

    Raises InvalidRequestError naming the field when the bytes do not hold one.
    """
    reader = ByteReader(frame, offset)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    transactional_id = reader.string(flexible, True, "transactional_id")
    acks = reader.int16("acks")
    timeout_ms = reader.int32("timeout_ms")
    partitions = []
    topic_count = reader.length(flexible, False, "topic_data")
    for _ in range(topic_count):
        topic = reader.string(flexible, False, "topic_data.name")
        partition_count = reader.length(flexible, False, "topic_data.partition_data", unit=5)
        for _ in range(partition_count):
            index = reader.int32("partition_data.index")
            records = reader.bytes_view(flexible, True, "partition_data.records")
            if flexible:
                reader.skip_tagged_fields("partition_data tagged fields")
            partitions.append(ProducePartition(topic, index, records))
        if flexible:
            reader.skip_tagged_fields("topic_data tagged fields")
    if flexible:
        reader.skip_tagged_fields("tagged fields")
    return KafkaProduceRequest(transactional_id, acks, timeout_ms, partitions)


_PARTITION = struct.Struct(">ihq")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


def write_produce_response(
    results: Sequence[ProducePartitionResponse], version: int, throttle_ms: int = 0
) -> bytes:
    """The body of a Produce v3+ response: partitions grouped by topic in request order,
    the throttle time (a quota's), no tagged fields. The results are the broker's own
    (odradek's protocol answers with the same values)."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    topics: list[tuple[str, list[ProducePartitionResponse]]] = []
    for result in results:
        if topics and topics[-1][0] == result.topic:
            topics[-1][1].append(result)
        else:
            topics.append((result.topic, [result]))
    out = bytearray()
    _write_length(out, len(topics), flexible)
    for topic, partitions in topics:
        _write_string(out, topic, flexible)
        _write_length(out, len(partitions), flexible)
        for p in partitions:
            out += _PARTITION.pack(p.partition, p.error, p.base_offset)
            out += _INT64.pack(p.log_append_time_ms)
            if version >= 5:
                out += _INT64.pack(p.log_start_offset)
            if version >= 8:
                _write_length(out, 0, flexible)  # record_errors
                _write_string(out, p.message, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _INT32.pack(throttle_ms)
    if flexible:
        out.append(0)
    return bytes(out)


def _write_length(out: bytearray, length: int, flexible: bool) -> None:
    if flexible:
        _write_unsigned_varint(out, length + 1)
    else:
        out += _INT32.pack(length)


def _write_string(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is None:
        if flexible:
            out.append(0)
        else:
            out += _INT16.pack(-1)
        return
    encoded = value.encode()
    if flexible:
        _write_unsigned_varint(out, len(encoded) + 1)
    else:
        out += _INT16.pack(len(encoded))
    out += encoded


def _write_unsigned_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
