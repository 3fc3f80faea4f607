"""Fetch requests read and their responses written by hand: the hot path of Kafka's protocol.

The same layout the schema codec reads and writes for Fetch v4-v12 (tests/test_kafka_codec.py
checks that both agree on every served version, on valid and on hostile bytes), without a dict
per field: a consumer's fetch that finds nothing new is most of a broker's requests, and
reading and writing it through the schema cost about half of its CPU. A request is read
straight into the fields and FetchPartitions the broker's handlers take (no second object
tree); fields the broker does not act on (leader epochs, forgotten topics, rack id, cluster id)
are checked like the schema codec checks them and dropped; the replica id is kept for
authorization (a follower's fetch needs ClusterAction).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import NamedTuple

from odradek.errors import InvalidRequestError
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.kafka.api_versions import FETCH, request_flexibility
from odradek.protocol.kafka.byte_reader import ByteReader, UnusualShape, usual_size
from odradek.protocol.kafka.byte_writer import by_topic, encoded_name, write_length
from odradek.protocol.kafka.message_codec import PartsWriter
from odradek.protocol.kafka.request_header import read_client_id
from odradek.protocol.values.fetch import FetchPartition, FetchPartitionResponse

FIRST_FLEXIBLE_VERSION = 12
CLUSTER_ID_TAG = 0
READ_COMMITTED = 1
"""Kafka's isolation_level for read_committed (0: read_uncommitted)."""
_TXN_COMMITTED = IsolationLevel.TXN_COMMITTED
_HIGH_WATERMARK = IsolationLevel.HIGH_WATERMARK


class KafkaFetchRequest(NamedTuple):
    """What the broker acts on in a Fetch request: what its handlers read (a negative wait,
    size or partition size read as 0: a client's nonsense asks for nothing; ``isolation``,
    how far the read may see), and what only Kafka's protocol has (its isolation level, as
    on the wire, the fetch session, and who fetches: -1 a consumer, a broker id a
    follower)."""

    partitions: tuple[FetchPartition, ...]
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: IsolationLevel
    isolation_level: int
    session_id: int
    session_epoch: int
    replica_id: int = -1


def _fetch_request(
    replica_id: int,
    max_wait: int,
    min_bytes: int,
    max_bytes: int,
    isolation_level: int,
    session_id: int,
    session_epoch: int,
    partitions: list[FetchPartition],
) -> KafkaFetchRequest:
    """The request the data path takes: negative wait and sizes read as 0, as Kafka does."""
    return KafkaFetchRequest(
        tuple(partitions),
        max_wait if max_wait > 0 else 0,
        min_bytes if min_bytes > 0 else 0,
        max_bytes if max_bytes > 0 else 0,
        _TXN_COMMITTED if isolation_level == READ_COMMITTED else _HIGH_WATERMARK,
        isolation_level,
        session_id,
        session_epoch,
        replica_id,
    )


_FIXED_V4 = struct.Struct(">iiiib")  # replica_id, max_wait, min_bytes, max_bytes, isolation
_SESSION = struct.Struct(">ii")


REPEATED_MAX_BODY_BYTES = 512
REPEATED_MAX_ENTRIES = 1024


def read_fetch_request(frame: memoryview, offset: int, version: int) -> KafkaFetchRequest:
    """The body of a Fetch v4-v12 request starting at ``offset`` of ``frame``.

    Raises InvalidRequestError naming the field when the bytes do not hold one. Bytes after
    the body are ignored, as the schema codec and Kafka's brokers do.

    A consumer that finds nothing new sends the same body again and again (only the header's
    correlation id changes): a small body read before is answered with the request read then,
    a value. The bodies kept are bounded in size and number.
    """
    if len(frame) - offset > REPEATED_MAX_BODY_BYTES:
        return _read(frame, offset, version)
    key = (version, bytes(frame[offset:]))
    request = _repeated.get(key)
    if request is None:
        request = _read(frame, offset, version)
        if len(_repeated) >= REPEATED_MAX_ENTRIES:
            _repeated.clear()
        _repeated[key] = request
    return request


_repeated: dict[tuple[int, bytes], KafkaFetchRequest] = {}
"""Small bodies read lately, by version and bytes."""


def _read(frame: memoryview, offset: int, version: int) -> KafkaFetchRequest:
    try:
        return _read_usual(frame, offset, version)
    except (UnusualShape, struct.error, IndexError, UnicodeDecodeError):
        return _read_checked(frame, offset, version)


def _read_usual(data: memoryview, position: int, version: int) -> KafkaFetchRequest:
    """The usual request read in few steps: one-byte lengths when compact, no tagged fields,
    no forgotten topics. Anything else (including a field cut short, which ``unpack_from``
    or indexing raises for) is left to the checked reader."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    replica_id, max_wait, min_bytes, max_bytes, isolation_level = _FIXED_V4.unpack_from(
        data, position
    )
    position += _FIXED_V4.size
    session_id, session_epoch = 0, -1
    if version >= 7:
        session_id, session_epoch = _SESSION.unpack_from(data, position)
        position += _SESSION.size
    layout, index_at, offset_at, max_bytes_at = _partition_layout(version)
    layout_size = layout.size
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
            values = layout.unpack_from(data, position)
            position += layout_size
            if flexible:
                if data[position]:
                    raise UnusualShape  # tagged fields
                position += 1
            partition_max_bytes = values[max_bytes_at]
            partitions.append(
                FetchPartition(
                    topic,
                    values[index_at],
                    values[offset_at],
                    partition_max_bytes if partition_max_bytes > 0 else 0,
                )
            )
        if flexible:
            if data[position]:
                raise UnusualShape
            position += 1
    if flexible:  # no forgotten topics, a rack id, no tagged fields
        if data[position] != 1:
            raise UnusualShape
        size = data[position + 1]
        if size == 0 or size > 0x7F:
            raise UnusualShape
        end = position + 1 + size
        if end > len(data):
            raise UnusualShape
        if size > 1:
            str(data[position + 2 : end], "utf-8")  # (checked as the schema codec does)
        if data[end]:
            raise UnusualShape
    else:
        if version >= 7:
            forgotten_count, position = usual_size(data, position, flexible)
            if forgotten_count:
                raise UnusualShape
        if version >= 11:
            size, position = usual_size(data, position, flexible, _INT16)
            end = position + size
            if end > len(data):
                raise UnusualShape
            if size:
                str(data[position:end], "utf-8")  # (checked as the schema codec does)
    return _fetch_request(
        replica_id,
        max_wait,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        partitions,
    )


def _read_checked(frame: memoryview, offset: int, version: int) -> KafkaFetchRequest:
    """Any request, every length checked before it is used; InvalidRequestError naming the
    field when the bytes do not hold one."""
    reader = ByteReader(frame, offset)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    start = reader.position
    reader.skip(_FIXED_V4.size, "fetch request fixed fields")
    replica_id, max_wait, min_bytes, max_bytes, isolation_level = reader.unpack_all(
        _FIXED_V4, start
    )
    session_id, session_epoch = 0, -1
    if version >= 7:
        start = reader.position
        reader.skip(_SESSION.size, "session_id")
        session_id, session_epoch = reader.unpack_all(_SESSION, start)
    partitions = []
    topic_count = reader.length(flexible, False, "topics")
    for _ in range(topic_count):
        topic = reader.string(flexible, False, "topics.topic")
        partition_count = reader.length(flexible, False, "topics.partitions")
        for _ in range(partition_count):
            partitions.append(_read_partition(reader, topic, version, flexible))
        if flexible:
            reader.skip_tagged_fields("topics tagged fields")
    if version >= 7:
        forgotten_count = reader.length(flexible, False, "forgotten_topics_data")
        for _ in range(forgotten_count):
            reader.string(flexible, False, "forgotten_topics_data.topic")
            count = reader.length(flexible, False, "forgotten_topics_data.partitions", unit=4)
            reader.skip(4 * count, "forgotten_topics_data.partitions")
            if flexible:
                reader.skip_tagged_fields("forgotten_topics_data tagged fields")
    if version >= 11:
        reader.string(flexible, False, "rack_id")
    if flexible:
        _skip_top_level_tagged_fields(reader)
    return _fetch_request(
        replica_id,
        max_wait,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        partitions,
    )


_PARTITION_LAYOUTS = {
    # version: (layout, where partition, fetch_offset and partition_max_bytes are in it)
    4: (struct.Struct(">iqi"), 0, 1, 2),
    5: (struct.Struct(">iqqi"), 0, 1, 3),  # + log_start_offset
    9: (struct.Struct(">iiqqi"), 0, 2, 4),  # + current_leader_epoch
    12: (struct.Struct(">iiqiqi"), 0, 2, 5),  # + last_fetched_epoch
}
"""A partition's fixed fields, read in one step."""


@cache
def _partition_layout(version: int) -> tuple[struct.Struct, int, int, int]:
    return _PARTITION_LAYOUTS[max(v for v in _PARTITION_LAYOUTS if v <= version)]


def _read_partition(reader: ByteReader, topic: str, version: int, flexible: bool) -> FetchPartition:
    layout, index_at, offset_at, max_bytes_at = _partition_layout(version)
    start = reader.position
    reader.skip(layout.size, "topics.partitions")
    values = reader.unpack_all(layout, start)
    if flexible:
        reader.skip_tagged_fields("partitions tagged fields")
    partition_max_bytes = max(0, values[max_bytes_at])
    return FetchPartition(topic, values[index_at], values[offset_at], partition_max_bytes)


def _skip_top_level_tagged_fields(reader: ByteReader) -> None:
    """The request's tagged fields; the one this version knows (cluster_id, a nullable string)
    must be one whole string, as the schema codec checks."""
    what = "tagged fields"
    if reader.remaining > 0 and reader.peek() == 0:  # none: nearly always
        reader.skip(1, what)
        return
    for tag, size in reader.tagged_fields(what):
        if tag != CLUSTER_ID_TAG:
            reader.skip(size, f"{what} tag {tag}")
            continue
        end = reader.position + size
        sub = reader.sub_reader(end)
        sub.string(True, True, "cluster_id")
        if sub.position != end:
            raise sub.fail(f"tagged field cluster_id has {end - sub.position} extra bytes")
        reader.position = end


class KafkaFetchResponse(NamedTuple):
    """A Fetch response's fields: the partitions in request order (grouped by topic when
    written), a top-level error, and whether aborted transactions are listed (an empty list
    for read_committed, null otherwise)."""

    partitions: Sequence[FetchPartitionResponse]
    error_code: int = 0
    session_id: int = 0
    read_committed: bool = False


_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_TOP_V7 = struct.Struct(">ihi")  # throttle, error, session_id
_NULL_ARRAY = _INT32.pack(-1)
_EMPTY_ARRAY = _INT32.pack(0)
_NO_PREFERRED_READ_REPLICA = _INT32.pack(-1)
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset


def write_fetch_response(
    out: PartsWriter, response: KafkaFetchResponse, version: int, throttle_ms: int = 0
) -> None:
    """The body of a Fetch v4-v12 response, written to ``out``: bytes, with each partition's
    records that live in a file (a file region) as a piece of its own, for ``sendfile``."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    buffer = out.buffer
    if version >= 7:
        buffer += _TOP_V7.pack(throttle_ms, response.error_code, response.session_id)
    else:
        buffer += _INT32.pack(throttle_ms)
    head, tail = _partition_layout_out(version, response.read_committed)
    after_aborted = _after_aborted(version)
    with_log_start = version >= 5
    topics = by_topic(response.partitions)
    write_length(buffer, len(topics), flexible)
    for topic, entries in topics:
        buffer += encoded_name(topic, flexible)
        write_length(buffer, len(entries), flexible)
        for p in entries:
            if with_log_start:
                buffer += head.pack(
                    p.partition, p.error, p.high_watermark, p.last_stable_offset, p.log_start_offset
                )
            else:
                buffer += head.pack(p.partition, p.error, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted_transactions
            if aborted and response.read_committed:
                write_length(buffer, len(aborted), flexible)
                for transaction in aborted:
                    buffer += _ABORTED.pack(transaction.producer_id, transaction.first_offset)
                    if flexible:
                        buffer.append(0)
                buffer += after_aborted
            else:
                buffer += tail
            records = p.records
            if records is None:
                buffer += b"\x00" if flexible else _NULL_ARRAY
            elif not records:
                buffer += b"\x01" if flexible else _EMPTY_ARRAY
            else:
                write_length(buffer, len(records), flexible)
                if isinstance(records, bytes | bytearray | memoryview):
                    buffer += records
                elif len(records):
                    out.region(records)  # (a new buffer follows it)
                    buffer = out.buffer
            if flexible:
                buffer.append(0)
        if flexible:
            buffer.append(0)
    if flexible:
        buffer.append(0)


@cache
def _partition_layout_out(version: int, read_committed: bool) -> tuple[struct.Struct, bytes]:
    """A partition's fixed fields in a response of ``version``: index, error, high watermark,
    last stable offset, (v5+) log start offset, packed in one step; then the bytes that never
    vary: the aborted transactions (null, or empty for read_committed) and (v11+) the
    preferred read replica (none)."""
    head = struct.Struct(">ihqqq" if version >= 5 else ">ihqq")
    if version >= FIRST_FLEXIBLE_VERSION:
        tail = b"\x01" if read_committed else b"\x00"
    else:
        tail = _EMPTY_ARRAY if read_committed else _NULL_ARRAY
    return head, tail + _after_aborted(version)


@cache
def _after_aborted(version: int) -> bytes:
    """What follows the aborted transactions: (v11+) the preferred read replica, none."""
    return _NO_PREFERRED_READ_REPLICA if version >= 11 else b""


# --- a fetch that finds nothing new, answered at once ----------------------------------------


class ImmediateFetch(NamedTuple):
    """A Fetch request of the usual shape for one partition that may not wait (``max_wait``
    or ``min_bytes`` 0), outside any fetch session: what it reads, and the pieces of the
    response that finds nothing there (``write_nothing_new``)."""

    topic: str
    partition: int
    fetch_offset: int
    isolation: IsolationLevel
    layout: struct.Struct
    frame_size: int
    before: bytes
    after: bytes
    with_log_start: bool


_START = struct.Struct(">hhi")  # api_key, api_version, correlation_id
IMMEDIATE_MAX_FRAME_BYTES = 1024


def read_immediate_fetch(frame: memoryview) -> tuple[int, ImmediateFetch] | None:
    """``(correlation_id, fetch)`` of a whole Fetch request frame (without its size prefix)
    that may be answered at once if it finds nothing new; None for any other request (and
    for one the general path refuses), which the general path takes.

    Such a request is read as the general path reads it (``read_client_id``,
    ``read_fetch_request``) the first time its bytes come, then by its bytes: a consumer at
    the head of its partition sends the same body again and again. The bodies kept are
    bounded in size and number."""
    if len(frame) > IMMEDIATE_MAX_FRAME_BYTES:
        return None
    data = frame.tobytes()  # (cheaper to slice and compare than the view)
    api_key, version, correlation_id = _START.unpack_from(data)
    if api_key != FETCH:
        return None
    global _last
    last_version, last_size, last_body, fetch = _last
    if not (version == last_version and len(data) == last_size and data.endswith(last_body)):
        body = data[8:]
        key = (version, body)
        try:
            fetch = _immediate[key]
        except KeyError:
            fetch = _read_immediate(frame, version)
            if len(_immediate) >= REPEATED_MAX_ENTRIES:
                _immediate.clear()
            _immediate[key] = fetch
        if fetch is None:
            return None
        _last = (version, len(data), body, fetch)
    return correlation_id, fetch


_immediate: dict[tuple[int, bytes], ImmediateFetch | None] = {}
"""Fetch frames read lately, by version and the bytes after the correlation id."""

_last: tuple[int, int, bytes, ImmediateFetch | None] = (-1, 0, b"", None)
"""The version, size and bytes after the correlation id of the last good frame read, and
what it asks: a consumer at the head of its partition sends it again and again, found by
one comparison (the same size and the same end: the same bytes after the id)."""


def _read_immediate(frame: memoryview, version: int) -> ImmediateFetch | None:
    if request_flexibility(FETCH, version) is None:
        return None
    try:
        _, body_offset = read_client_id(frame, version >= FIRST_FLEXIBLE_VERSION)
        request = read_fetch_request(frame, body_offset, version)
    except InvalidRequestError:
        return None
    if (
        request.session_id != 0
        or len(request.partitions) != 1
        or (request.max_wait_ms and request.min_bytes)
    ):
        return None
    entry = request.partitions[0]
    pieces = _nothing_new_layout(
        version, entry.topic, entry.partition, request.isolation_level == READ_COMMITTED
    )
    return ImmediateFetch(
        entry.topic, entry.partition, entry.fetch_offset, request.isolation, *pieces
    )


@lru_cache(maxsize=1024)
def _nothing_new_layout(
    version: int, topic: str, partition: int, read_committed: bool
) -> tuple[struct.Struct, int, bytes, bytes, bool]:
    """The layout of ``write_nothing_new``'s frames for one version and partition, its frame
    size, the bytes around the offsets (what the general path writes there: a response
    header, then ``write_fetch_response``'s body) and whether the log start offset is among
    them (v5+)."""
    out = PartsWriter()
    out.buffer += _INT32.pack(0) + _INT32.pack(0)  # (the size and correlation id)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    if flexible:
        out.buffer.append(0)  # the response header's tagged fields
    result = FetchPartitionResponse(topic, partition, 0, None, 0, 0, 0, b"")
    write_fetch_response(out, KafkaFetchResponse((result,), 0, 0, read_committed), version)
    (frame,) = out.finish_frame()
    _, tail = _partition_layout_out(version, read_committed)
    after_size = len(tail) + (1 + 3 if flexible else 4)  # empty records; tagged fields
    offsets = 3 if version >= 5 else 2
    before = frame[8 : len(frame) - after_size - 8 * offsets]
    after = frame[len(frame) - after_size :]
    layout = struct.Struct(f">ii{len(before)}s{'q' * offsets}{len(after)}s")
    return layout, layout.size - 4, before, after, offsets == 3


def write_nothing_new(
    fetch: ImmediateFetch, correlation_id: int, high_watermark: int, log_start_offset: int
) -> bytes:
    """The whole response frame (size prefix included) to ``fetch`` finding no records, no
    error: what the general path writes (the last stable offset is the high watermark)."""
    if not fetch.with_log_start:  # v4
        return fetch.layout.pack(
            fetch.frame_size,
            correlation_id,
            fetch.before,
            high_watermark,
            high_watermark,
            fetch.after,
        )
    return fetch.layout.pack(
        fetch.frame_size,
        correlation_id,
        fetch.before,
        high_watermark,
        high_watermark,
        log_start_offset,
        fetch.after,
    )
