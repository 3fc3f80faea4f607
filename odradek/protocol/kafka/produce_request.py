"""Produce requests read and their responses written by hand: the hot path of Kafka's protocol.

The same layout the schema codec reads (tests/test_kafka_codec.py checks that both agree on
every served version), without building a dict per field: a Produce of one batch costs a few
microseconds to read, its partitions are read straight into the ProducePartitionData the
broker's handlers take, and their records stay views into the request frame (no copy).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from odradek.protocol.kafka.api_versions import PRODUCE, request_flexibility
from odradek.protocol.kafka.byte_reader import ByteReader, UnusualShape, usual_size
from odradek.protocol.kafka.byte_writer import by_topic, encoded_name, write_length, write_string
from odradek.protocol.values.produce import (
    Acks,
    ProducePartitionData,
    ProducePartitionRefusal,
    ProducePartitionResponse,
)

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
    with_log_start = version >= 5
    with_errors = version >= 8
    topics = by_topic(results)
    write_length(out, len(topics), flexible)
    for topic, partitions in topics:
        out += encoded_name(topic, flexible)
        write_length(out, len(partitions), flexible)
        for p in partitions:
            if with_log_start:
                out += _PARTITION_V5.pack(
                    p.partition, p.error, p.base_offset, p.log_append_time_ms, p.log_start_offset
                )
            else:
                out += _PARTITION.pack(p.partition, p.error, p.base_offset, p.log_append_time_ms)
            if with_errors:  # record_errors, error_message
                if p.message is None:
                    out += b"\x01\x00" if flexible else b"\x00\x00\x00\x00\xff\xff"
                else:
                    _write_record_errors(out, p, flexible)
                    write_string(out, p.message, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _INT32.pack(throttle_ms)
    if flexible:
        out.append(0)


def _write_record_errors(out: bytearray, p: ProducePartitionResponse, flexible: bool) -> None:
    """The records a refusal names (batch_index, batch_index_error_message), none for others."""
    record_errors = p.record_errors if isinstance(p, ProducePartitionRefusal) else ()
    write_length(out, len(record_errors), flexible)
    for record_error in record_errors:
        out += _INT32.pack(record_error.batch_index)
        write_string(out, record_error.message, flexible)
        if flexible:
            out.append(0)


# --- a one-partition produce answered at once ------------------------------------------------

_START = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_FIXED = struct.Struct(">hhiih")  # null transactional id, acks, timeout, 1 topic, name length
_FIXED_FLEXIBLE = struct.Struct(">BhiBB")  # and the same in compact form
_PARTITION_START = struct.Struct(">ii")  # 1 partition, its index
_PARTITION_START_FLEXIBLE = struct.Struct(">Bi")  # 1 partition, its index


def read_immediate_produce(
    frame: memoryview,
) -> tuple[int, int, str, int, memoryview, Acks, int] | None:
    """``(api_version, correlation_id, topic, partition, records, acks, timeout_ms)`` of a
    whole Produce v3+ request frame (without its size prefix) of the usual shape, to one
    partition (acks 0, 1 or all): a header with a client id and no tagged fields, no
    transactional id, one topic, one partition with records, no tagged fields, nothing after
    them. None for any other
    request, which ``read_produce_request`` reads on the general path (these are the values
    it reads from such a frame: tests hold the two to each other).

    What comes before the records (client id, acks, timeout, topic, partition) is read the
    first time its bytes come, then by its bytes: a producer sends the same again and again.
    The ones kept are bounded in size and number."""
    try:
        # Read from a copy of the frame (or of its head, past which a large one's records
        # go on): a bytes copy of a small frame costs less than the view slices and the
        # view indexing it saves.
        size = len(frame)
        whole = size <= IMMEDIATE_COPY_MAX_BYTES
        data = frame.tobytes() if whole else frame[: IMMEDIATE_MAX_HEAD_BYTES + 5].tobytes()
        api_key, version, correlation_id = _START.unpack_from(data)
        if api_key:
            return None
        last = _last_head
        if version == last[0] and data.startswith(last[1], 8):
            # The head of the last one read: where the records start depends on its bytes
            # alone, so it is the same as well.
            _, _, start, topic, partition, acks, timeout_ms = last
        else:
            if version < 3:
                return None
            position = 10 + (data[8] << 8 | data[9])  # after the client id
            if version >= FIRST_FLEXIBLE_VERSION:
                # header tags, null id, acks, timeout, topic count, name, partition count, index
                start = position + 1 + _FIXED_FLEXIBLE.size + data[position + 9] - 1 + 5
            else:
                # null id, acks, timeout, topic count, name, partition count, index
                start = position + _FIXED.size + (data[position + 12] << 8 | data[position + 13])
                start += 8
            if start > IMMEDIATE_MAX_HEAD_BYTES:
                return None
            head_bytes = data[8:start]
            key = (version, head_bytes)
            try:
                head = _immediate_heads[key]
            except KeyError:
                head = _read_immediate_head(frame, version, start)
                if len(_immediate_heads) >= 1024:
                    _immediate_heads.clear()
                _immediate_heads[key] = head
            if head is None:
                return None
            topic, partition, acks, timeout_ms = head
            _remember(version, head_bytes, start, head)
        if version >= FIRST_FLEXIBLE_VERSION:
            byte = data[start]  # the records' compact length: an unsigned varint, plus 1
            if byte < 0x80:
                length = byte - 1
                start += 1
            else:
                length = shift = 0
                while True:
                    byte = data[start]
                    start += 1
                    length |= (byte & 0x7F) << shift
                    if byte < 0x80:
                        break
                    shift += 7
                    if shift > 28:
                        return None
                length -= 1
            end = start + length
            if length < 0 or end + 3 != size:
                return None  # null records; more after them
            if not (data if whole else frame[end:].tobytes()).endswith(b"\0\0\0"):
                return None  # tagged fields (partition, topic, request), the frame's last bytes
        else:
            length = _INT32.unpack_from(data, start)[0]
            start += 4
            end = start + length
            if length < 0 or end != size:
                return None
    except (struct.error, IndexError):
        return None
    return version, correlation_id, topic, partition, frame[start:end], acks, timeout_ms


IMMEDIATE_COPY_MAX_BYTES = 4096
"""Produce frames up to this size are copied whole to be read (a few tens of nanoseconds);
larger ones have their head copied."""
IMMEDIATE_MAX_HEAD_BYTES = 512


def _read_immediate_head(
    frame: memoryview, version: int, start: int
) -> tuple[str, int, Acks, int] | None:
    """``(topic, partition, acks, timeout_ms)`` of the usual head of a Produce of one
    partition, ending at ``start``, where the records' length begins; None for anything else."""
    if request_flexibility(PRODUCE, version) is None:
        return None  # a version not served: refused on the general path
    try:
        size = frame[8] << 8 | frame[9]  # the client id: a string, not null
        position = 10 + size
        if size > 0x7FFF:
            return None
        str(frame[10:position], "utf-8")  # (checked as the general path reads it)
        if version >= FIRST_FLEXIBLE_VERSION:
            if frame[position]:
                return None  # the header's tagged fields
            null_id, acks, timeout_ms, topics, size = _FIXED_FLEXIBLE.unpack_from(
                frame, position + 1
            )
            if null_id or topics != 2 or not 0 < size < 0x80:
                return None
            position += 1 + _FIXED_FLEXIBLE.size
            end = position + size - 1
            topic = str(frame[position:end], "utf-8")
            partitions, partition = _PARTITION_START_FLEXIBLE.unpack_from(frame, end)
            if partitions != 2 or end + _PARTITION_START_FLEXIBLE.size != start:
                return None
        else:
            null_id, acks, timeout_ms, topics, size = _FIXED.unpack_from(frame, position)
            if null_id != -1 or topics != 1 or size < 0:
                return None
            position += _FIXED.size
            end = position + size
            topic = str(frame[position:end], "utf-8")
            partitions, partition = _PARTITION_START.unpack_from(frame, end)
            if partitions != 1 or end + _PARTITION_START.size != start:
                return None
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    if acks != 1 and acks != 0 and acks != -1:
        return None
    # (the general path's member, kept with the head)
    return topic, partition, Acks(acks), timeout_ms


_immediate_heads: dict[tuple[int, bytes], tuple[str, int, Acks, int] | None] = {}
"""The heads of Produce frames read lately, by version and bytes (correlation id excluded)."""

_last_head: tuple[int, bytes, int, str, int, Acks, int] = (-1, b"", 0, "", 0, Acks.NONE, 0)
"""The version, bytes (correlation id excluded) and end of the last good head read, with what
it says: a producer sends the same head again and again, found by one comparison."""


def _remember(
    version: int, head_bytes: bytes, start: int, head: tuple[str, int, Acks, int]
) -> None:
    global _last_head
    _last_head = (version, head_bytes, start, *head)


def write_appended(
    version: int,
    correlation_id: int,
    topic: str,
    partition: int,
    base_offset: int,
    log_append_time_ms: int,
    log_start_offset: int,
) -> bytes:
    """The whole response frame (size prefix included) to a Produce v3+ of one partition
    appended at ``base_offset``: what ``write_produce_response`` writes for that one result,
    behind its response header, in one step with the pieces that never vary kept."""
    key = (version, topic, partition)
    try:
        layout, frame_size, before, after = _appended_layouts[key]
    except KeyError:
        layout, frame_size, before, after = _appended_layout(*key)
    if version >= 5:
        return layout.pack(
            frame_size,
            correlation_id,
            before,
            base_offset,
            log_append_time_ms,
            log_start_offset,
            after,
        )
    return layout.pack(frame_size, correlation_id, before, base_offset, log_append_time_ms, after)


def _appended_layout(
    version: int, topic: str, partition: int
) -> tuple[struct.Struct, int, bytes, bytes]:
    """The layout of ``write_appended``'s frames for one version and partition, and the bytes
    around its offsets: what ``write_produce_response`` writes there. Kept for the partitions
    a broker serves (bounded: a client may name any number of them)."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    result = ProducePartitionResponse(topic, partition, 0, None, 0, 0, 0)
    out = bytearray(b"\x00" if flexible else b"")  # (the response header's tagged fields)
    offsets = 3 if version >= 5 else 2
    write_produce_response(out, (result,), version)
    after_at = _offsets_end(out, version, flexible)
    before = bytes(out[: after_at - 8 * offsets])
    after = bytes(out[after_at:])
    layout = struct.Struct(f">ii{len(before)}s{'q' * offsets}{len(after)}s")
    entry = (layout, layout.size - 4, before, after)
    if len(_appended_layouts) >= 1024:
        _appended_layouts.clear()
    _appended_layouts[version, topic, partition] = entry
    return entry


def _offsets_end(out: bytearray, version: int, flexible: bool) -> int:
    """Where a one-result response body written by ``write_produce_response`` (behind
    ``flexible``'s header byte) has its partition's offsets end."""
    end = len(out) - 4  # the throttle time
    if flexible:
        end -= 1 + 1 + 1  # the request's, the topic's and the partition's tagged fields
    if version >= 8:
        end -= 2 if flexible else 6  # record_errors (none), error_message (null)
    return end


_appended_layouts: dict[tuple[int, str, int], tuple[struct.Struct, int, bytes, bytes]] = {}
