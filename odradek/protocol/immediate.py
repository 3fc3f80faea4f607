"""Immediate requests: a produce or fetch a broker may answer at once, read by its bytes.

A client sends the same request again and again, all but its correlation id: a producer the
same topic, partition, acks and batch size, a consumer at the end of its partition the same
fetch. Such a request (a frame's bytes after its size, as a FrameReader receives them) is
read as the general path reads it (``decode_frame``, ``RequestHeader.from_header``,
``read_produce`` / ``read_fetch`` with ``at_once``) the first time its header comes, then found
by the header's bytes around the correlation id; the heads kept are bounded in size and number.
Its answer is written from pieces made once per head around the values that change: the
correlation id, as the request carried it, and the offsets.

Only the envelope odradek's clients write is read so: a map whose first entries are ``api``,
``v`` and ``id``, the id a non-negative int written as msgpack writes it (so the answer may
carry the same bytes). Anything else is None here and goes to the general path, whose answer
the one written here is (tests hold the two to each other, byte for byte).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import msgpack

from odradek.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.fetch import read_fetch
from odradek.protocol.frame import FrameError, decode_frame
from odradek.protocol.header import is_common_envelope
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.produce import read_produce
from odradek.protocol.values.produce import Acks

PRODUCE = int(ApiKey.PRODUCE)
FETCH = int(ApiKey.FETCH)
ID_START = 16
"""Where the correlation id's bytes start: after the header size (4 bytes), the map's marker,
``"api"`` and its value, ``"v"`` and its value, and ``"id"`` (12 bytes)."""
MAX_HEAD_BYTES = 512
"""The largest header read by its bytes (a request's usual header is under 150 bytes)."""
MAX_HEADS = 1024
"""How many heads are kept; all are dropped when more come."""


class ImmediateFetch(NamedTuple):
    """A one-partition fetch that may not wait, as the general path reads it, and the pieces
    of its answer when it finds nothing new."""

    api_key: int
    payload_size: int
    """Always 0: a fetch carries no payload."""
    topic: str
    partition: int
    fetch_offset: int
    isolation: IsolationLevel
    before: bytes
    """The answer's header from after the correlation id to the high watermark's value."""
    answers: list[Any]
    """One tuple, ``(high_watermark, log_start_offset, header bytes after the id, frame
    starts by the id's end)``, of the last answer (None before the first), replaced whole:
    repeated answers cost no encoding."""


class ImmediateProduce(NamedTuple):
    """A one-partition produce, as the general path reads it, and the pieces of its answer
    when its append succeeds (at acks=all, once fsync'ed: ``timeout_ms`` is how long it
    may wait for that)."""

    api_key: int
    payload_size: int
    """The records' size: the whole payload."""
    topic: str
    partition: int
    acks: Acks
    timeout_ms: int
    before: bytes
    """The answer's header from after the correlation id to the base offset's value."""
    answers: list[Any]
    """One tuple, ``(log_append_time_ms, log_start_offset, header bytes after the base
    offset, the header's size but for the id and the base offset, less ID_START)``, of the
    last answer (None before the first), replaced whole."""


Immediate = ImmediateFetch | ImmediateProduce


def read_immediate(body: memoryview) -> tuple[Immediate, int] | None:
    """``(request, end of the correlation id)`` of the frame whose bytes after its size are
    ``body``, when it is a produce or fetch of the shape a broker may answer at once; None
    for anything else, read on the general path."""
    size = len(body)
    # Read from a bytes copy of a small frame (of the head alone past COPY_MAX_BYTES): it
    # costs less than the view slices and the view indexing it saves.
    data = body.tobytes() if size <= COPY_MAX_BYTES else body[:MAX_HEAD_BYTES].tobytes()
    if data[0] | data[1]:
        return None
    header_end = 4 + (data[2] << 8 | data[3])
    if header_end > MAX_HEAD_BYTES or header_end < 32:
        return None
    kind = data[16]  # the correlation id's first byte: what msgpack writes for a non-negative
    if kind < 0x80:  # int32 (a fixint; then unsigned 8, 16 and 32-bit ints, each only for a
        id_end = 17  # value the narrower one cannot hold)
    elif kind == 0xCD and data[17]:
        id_end = 19
    elif kind == 0xCE and data[17] < 0x80 and data[17] | data[18]:
        id_end = 21
    elif kind == 0xCC and data[17] >= 0x80:
        id_end = 18
    else:
        return None
    global _last
    last_header_end, last_id_end, last_before_id, last_after_id, request = _last
    if not (
        header_end == last_header_end
        and id_end == last_id_end
        and data.startswith(last_after_id, id_end)
        and data.startswith(last_before_id, 4)
    ):  # (else the head of the last one read, all but its id: found by two comparisons)
        before_id, after_id = data[4:ID_START], data[id_end:header_end]
        key = before_id + after_id
        try:
            request = _heads[key]
        except KeyError:
            request, lasting = _read_head(body, header_end)
            if lasting:  # (not when it is its payload's size that rules it out)
                if len(_heads) >= MAX_HEADS:
                    _heads.clear()
                _heads[key] = request
            elif request is None:
                return None
        if request is None:
            return None
        _last = (header_end, id_end, before_id, after_id, request)
    if size - header_end != request.payload_size:
        return None
    return request, id_end


COPY_MAX_BYTES = 4096
"""Frames up to this size are copied whole to be read (a few tens of nanoseconds); larger
ones have their head copied."""

_heads: dict[bytes, Immediate | None] = {}
"""Heads read lately, by their bytes before and after the correlation id."""

_last: tuple[int, int, bytes, bytes, Immediate | None] = (0, 0, b"", b"", None)
"""Where the header and the correlation id of the last good head read end, its bytes before
and after the id, and what it asks: a client sends the same head again and again."""

_FETCH_VERSIONS = frozenset(range(SUPPORTED_VERSIONS[ApiKey.FETCH][1] + 1))
_PRODUCE_VERSIONS = frozenset(range(SUPPORTED_VERSIONS[ApiKey.PRODUCE][1] + 1))


def _read_head(body: memoryview, header_end: int) -> tuple[Immediate | None, bool]:
    """The request whose header ends at ``header_end``, read as the general path reads it
    (None unless it is an immediate one with the envelope ``read_immediate`` reads by its
    bytes, and no key twice, so each value is the one at its place), and whether that holds
    for any request with this header (false when the payload's size decided)."""
    if not (
        0x83 <= body[4] <= 0x8F
        and body[5:9] == b"\xa3api"
        and body[9] < 0x80
        and body[10:12] == b"\xa1v"
        and body[12] < 0x80
        and body[13:16] == b"\xa2id"
    ):
        return None, True
    try:
        header, payload = decode_frame(body)
    except FrameError:
        return None, True
    if len(header) != body[4] - 0x80 or not is_common_envelope(header):
        return None, True
    api_key = header["api"]
    if api_key == FETCH and header["v"] in _FETCH_VERSIONS:
        if len(payload):
            return None, False
        fetch = read_fetch(header, payload, at_once=True)
        if fetch is None:
            return None, True
        [entry], _, _, _, isolation = fetch
        topic, partition = entry["topic"], entry["partition"]
        before = _before(topic, partition, 8, "high_watermark")
        fetch_offset = entry["fetch_offset"]
        return ImmediateFetch(
            FETCH, 0, topic, partition, fetch_offset, isolation, before, [None]
        ), True
    if api_key == PRODUCE and header["v"] in _PRODUCE_VERSIONS:
        produce = read_produce(header, payload, at_once=True)
        if produce is None:
            return None, _declared_bytes(header) == len(payload)
        [entry], acks, timeout_ms = produce
        topic, partition, size = entry["topic"], entry["partition"], entry["size"]
        if not size:
            return None, True  # nothing to append: the general path refuses it
        before = _before(topic, partition, 7, "base_offset")
        return ImmediateProduce(
            PRODUCE, size, topic, partition, acks, timeout_ms, before, [None]
        ), True
    return None, True


def _declared_bytes(header: dict[str, Any]) -> int | None:
    """The payload's size a produce's entries say, if each says one."""
    entries = header.get("partitions")
    if type(entries) is not list:
        return None
    total = 0
    for entry in entries:
        size = entry.get("size") if type(entry) is dict else None
        if type(size) is not int:
            return None
        total += size
    return total


def _before(topic: str, partition: int, fields: int, last: str) -> bytes:
    """An answer's header from after the correlation id to the value of the partition's
    field ``last`` (its ``fields`` entries in the order the response's encoder writes them)."""
    return b"".join(
        (
            _items("error", 0, "message", None, "partitions"),
            bytes((0x91, 0x80 + fields)),
            _items("topic", topic, "partition", partition, "error", 0, "message", None, last),
        )
    )


def _items(*values: Any) -> bytes:
    """``values`` one after another, as msgpack writes them."""
    return b"".join(map(msgpack.packb, values))


_SIZES = struct.Struct(">II")
_ENVELOPE = b"\x85\xa2id"  # the answer's map (id, error, message, partitions, throttle) and id


def _starts(header_bytes: int) -> tuple[bytes, ...]:
    """The frame's sizes and the map up to the correlation id, for an answer with
    ``header_bytes`` of header after the id, by where the request's id ended."""
    starts = []
    for id_end in range(ID_START + 6):
        size = len(_ENVELOPE) + id_end - ID_START + header_bytes
        starts.append(_SIZES.pack(4 + size, size) + _ENVELOPE)
    return tuple(starts)


def read_correlation_id(body: memoryview, id_end: int) -> int:
    """The correlation id of the request whose bytes are ``body`` (as ``read_immediate``
    took it, the id ending at ``id_end``): a fixint, or an unsigned int of 1, 2 or 4 bytes."""
    if id_end == ID_START + 1:
        return body[ID_START]
    return int.from_bytes(body[ID_START + 1 : id_end])


def write_nothing_new(
    fetch: ImmediateFetch, body: memoryview, id_end: int, high_watermark: int, log_start_offset: int
) -> bytes:
    """The frame answering ``fetch`` (whose bytes are ``body``, its id ending at ``id_end``)
    that found no records, no error: what ``encode_response`` makes of its FetchResponse."""
    answer = fetch.answers[0]
    if answer is None or answer[0] != high_watermark or answer[1] != log_start_offset:
        after = fetch.before + _items(
            high_watermark,
            "log_start_offset",
            log_start_offset,
            "last_stable_offset",
            high_watermark,
            "size",
            0,
            "throttle_time_ms",
            0,
        )
        answer = fetch.answers[0] = (high_watermark, log_start_offset, after, _starts(len(after)))
    return answer[3][id_end] + body[ID_START:id_end] + answer[2]


def write_appended(
    produce: ImmediateProduce,
    body: memoryview,
    id_end: int,
    base_offset: int,
    log_append_time_ms: int,
    log_start_offset: int,
) -> bytes:
    """The frame answering ``produce`` (whose bytes are ``body``, its id ending at ``id_end``)
    whose append succeeded at ``base_offset``: what ``encode_response`` makes of its
    ProduceResponse."""
    answer = produce.answers[0]
    if answer is None or answer[0] != log_append_time_ms or answer[1] != log_start_offset:
        after = _items(
            "log_append_time_ms",
            log_append_time_ms,
            "log_start_offset",
            log_start_offset,
            "throttle_time_ms",
            0,
        )
        # (the header's size but for the id and the base offset, less ID_START: see below)
        fixed = len(_ENVELOPE) - ID_START + len(produce.before) + len(after)
        answer = produce.answers[0] = (log_append_time_ms, log_start_offset, after, fixed)
    if base_offset >= 0x10000:  # (most logs, most of the time)
        offset = (
            _UINT32.pack(0xCE, base_offset)
            if base_offset < 0x1_0000_0000
            else msgpack.packb(base_offset)
        )
    elif base_offset >= 0x80:
        offset = (
            _UINT8.pack(0xCC, base_offset)
            if base_offset < 0x100
            else _UINT16.pack(0xCD, base_offset)
        )
    else:
        offset = _FIXINTS[base_offset] if base_offset >= 0 else msgpack.packb(base_offset)
    size = answer[3] + id_end + len(offset)
    return b"".join(
        (
            _SIZES.pack(4 + size, size),
            _ENVELOPE,
            body[ID_START:id_end],
            produce.before,
            offset,
            answer[2],
        )
    )


_FIXINTS = tuple(bytes((value,)) for value in range(0x80))
_UINT8 = struct.Struct(">BB")
_UINT16 = struct.Struct(">BH")
_UINT32 = struct.Struct(">BI")
