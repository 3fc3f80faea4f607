"""Produce requests read and their responses written by hand: the hot path of Kafka's protocol.

The same layout the schema codec reads (tests/test_kafka_codec.py checks that both agree on
every served version), without building a dict per field: a Produce of one batch costs a few
microseconds to read, its partitions are read straight into the ProducePartitionData the
broker's handlers take, and their records stay views into the request frame (no copy).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from odradek.protocol.kafka.byte_reader import ByteReader, UnusualShape, usual_size
from odradek.protocol.kafka.message_codec import write_unsigned_varint
from odradek.protocol.produce import ProducePartitionData, ProducePartitionResponse

FIRST_FLEXIBLE_VERSION = 9
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


class KafkaProduceRequest(NamedTuple):
    """A Produce request's fields as on the wire; each partition's ``records`` is a view into
    the request (empty when null: the broker reads both alike)."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    partitions: tuple[ProducePartitionData, ...]


def read_produce_request(frame: memoryview, offset: int, version: int) -> KafkaProduceRequest:
    """The body of a Produce v3+ request starting at ``offset`` of ``frame``.

    Raises InvalidRequestError naming the field when the bytes do not hold one.
    """
    try:
        return _read_usual(frame, offset, version)
    except (UnusualShape, struct.error, IndexError, UnicodeDecodeError):
        return _read_checked(frame, offset, version)


_ACKS_AND_TIMEOUT = struct.Struct(">hi")


def _read_usual(data: memoryview, position: int, version: int) -> KafkaProduceRequest:
    """The usual request read in few steps: no transactional id, one-byte compact array and
    name lengths, no tagged fields. Anything else (including a field cut short, which
    ``unpack_from`` or indexing raises for) is left to the checked reader."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    if flexible:
        if data[position]:
            raise UnusualShape  # a transactional id
        position += 1
    else:
        if _INT16.unpack_from(data, position)[0] != -1:
            raise UnusualShape
        position += 2
    acks, timeout_ms = _ACKS_AND_TIMEOUT.unpack_from(data, position)
    position += _ACKS_AND_TIMEOUT.size
    partitions = []
    topic_count, position = usual_size(data, position, flexible)
    for _ in range(topic_count):
        size, position = usual_size(data, position, flexible, _INT16)
        end = position + size
        if end > len(data):
            raise UnusualShape
        topic = str(data[position:end], "utf-8")
        partition_count, position = usual_size(data, end, flexible)
        for _ in range(partition_count):
            index = _INT32.unpack_from(data, position)[0]
            position += 4
            if flexible:  # a compact nullable length: one or two bytes for a small batch
                byte = data[position]
                if byte < 0x80:
                    size = byte - 1
                    position += 1
                elif data[position + 1] < 0x80:
                    size = (byte & 0x7F | data[position + 1] << 7) - 1
                    position += 2
                else:
                    size, position = _records_size(data, position)
            else:
                size = _INT32.unpack_from(data, position)[0]
                position += 4
            if size < 0:
                if size != -1:
                    raise UnusualShape
                records = _NULL_RECORDS
            else:
                end = position + size
                if end > len(data):
                    raise UnusualShape
                records = data[position:end]
                position = end
            if flexible:
                if data[position]:
                    raise UnusualShape  # tagged fields
                position += 1
            partitions.append(ProducePartitionData(topic, index, records))
        if flexible:
            if data[position]:
                raise UnusualShape
            position += 1
    if flexible and data[position]:
        raise UnusualShape
    return KafkaProduceRequest(None, acks, timeout_ms, tuple(partitions))


_NULL_RECORDS = memoryview(b"")


def _records_size(data: memoryview, position: int) -> tuple[int, int]:
    """A compact nullable length (-1 for null): an unsigned varint of up to 5 bytes, minus 1."""
    value = shift = 0
    for _ in range(5):
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value - 1, position
        shift += 7
    raise UnusualShape


def _read_checked(frame: memoryview, offset: int, version: int) -> KafkaProduceRequest:
    """Any request, every length checked before it is used; InvalidRequestError naming the
    field when the bytes do not hold one."""
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
            if records is None:
                records = _NULL_RECORDS
            partitions.append(ProducePartitionData(topic, index, records))
        if flexible:
            reader.skip_tagged_fields("topic_data tagged fields")
    if flexible:
        reader.skip_tagged_fields("tagged fields")
    return KafkaProduceRequest(transactional_id, acks, timeout_ms, tuple(partitions))


_PARTITION = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # and the log start offset


def write_produce_response(
    out: bytearray,
    results: Sequence[ProducePartitionResponse],
    version: int,
    throttle_ms: int = 0,
) -> None:
    """The body of a Produce v3+ response, written to ``out``: partitions grouped by topic in
    request order, the throttle time (a quota's), no tagged fields. The results are the
    broker's own (odradek's protocol answers with the same values)."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    if len(results) == 1:  # the usual: one partition
        topics: Sequence[tuple[str, Sequence[ProducePartitionResponse]]] = (
            (results[0].topic, results),
        )
    else:
        topics = _by_topic(results)
    with_log_start = version >= 5
    with_errors = version >= 8
    count = len(topics)
    if flexible and count < 0x7F:
        out.append(count + 1)
    else:
        _write_length(out, count, flexible)
    for topic, partitions in topics:
        out += _encoded_name(topic, flexible)
        count = len(partitions)
        if flexible and count < 0x7F:
            out.append(count + 1)
        else:
            _write_length(out, count, flexible)
        for p in partitions:
            if with_log_start:
                out += _PARTITION_V5.pack(
                    p.partition, p.error, p.base_offset, p.log_append_time_ms, p.log_start_offset
                )
            else:
                out += _PARTITION.pack(p.partition, p.error, p.base_offset, p.log_append_time_ms)
            if with_errors:  # record_errors (none), error_message
                if p.message is None:
                    out += b"\x01\x00" if flexible else b"\x00\x00\x00\x00\xff\xff"
                else:
                    _write_length(out, 0, flexible)
                    _write_string(out, p.message, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _INT32.pack(throttle_ms)
    if flexible:
        out.append(0)


def _by_topic(
    results: Sequence[ProducePartitionResponse],
) -> list[tuple[str, Sequence[ProducePartitionResponse]]]:
    """The results grouped by topic, in request order."""
    topics: list[tuple[str, list[ProducePartitionResponse]]] = []
    for result in results:
        if topics and topics[-1][0] == result.topic:
            topics[-1][1].append(result)
        else:
            topics.append((result.topic, [result]))
    return topics


@lru_cache(maxsize=1024)
def _encoded_name(name: str, flexible: bool) -> bytes:
    """A topic name as a (compact) string: encoded once for the topics a broker serves (the
    cache is bounded: a client may name any number of topics)."""
    out = bytearray()
    _write_string(out, name, flexible)
    return bytes(out)


def _write_length(out: bytearray, length: int, flexible: bool) -> None:
    if flexible:
        if length < 0x7F:
            out.append(length + 1)
        else:
            write_unsigned_varint(out, length + 1)
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
        write_unsigned_varint(out, len(encoded) + 1)
    else:
        out += _INT16.pack(len(encoded))
    out += encoded
