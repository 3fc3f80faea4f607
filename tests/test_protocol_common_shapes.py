"""The envelopes, produce and fetch read and build their common shapes directly: held here to
the schema walk (decode_message, encode_message), byte for byte, for any input, bad or good."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.errors import InvalidRequestError, KafkaError
from odradek.int_limits import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from odradek.protocol.fetch import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MIN_BYTES,
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    read_fetch,
)
from odradek.protocol.fetch import _common_shape as fetch_common_shape
from odradek.protocol.frame import (
    FrameDecoder,
    FrameError,
    decode_frame,
    encode_frame,
    encode_frame_prefix,
)
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.immediate import (
    COPY_MAX_BYTES,
    ImmediateFetch,
    read_correlation_id,
    read_immediate,
    write_appended,
    write_nothing_new,
)
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.messages import decode_request, encode_request, encode_response
from odradek.protocol.produce import (
    DEFAULT_TIMEOUT_MS,
    Acks,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    read_produce,
)
from odradek.protocol.produce import _common_shape as produce_common_shape
from odradek.protocol.schema import (
    Message,
    decode_message,
    encode_message,
    stored_at_once,
)

# --- values near the edges of every field's type, and anything else msgpack can carry ---------

odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)


def ints(low: int, high: int) -> st.SearchStrategy[int]:
    """Integers in range, mostly, and just outside it (as far as msgpack carries them)."""
    edges = [n for n in (low, high, low - 1, high + 1, 0, 1, -1) if -(2**63) <= n < 2**64]
    return st.one_of(st.integers(low, high), st.sampled_from(edges))


def sometimes_odd(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``good`` (nine times in ten), sometimes anything at all."""
    return st.integers(0, 9).flatmap(lambda n: good if n < 9 else odd_values)


MISSING = object()


def fields(**strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A map of these fields, each of which may be absent; sometimes an unknown key too."""
    entries = [
        st.integers(0, 4)
        .flatmap(lambda n, strategy=strategy: strategy if n < 4 else st.just(MISSING))
        .map(lambda value, key=key: {} if value is MISSING else {key: value})
        for key, strategy in strategies.items()
    ]
    extra = st.dictionaries(st.sampled_from(["unknown", "extra"]), odd_values, max_size=1)

    def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for part in parts:
            merged.update(part)
        return merged

    return st.tuples(*entries, extra).map(merge)


topics = sometimes_odd(st.sampled_from(["a", "topic-1", ""]))
partitions = sometimes_odd(ints(0, INT32_MAX))
non_negative_int32 = sometimes_odd(ints(0, INT32_MAX))
int64 = sometimes_odd(ints(INT64_MIN, INT64_MAX))

produce_entries = fields(topic=topics, partition=partitions, size=sometimes_odd(ints(0, 12)))
produce_headers = fields(
    partitions=sometimes_odd(st.lists(sometimes_odd(produce_entries), max_size=3)),
    acks=sometimes_odd(st.sampled_from([-1, 0, 1, 2, "1"])),
    timeout_ms=non_negative_int32,
)
fetch_entries = fields(
    topic=topics,
    partition=partitions,
    fetch_offset=int64,
    partition_max_bytes=non_negative_int32,
)
fetch_headers = fields(
    partitions=sometimes_odd(st.lists(sometimes_odd(fetch_entries), max_size=3)),
    max_wait_ms=non_negative_int32,
    min_bytes=non_negative_int32,
    max_bytes=non_negative_int32,
    isolation=sometimes_odd(st.sampled_from(["high_watermark", "log_end", "dirty", 0])),
)
request_envelopes = fields(
    api=sometimes_odd(ints(INT16_MIN, INT16_MAX)),
    v=sometimes_odd(ints(INT16_MIN, INT16_MAX)),
    id=sometimes_odd(ints(INT32_MIN, INT32_MAX)),
    client_id=sometimes_odd(st.one_of(st.none(), st.text(max_size=5))),
)
payloads = st.binary(max_size=30)


def outcome(decode: Callable[[], Message]) -> tuple[Any, ...]:
    """What decoding gave, comparable across paths: the value (enum members as such, records
    as bytes) or the error's type and message."""
    try:
        message = decode()
    except KafkaError as error:
        return ("error", type(error), error.message)
    return ("decoded", type(message), _plain(message))


def _plain(value: Any) -> Any:
    if isinstance(value, Message) or hasattr(value, "__dataclass_fields__"):
        return (type(value), tuple(_plain(v) for v in vars(value).values()))
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, memoryview):
        return bytes(value)
    return (type(value), value)


# --- requests ------------------------------------------------------------------------------


@st.composite
def produce_requests(draw: st.DrawFn) -> tuple[dict[str, Any], bytes]:
    """A produce header and a payload: mostly exactly as long as its sizes say."""
    header = draw(produce_headers)
    entries = header.get("partitions")
    sizes = (
        [entry.get("size") for entry in entries if isinstance(entry, dict)]
        if isinstance(entries, list)
        else []
    )
    covered = sum(size for size in sizes if type(size) is int and 0 <= size <= 12)
    exact = st.binary(min_size=covered, max_size=covered)
    return header, draw(st.integers(0, 4).flatmap(lambda n: exact if n < 4 else payloads))


@settings(max_examples=examples(400))
@given(request=produce_requests())
def test_produce_request_decodes_as_the_schema_does(request: tuple[dict, bytes]) -> None:
    header, payload = request
    view = memoryview(payload)
    assert outcome(lambda: ProduceRequest.from_header(header, view)) == outcome(
        lambda: decode_message(ProduceRequest, header, view)
    )


@settings(max_examples=examples(400))
@given(header=fetch_headers, payload=st.one_of(st.just(b""), payloads))
def test_fetch_request_decodes_as_the_schema_does(header: dict, payload: bytes) -> None:
    view = memoryview(payload)
    assert outcome(lambda: FetchRequest.from_header(header, view)) == outcome(
        lambda: decode_message(FetchRequest, header, view)
    )


def schema_request_header(header: dict) -> RequestHeader:
    """The envelope as the schema reads it, refused as a frame error (it cannot be answered)."""
    try:
        return decode_message(RequestHeader, header)
    except InvalidRequestError as error:
        raise FrameError(f"bad request header: {error.message}") from None


@settings(max_examples=examples(300))
@given(header=request_envelopes)
def test_request_header_decodes_as_the_schema_does(header: dict) -> None:
    assert outcome(lambda: RequestHeader.from_header(header)) == outcome(
        lambda: schema_request_header(header)
    )


def test_the_common_shapes_are_read_directly() -> None:
    """The cases above do take the direct path (equal outcomes alone would not show it)."""
    produce = {"partitions": [{"topic": "a", "partition": 0, "size": 2}], "acks": 1}
    fetch = {"partitions": [{"topic": "a", "partition": 0, "fetch_offset": 5}], "max_wait_ms": 0}
    envelope = {"api": 0, "v": 0, "id": 7, "client_id": "c"}

    def refuse(*args: object) -> None:
        raise AssertionError("the schema was asked")

    with pytest.MonkeyPatch.context() as patch:
        for module in ("produce", "fetch", "header"):
            patch.setattr(f"odradek.protocol.{module}.decode_message", refuse)
        assert ProduceRequest.from_header(produce, memoryview(b"xy")).partitions[0].partition == 0
        assert FetchRequest.from_header(fetch).partitions[0].fetch_offset == 5
        assert RequestHeader.from_header(envelope).correlation_id == 7


@settings(max_examples=examples(300))
@given(
    envelope=request_envelopes,
    api=st.sampled_from([0, 1]),
    produce=produce_requests(),
    fetch=fetch_headers,
)
def test_whole_frames_get_the_same_answer(
    envelope: dict, api: int, produce: tuple[dict, bytes], fetch: dict
) -> None:
    """Through the frame decoder as a broker reads them: the request, or the error it answers
    (with the same bytes: ResponseHeader.for_error of the same error)."""
    body, payload = produce if api == 0 else (fetch, b"")
    (frame,) = FrameDecoder().feed(encode_frame({**body, **envelope, "api": api, "v": 0}, payload))
    envelope_outcome = outcome(lambda: RequestHeader.from_header(frame.header))
    assert envelope_outcome == outcome(lambda: schema_request_header(frame.header))
    if envelope_outcome[0] == "error":
        return  # unanswerable: the connection is closed either way
    header = RequestHeader.from_header(frame.header)
    request_type = ProduceRequest if api == 0 else FetchRequest

    def general() -> Message:
        return decode_message(request_type, frame.header, frame.payload)

    fast, reference = outcome(lambda: decode_request(header, frame)), outcome(general)
    assert fast == reference
    if fast[0] == "error":
        error = fast[1](fast[2])
        assert frame_bytes(encode_response(ResponseHeader.for_error(1, error))) == frame_bytes(
            [schema_frame_prefix(ResponseHeader.for_error(1, error), None, 0)]
        )


# --- responses -----------------------------------------------------------------------------


def frame_bytes(parts: list[Any]) -> bytes:
    return b"".join(bytes(part) for part in parts)


def schema_frame_prefix(envelope: Message, body: Message | None, payload_size: int) -> bytes:
    header = encode_message(envelope, [])
    if body is not None:
        header.update(encode_message(body, []))
    return encode_frame_prefix(header, payload_size)


def schema_frame(envelope: Message, body: Message) -> bytes:
    parts: list[Any] = []
    header = encode_message(envelope, [])
    header.update(encode_message(body, parts))
    return frame_bytes([encode_frame_prefix(header, sum(map(len, parts))), *parts])


messages = st.one_of(st.none(), st.text(max_size=6))
offsets = st.integers(INT64_MIN, INT64_MAX)
produce_responses = st.builds(
    ProduceResponse,
    st.lists(
        st.builds(
            ProducePartitionResponse,
            st.text(max_size=5),
            st.integers(0, INT32_MAX),
            st.integers(INT16_MIN, INT16_MAX),
            messages,
            offsets,
            offsets,
            offsets,
        ),
        max_size=3,
    ).map(tuple),
    st.integers(0, INT32_MAX),
)
fetch_responses = st.builds(
    FetchResponse,
    st.lists(
        st.builds(
            FetchPartitionResponse,
            st.text(max_size=5),
            st.integers(0, INT32_MAX),
            st.integers(INT16_MIN, INT16_MAX),
            messages,
            offsets,
            offsets,
            offsets,
            st.binary(max_size=6),
        ),
        max_size=3,
    ).map(tuple),
    st.integers(0, INT32_MAX),
)
response_envelopes = st.builds(
    ResponseHeader, st.integers(INT32_MIN, INT32_MAX), st.integers(INT16_MIN, INT16_MAX), messages
)


@settings(max_examples=examples(300))
@given(envelope=response_envelopes, body=st.one_of(produce_responses, fetch_responses))
def test_responses_encode_as_the_schema_does(envelope: ResponseHeader, body: Message) -> None:
    assert frame_bytes(encode_response(envelope, body)) == schema_frame(envelope, body)
    parts: list[Any] = []
    assert msgpack.packb(body.encode(parts)) == msgpack.packb(encode_message(body, []))


@settings(max_examples=examples(100))
@given(envelope=response_envelopes)
def test_error_envelopes_encode_as_the_schema_does(envelope: ResponseHeader) -> None:
    assert frame_bytes(encode_response(envelope)) == schema_frame_prefix(envelope, None, 0)


# --- requests answered at once: one partition, read as the general path reads it -----------


@settings(max_examples=examples(400))
@given(header=fetch_headers, payload=st.one_of(st.just(b""), payloads))
def test_an_immediate_fetch_is_the_request_the_general_path_reads(
    header: dict, payload: bytes
) -> None:
    """What read_fetch takes at once is a one-partition fetch that may not wait, with the
    fields the general path reads; what it leaves is anything else, or what the common shape
    leaves too (then the schema reads it)."""
    view = memoryview(payload)
    immediate = read_fetch(header, view, at_once=True)
    general = outcome(lambda: FetchRequest.from_header(header, view))
    if immediate is not None:
        request = FetchRequest.from_header(header, view)
        [entry], _, _, _, isolation = immediate
        (read,) = request.partitions
        assert (entry["topic"], entry["partition"], entry["fetch_offset"], isolation) == (
            read.topic,
            read.partition,
            read.fetch_offset,
            request.isolation,
        )
        assert request.max_wait_ms == 0 or request.min_bytes == 0
        return
    if general[0] == "decoded" and fetch_common_shape(header, view) is not None:
        request = FetchRequest.from_header(header, view)
        assert len(request.partitions) != 1 or (request.max_wait_ms and request.min_bytes)


@settings(max_examples=examples(400))
@given(request=produce_requests())
def test_an_immediate_produce_is_the_request_the_general_path_reads(
    request: tuple[dict, bytes],
) -> None:
    header, payload = request
    view = memoryview(payload)
    immediate = read_produce(header, view, at_once=True)
    if immediate is not None:
        decoded = ProduceRequest.from_header(header, view)
        (read,) = decoded.partitions
        [entry], acks, timeout_ms = immediate
        assert (entry["topic"], entry["partition"], payload, acks, timeout_ms) == (
            read.topic,
            read.partition,
            bytes(read.records),
            decoded.acks,
            decoded.timeout_ms,
        )
        assert decoded.transactional_id is None
        return
    if produce_common_shape(header, view) is not None:
        decoded = ProduceRequest.from_header(header, view)
        assert len(decoded.partitions) != 1 or decoded.transactional_id is not None


def test_immediate_requests_are_read_directly() -> None:
    fetch = {"partitions": [{"topic": "a", "partition": 3, "fetch_offset": 5}], "max_wait_ms": 0}
    produce = {"partitions": [{"topic": "a", "partition": 0, "size": 2}], "acks": 1}
    nothing = memoryview(b"")
    assert read_fetch(fetch, nothing, at_once=True) == (
        fetch["partitions"],
        0,
        DEFAULT_MIN_BYTES,
        DEFAULT_MAX_BYTES,
        IsolationLevel.HIGH_WATERMARK,
    )
    assert read_fetch({**fetch, "max_wait_ms": 1}, nothing, at_once=True) is None
    assert read_fetch({**fetch, "max_wait_ms": 1}, nothing) is not None
    assert read_fetch({**fetch, "min_bytes": 0, "max_wait_ms": 9}, nothing, at_once=True)
    two_partitions = {**fetch, "partitions": fetch["partitions"] * 2}
    assert read_fetch(two_partitions, nothing, at_once=True) is None
    assert read_produce(produce, memoryview(b"xy"), at_once=True) == (
        produce["partitions"],
        Acks.LEADER,
        DEFAULT_TIMEOUT_MS,
    )
    assert read_produce(produce, memoryview(b"xyz"), at_once=True) is None
    assert read_produce({**produce, "acks": -1}, memoryview(b"xy"), at_once=True) == (
        produce["partitions"],
        Acks.ALL,
        DEFAULT_TIMEOUT_MS,
    )
    transactional = {**produce, "transactional_id": "tx"}
    assert read_produce(transactional, memoryview(b"xy"), at_once=True) is None
    assert read_produce(transactional, memoryview(b"xy")) is not None


# --- requests answered at once, read by their bytes ------------------------------------------


@st.composite
def request_frames(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """Two produce or fetch frames (their bytes after the frame size) alike but for their
    correlation ids: mostly with the envelope odradek's clients write first, sometimes in
    another order, with odd values or a key twice."""
    api = draw(sometimes_odd(st.sampled_from([0, 1])))
    body, payload = draw(produce_requests()) if api == 0 else (draw(fetch_headers), b"")
    if draw(st.integers(0, 3)):  # mostly one partition, the shape answered at once
        if api == 0:
            payload = draw(st.binary(min_size=1, max_size=8))
            entry = {"topic": draw(topics), "partition": draw(partitions), "size": len(payload)}
            usual = {"acks": draw(st.sampled_from([0, 1, 1, -1]))}
        else:
            entry = {"topic": draw(topics), "partition": draw(partitions), "fetch_offset": 5}
            usual = {
                "max_wait_ms": draw(st.sampled_from([0, 0, 5])),
                "min_bytes": draw(st.sampled_from([0, 1])),
                "isolation": draw(st.sampled_from(["high_watermark", "log_end"])),
            }
        odd = draw(st.sampled_from([{}, {}, {}, body]))  # sometimes with anything at all
        body = {"partitions": [entry], **usual, **odd}
    envelope = {
        "api": api,
        "v": draw(sometimes_odd(st.sampled_from([0, 0, 0, 1]))),
        "id": 0,
        **draw(fields(client_id=sometimes_odd(st.one_of(st.none(), st.text(max_size=5))))),
    }
    header = {**envelope, **body}
    items = list(header.items())
    if not draw(st.integers(0, 5)):
        items = draw(st.permutations(items))
    ids = st.one_of(ints(INT32_MIN, INT32_MAX), st.sampled_from([127, 128, 255, 256, 65535, 65536]))
    twice = draw(st.one_of(st.none(), st.sampled_from(["id", "api", "partitions"])))
    frames = []
    for correlation_id in (draw(ids), draw(ids)):
        packed = [
            msgpack.packb(key) + msgpack.packb(correlation_id if key == "id" else value)
            for key, value in items
        ]
        if twice is not None:
            packed.append(msgpack.packb(twice) + msgpack.packb(draw(odd_values)))
        count = len(packed)
        map_start = bytes([0x80 + count]) if count < 16 else b"\xde" + count.to_bytes(2, "big")
        head = map_start + b"".join(packed)
        frames.append(len(head).to_bytes(4, "big") + head + payload)
    return frames[0], frames[1]


def general_request(body: bytes) -> tuple[RequestHeader, Message] | None:
    """What the general path reads from a frame's bytes; None when it refuses them."""
    try:
        frame = decode_frame(body)
        header = RequestHeader.from_header(frame.header)
        return header, decode_request(header, frame)
    except KafkaError:
        return None


@settings(max_examples=examples(500))
@given(frames=request_frames(), offsets=st.tuples(*[st.integers(-1, INT64_MAX)] * 3))
def test_an_immediate_request_is_what_the_general_path_reads(
    frames: tuple[bytes, bytes], offsets: tuple[int, int, int]
) -> None:
    """Whatever ``read_immediate`` takes (the first time its head comes or found by its bytes)
    is a one-partition fetch that may not wait, or a one-partition produce, as the general
    path reads it (its correlation id too); and its answer has the bytes the general path's
    encoder gives."""
    first, second, third = offsets
    for body in (*frames, *frames):
        view = memoryview(bytearray(body))
        read = read_immediate(view)
        if read is None:
            continue
        immediate, id_end = read
        general = general_request(body)
        assert general is not None, body
        header, request = general
        assert header.api_key == immediate.api_key
        assert read_correlation_id(view, id_end) == header.correlation_id
        (entry,) = request.partitions
        assert (entry.topic, entry.partition) == (immediate.topic, immediate.partition)
        if isinstance(immediate, ImmediateFetch):
            assert (entry.fetch_offset, request.isolation) == (
                immediate.fetch_offset,
                immediate.isolation,
            )
            assert request.max_wait_ms == 0 or request.min_bytes == 0
            response = FetchResponse(
                (
                    FetchPartitionResponse(
                        entry.topic, entry.partition, 0, None, first, second, first
                    ),
                )
            )
            answer = write_nothing_new(immediate, view, id_end, first, second)
        else:
            assert request.acks is immediate.acks
            assert request.timeout_ms == immediate.timeout_ms
            assert request.transactional_id is None
            assert bytes(view[len(view) - immediate.payload_size :]) == bytes(entry.records)
            response = ProduceResponse(
                (ProducePartitionResponse(entry.topic, entry.partition, 0, None, *offsets),)
            )
            answer = write_appended(immediate, view, id_end, first, second, third)
        general_answer = encode_response(ResponseHeader(header.correlation_id), response)
        assert answer == frame_bytes(general_answer)


def test_the_requests_of_odradeks_clients_are_read_by_their_bytes() -> None:
    """For every width msgpack gives a non-negative correlation id (read back as it was);
    never a negative one."""
    fetch = FetchRequest((FetchPartition("t", 1, 7),), max_wait_ms=0)
    produce = ProduceRequest((ProducePartitionData("t", 1, b"records"),), acks=Acks.LEADER)
    durable = dataclasses.replace(produce, acks=Acks.ALL, timeout_ms=1500)
    for request in (fetch, produce, durable):
        for request_id in (0, 127, 128, 255, 256, 65535, 65536, INT32_MAX, -1, -200):
            header = RequestHeader(request.api_key, 0, request_id, "client")
            frame = frame_bytes(encode_request(header, request))
            body = memoryview(bytearray(frame[4:]))
            read = read_immediate(body)
            assert (read is not None) == (request_id >= 0), (request, request_id)
            if read is not None:
                assert read_correlation_id(body, read[1]) == request_id
        waiting = dataclasses.replace(fetch, max_wait_ms=5)
        for unusual in (waiting, dataclasses.replace(produce, transactional_id="tx")):
            frame = frame_bytes(encode_request(RequestHeader(unusual.api_key, 0, 1), unusual))
            assert read_immediate(memoryview(bytearray(frame[4:]))) is None


def test_small_and_large_produces_are_read_alike() -> None:
    """A frame copied whole to be read and one of which only the head is copied (past
    COPY_MAX_BYTES), each read again by its remembered head, answer as the general path
    does; one whose payload is cut short is not read."""
    for size in (10, COPY_MAX_BYTES, COPY_MAX_BYTES + 1000):
        records = bytes(range(256)) * (size // 256) + b"r" * (size % 256)
        for correlation_id in (1, 300, 1):
            request = ProduceRequest((ProducePartitionData("t", 1, records),), acks=Acks.LEADER)
            header = RequestHeader(request.api_key, 0, correlation_id, "client")
            body = frame_bytes(encode_request(header, request))[4:]
            read = read_immediate(memoryview(bytearray(body)))
            assert read is not None
            immediate, id_end = read
            assert (immediate.topic, immediate.partition, immediate.payload_size) == (
                "t",
                1,
                len(records),
            )
            answer = write_appended(immediate, memoryview(body), id_end, 70000, -1, 0)
            response = ProduceResponse((ProducePartitionResponse("t", 1, 0, None, 70000, -1, 0),))
            assert answer == frame_bytes(encode_response(ResponseHeader(correlation_id), response))
            assert read_immediate(memoryview(bytearray(body[:-1]))) is None


def test_values_stored_at_once_are_the_dataclasses_they_were() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        topic: str
        partition: int
        error: int = 0
        records: bytes = b""

    @stored_at_once
    @dataclasses.dataclass(frozen=True)
    class Stored:
        topic: str
        partition: int
        error: int = 0
        records: bytes = b""

    assert str(inspect.signature(Stored)) == str(inspect.signature(Plain))
    for args, kwargs in [(("a", 1), {}), (("a", 1, 3, b"x"), {}), (("a",), {"records": b"y"})]:
        kwargs = {"partition": 2, **kwargs} if len(args) == 1 else kwargs
        assert vars(Stored(*args, **kwargs)) == vars(Plain(*args, **kwargs))
    value = Stored("a", 1)
    assert value == Stored("a", 1) and hash(value) == hash(Stored("a", 1))
    assert dataclasses.replace(value, error=5) == Stored("a", 1, 5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.error = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        Stored("a")  # a required field missing, as the dataclass would say
