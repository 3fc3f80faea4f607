"""Every advertised version of every Kafka API our codec speaks, checked against an
independent decoder: kafka-python's protocol classes (generated from Kafka's JSON schemas).

Requests and responses filled with distinct values are written by our codec, read by
kafka-python and compared field by field, then read back by ours."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.protocol.kafka.api_versions import ADVERTISED, PRODUCE
from odradek.protocol.kafka.message_codec import (
    EntitySpec,
    FieldSpec,
    PartsWriter,
    decode,
    encode_parts,
    request_spec,
    response_spec,
)

api_message = pytest.importorskip("kafka.protocol.api_message")

INT_LIMITS = {"int8": 100, "uint8": 200, "int16": 30000, "uint16": 60000}


def _classes() -> dict[int, tuple[type, type]]:
    import kafka.protocol.admin  # noqa: F401
    import kafka.protocol.consumer  # noqa: F401
    import kafka.protocol.metadata  # noqa: F401
    import kafka.protocol.producer  # noqa: F401

    found: dict[int, dict[str, type]] = {}
    stack = list(api_message.ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is not None:
            continue
        try:
            key, kind = cls.API_KEY, cls.type
        except Exception:
            continue
        found.setdefault(key, {})[kind] = cls
    return {
        key: (kinds["request"], kinds["response"])
        for key, kinds in found.items()
        if "request" in kinds and "response" in kinds
    }


CLASSES = _classes()
CASES = [
    (api_key, version)
    for api_key, r in ADVERTISED.items()
    for version in range(max(r.min_version, 3 if api_key == PRODUCE else 0), r.max_version + 1)
]


class Sample:
    """Distinct values for every non-tagged field of a spec."""

    def __init__(self) -> None:
        self.counter = 0

    def next(self) -> int:
        self.counter += 1
        return self.counter

    def entity(self, spec: EntitySpec) -> dict[str, Any]:
        return {field.name: self.field(field) for field in spec.fields}

    def field(self, field: FieldSpec) -> Any:
        if field.is_array:
            return [self.one(field) for _ in range(2)]
        return self.one(field)

    def one(self, field: FieldSpec) -> Any:
        if field.entity is not None:
            return self.entity(field.entity)
        kind = field.kafka_type
        n = self.next()
        if kind == "string":
            return f"s{n}"
        if kind in ("bytes", "records"):
            return None if field.nullable else b""
        if kind == "bool":
            return n % 2 == 0
        if kind == "uuid":
            return uuid.UUID(int=n)
        if kind == "float64":
            return n + 0.5
        return n % INT_LIMITS.get(kind, 1 << 30)


def normalise(name: str) -> str:
    return name.removesuffix("_ms")


def theirs_as_dict(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        value = value.to_dict(json=False)
    if isinstance(value, dict):
        return {normalise(k): theirs_as_dict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [theirs_as_dict(item) for item in value]
    return value


def assert_same(ours: Any, theirs: Any, path: str = "") -> None:
    if isinstance(ours, dict):
        for key, value in ours.items():
            name = normalise(key)
            if name not in theirs:  # the two packages shorten a few names differently
                found = [k for k in theirs if name.endswith(k) or k.endswith(name)]
                assert len(found) == 1, f"{path}{name} not in {sorted(theirs)}"
                [name] = found
            assert_same(value, theirs[name], f"{path}{name}.")
    elif isinstance(ours, list):
        assert len(ours) == len(theirs), path
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{path}[{index}].")
    elif isinstance(theirs, set | frozenset):  # a bit field as the set of its bits
        assert theirs == {bit for bit in range(32) if ours >> bit & 1}, path
    elif isinstance(ours, uuid.UUID):
        assert str(theirs) in (str(ours), _kafka_text(ours)) or theirs == ours, path
    elif ours is None or ours == b"":
        assert theirs in (None, b"", [], ""), (path, theirs)
    else:
        assert ours == theirs, (path, ours, theirs)


def _kafka_text(value: uuid.UUID) -> str:
    from odradek.storage.partition_metadata_file import topic_id_text

    return topic_id_text(value)


@pytest.mark.parametrize(("api_key", "version"), CASES)
@pytest.mark.parametrize("kind", ["request", "response"])
def test_every_version_reads_the_same_in_kafka_python(api_key: int, version: int, kind: str):
    if api_key not in CLASSES:
        pytest.skip(f"kafka-python has no classes for API key {api_key}")
    request_class, response_class = CLASSES[api_key]
    theirs_class = request_class if kind == "request" else response_class
    if version > theirs_class.max_version:
        pytest.skip(f"kafka-python knows {theirs_class.__name__} up to v{theirs_class.max_version}")
    spec = request_spec(api_key, version) if kind == "request" else response_spec(api_key, version)
    values = Sample().entity(spec)
    if api_key == 18 and kind == "response":
        values["error_code"] = 0  # with an error every client reads it as v0, by design

    data = b"".join(bytes(part) for part in encode_parts(spec, values))
    theirs = theirs_class[version].decode(data)

    assert_same(values, theirs_as_dict(theirs))
    ours_again = decode(spec, memoryview(data))
    assert plain(ours_again, values) == plain(values)


def plain(value: Any, like: Any = None) -> Any:
    """Values with byte fields as bytes (our reader returns views) and None for empty; the
    tagged fields our reader fills with defaults are left out where ``like`` has none."""
    if isinstance(value, dict):
        keys = value.keys() if like is None else like.keys()
        return {k: plain(value[k], None if like is None else like[k]) for k in keys}
    if isinstance(value, list):
        likes = [None] * len(value) if like is None else like
        return [plain(v, w) for v, w in zip(value, likes, strict=True)]
    if isinstance(value, memoryview | bytes):
        return bytes(value) or None
    return value


@pytest.mark.parametrize("version", range(3, 13))
def test_the_hand_written_produce_reader_agrees_with_the_schema(version: int) -> None:
    from odradek.protocol.kafka.produce_request import read_produce_request

    spec = request_spec(PRODUCE, version)
    values = {
        "transactional_id": None,
        "acks": -1,
        "timeout": 1500,
        "topic_data": [
            {"name": "a", "partition_data": [{"index": 0, "records": b"xyz"}]},
            {"name": "b", "partition_data": [{"index": 1, "records": None}, {"index": 2}]},
        ],
    }
    data = memoryview(b"".join(bytes(part) for part in encode_parts(spec, values)))

    request = read_produce_request(data, 0, version)

    assert (request.transactional_id, request.acks, request.timeout_ms) == (None, -1, 1500)
    # A null batch is read as an empty one (the broker reads both alike).
    assert [(p.topic, p.partition, bytes(p.records)) for p in request.partitions] == [
        ("a", 0, b"xyz"),
        ("b", 1, b""),
        ("b", 2, b""),
    ]
    theirs = CLASSES[PRODUCE][0][version].decode(bytes(data))
    assert [t.name for t in theirs.topic_data] == ["a", "b"]


@pytest.mark.parametrize("version", range(3, 13))
def test_the_hand_written_produce_response_is_the_schemas(version: int) -> None:
    from odradek.errors import RecordError
    from odradek.protocol.kafka.produce_request import write_produce_response
    from odradek.protocol.values.produce import ProducePartitionRefusal, ProducePartitionResponse

    named = (RecordError(0, "no key"), RecordError(3, None))
    results = [
        ProducePartitionResponse("a", 0, 0, None, 17, -1, 3),
        ProducePartitionRefusal("a", 1, 87, "invalid", -1, -1, -1, record_errors=named),
        ProducePartitionResponse("b", 4, 0, None, 5, 1_700_000_000_000, 0),
    ]
    values = {
        "responses": [
            {
                "name": "a",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 0,
                        "base_offset": 17,
                        "log_append_time": -1,
                        "log_start_offset": 3,
                        "error_message": None,
                    },
                    {
                        "index": 1,
                        "error_code": 87,
                        "base_offset": -1,
                        "log_append_time": -1,
                        "log_start_offset": -1,
                        "record_errors": [
                            {"batch_index": 0, "batch_index_error_message": "no key"},
                            {"batch_index": 3, "batch_index_error_message": None},
                        ],
                        "error_message": "invalid",
                    },
                ],
            },
            {
                "name": "b",
                "partition_responses": [
                    {
                        "index": 4,
                        "error_code": 0,
                        "base_offset": 5,
                        "log_append_time": 1_700_000_000_000,
                        "log_start_offset": 0,
                        "error_message": None,
                    },
                ],
            },
        ]
    }
    expected = b"".join(bytes(p) for p in encode_parts(response_spec(PRODUCE, version), values))

    written = bytearray()
    write_produce_response(written, results, version)
    assert written == expected


REQUEST_CASES = [
    (api_key, version)
    for api_key, r in ADVERTISED.items()
    for version in range(max(r.min_version, 3 if api_key == PRODUCE else 0), r.max_version + 1)
]


@pytest.mark.parametrize(("api_key", "version"), REQUEST_CASES)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=120))
def test_any_bytes_decode_or_raise_invalid_request(api_key: int, version: int, data: bytes):
    """Hostile bodies: the reader raises InvalidRequestError and nothing else, and never
    allocates what a length prefix claims before the bytes are there."""
    from odradek.errors import InvalidRequestError
    from odradek.protocol.kafka.produce_request import read_produce_request

    try:
        if api_key == PRODUCE:
            read_produce_request(memoryview(data), 0, version)
        else:
            decode(request_spec(api_key, version), memoryview(data))
    except InvalidRequestError:
        pass


def test_a_huge_array_length_is_refused_before_allocating() -> None:
    import tracemalloc

    from odradek.errors import InvalidRequestError

    tracemalloc.start()
    try:
        with pytest.raises(InvalidRequestError, match="only 0 bytes remain"):
            decode(request_spec(19, 2), memoryview(b"\x05\xf5\xe1\x00"))  # 100M topics
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


# --- the hand-written Fetch reader and writer against the schema codec ------------------------

FETCH = 1
FETCH_VERSIONS = range(ADVERTISED[FETCH].min_version, ADVERTISED[FETCH].max_version + 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=6)
fetch_partitions = st.fixed_dictionaries(
    {
        "partition": int32s,
        "current_leader_epoch": int32s,
        "fetch_offset": int64s,
        "last_fetched_epoch": int32s,
        "log_start_offset": int64s,
        "partition_max_bytes": int32s,
    }
)
fetch_requests = st.fixed_dictionaries(
    {
        "replica_id": int32s,
        "max_wait": int32s,
        "min_bytes": int32s,
        "max_bytes": int32s,
        "isolation_level": st.integers(-128, 127),
        "session_id": int32s,
        "session_epoch": int32s,
        "topics": st.lists(
            st.fixed_dictionaries(
                {"topic": names, "partitions": st.lists(fetch_partitions, max_size=3)}
            ),
            max_size=3,
        ),
        "forgotten_topics_data": st.lists(
            st.fixed_dictionaries({"topic": names, "partitions": st.lists(int32s, max_size=3)}),
            max_size=2,
        ),
        "rack_id": names,
        "cluster_id": st.none() | names,
    }
)


def _schema_fetch(version: int, data: memoryview) -> tuple:
    """What the handler reads of a Fetch request, through the schema codec: the sizes and the
    wait a negative value of which reads as 0 (asks for nothing) as the broker means them."""
    values = decode(request_spec(FETCH, version), data)
    return (
        max(0, values["max_wait"]),
        max(0, values["min_bytes"]),
        max(0, values["max_bytes"]),
        values["isolation_level"],
        values.get("session_id", 0),
        values.get("session_epoch", -1),
        [
            (topic["topic"], p["partition"], p["fetch_offset"], max(0, p["partition_max_bytes"]))
            for topic in values["topics"]
            for p in topic["partitions"]
        ],
    )


def _hand_fetch(version: int, data: memoryview) -> tuple:
    from odradek.protocol.isolation import IsolationLevel
    from odradek.protocol.kafka.fetch_request import read_fetch_request

    request = read_fetch_request(data, 0, version)
    fetch = request
    assert fetch.isolation is (
        IsolationLevel.TXN_COMMITTED
        if request.isolation_level == 1
        else IsolationLevel.HIGH_WATERMARK
    )
    return (
        fetch.max_wait_ms,
        fetch.min_bytes,
        fetch.max_bytes,
        request.isolation_level,
        request.session_id,
        request.session_epoch,
        [(p.topic, p.partition, p.fetch_offset, p.partition_max_bytes) for p in fetch.partitions],
    )


def _both_fetch_readers(version: int, data: bytes) -> tuple[Any, Any]:
    """Each reader's result, or the InvalidRequestError it raised (nothing else may escape)."""
    from odradek.errors import InvalidRequestError

    results = []
    for read in (_schema_fetch, _hand_fetch):
        try:
            results.append(read(version, memoryview(data)))
        except InvalidRequestError as error:
            results.append(error)
    return results[0], results[1]


def _assert_fetch_readers_agree(version: int, data: bytes) -> None:
    from odradek.errors import InvalidRequestError

    schema, hand = _both_fetch_readers(version, data)
    if isinstance(schema, InvalidRequestError) and "cluster_id has length -1" in schema.message:
        # Kafka's ClusterId is a nullable string: the hand-written reader takes a null one
        # as Kafka does (the schema codec reads tagged fields as never null).
        assert not isinstance(hand, Exception) or isinstance(hand, InvalidRequestError)
        return
    if isinstance(schema, InvalidRequestError):
        assert isinstance(hand, InvalidRequestError), (schema.message, hand)
    else:
        assert hand == schema


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=fetch_requests, extra=st.binary(max_size=3))
def test_the_hand_written_fetch_reader_agrees_with_the_schema(
    version: int, values: dict, extra: bytes
) -> None:
    spec = request_spec(FETCH, version)
    data = b"".join(bytes(part) for part in encode_parts(spec, values)) + extra

    schema, hand = _both_fetch_readers(version, data)

    assert not isinstance(schema, Exception)
    assert hand == schema
    # The usual shape is read by a shortcut; the reader that checks every field agrees.
    from odradek.protocol.kafka.fetch_request import _read_checked, read_fetch_request

    assert read_fetch_request(memoryview(data), 0, version) == _read_checked(
        memoryview(data), 0, version
    )


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=fetch_requests, cut=st.integers(0, 400), noise=st.binary(min_size=1, max_size=4))
def test_truncated_and_corrupted_fetch_requests_fail_alike(
    version: int, values: dict, cut: int, noise: bytes
) -> None:
    """Hostile bodies built from valid ones: cut short, or with bytes overwritten (lengths,
    counts, varints, tags): the two readers fail alike or read the same values."""
    spec = request_spec(FETCH, version)
    data = b"".join(bytes(part) for part in encode_parts(spec, values))
    cut = min(cut, len(data))

    _assert_fetch_readers_agree(version, data[:cut])
    _assert_fetch_readers_agree(version, data[:cut] + noise + data[cut + len(noise) :])


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=120))
def test_random_fetch_bytes_fail_alike(version: int, data: bytes) -> None:
    _assert_fetch_readers_agree(version, data)


@pytest.mark.parametrize("version", [4, 12])
def test_a_fetch_claiming_huge_arrays_is_refused_before_allocating(version: int) -> None:
    import tracemalloc

    from odradek.errors import InvalidRequestError
    from odradek.protocol.kafka.fetch_request import read_fetch_request

    flexible = version >= 12
    head = bytes(17 if version < 7 else 25)
    huge = b"\xff\xff\xff\x7f" if flexible else b"\x7f\xff\xff\xff"
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRequestError, match="topics has length"):
            read_fetch_request(memoryview(head + huge), 0, version)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()


class _Region:
    """A payload that is not bytes (as a file region is): it must become a part of its own."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@pytest.mark.parametrize("read_committed", [False, True])
def test_the_hand_written_fetch_response_is_the_schemas(version: int, read_committed: bool):
    from odradek.protocol.kafka.fetch_request import KafkaFetchResponse, write_fetch_response
    from odradek.protocol.values.fetch import FetchPartitionResponse

    region = _Region(300)
    partitions = [
        FetchPartitionResponse("a", 0, 0, None, 17, 3, 16, b"xyz"),
        FetchPartitionResponse("a", 1, 1, "out of range", 5, 2, 5, b""),
        FetchPartitionResponse("b" * 200, 4, 0, None, 9, 0, 9, region),
        FetchPartitionResponse("a", 2, 0, None, 1, 0, 1, None),
        FetchPartitionResponse("c", 7, 0, None, 2, 0, 2, region),
    ]
    topics: list[dict[str, Any]] = []
    for p in partitions:
        entry = {
            "partition_index": p.partition,
            "error_code": p.error,
            "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset,
            "log_start_offset": p.log_start_offset,
            "aborted_transactions": [] if read_committed else None,
            "records": p.records,
        }
        if topics and topics[-1]["topic"] == p.topic:
            topics[-1]["partitions"].append(entry)
        else:
            topics.append({"topic": p.topic, "partitions": [entry]})
    values = {"throttle_time": 250, "error_code": 0, "session_id": 0, "responses": topics}
    expected = encode_parts(response_spec(FETCH, version), values)

    out = PartsWriter()
    write_fetch_response(
        out, KafkaFetchResponse(partitions, read_committed=read_committed), version, throttle_ms=250
    )
    written = out.finish()

    assert [p if p is region else bytes(p) for p in written] == [
        p if p is region else bytes(p) for p in expected
    ]
    assert sum(p is region for p in written) == 2


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_a_fetch_session_error_is_written_as_the_schema_writes_it(version: int) -> None:
    from odradek.protocol.kafka.fetch_request import KafkaFetchResponse, write_fetch_response

    values = {"error_code": 70, "session_id": 0, "responses": []}
    expected = b"".join(bytes(p) for p in encode_parts(response_spec(FETCH, version), values))

    out = PartsWriter()
    write_fetch_response(out, KafkaFetchResponse((), 70), version)
    written = out.finish()

    assert b"".join(bytes(p) for p in written) == expected


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=40)
    | st.builds(
        lambda start, name, tail: start + len(name).to_bytes(2, "big") + name + tail,
        st.binary(min_size=8, max_size=8),
        st.binary(max_size=10),
        st.binary(max_size=3),
    ),
    flexible=st.booleans(),
)
def test_the_request_header_reads_as_its_fields_or_raises(data: bytes, flexible: bool) -> None:
    """The header's shortcut for the usual header against a reading of every field."""
    from odradek.errors import InvalidRequestError
    from odradek.protocol.kafka.byte_reader import ByteReader
    from odradek.protocol.kafka.request_header import read_request_header

    reader = ByteReader(memoryview(data))
    try:
        expected = (
            reader.int16(),
            reader.int16(),
            reader.int32(),
            reader.string(False, True),
        )
        if flexible:
            reader.skip_tagged_fields()
        expected += (reader.position,)
    except InvalidRequestError:
        expected = None
    try:
        header = read_request_header(memoryview(data), flexible)
    except InvalidRequestError:
        assert expected is None
    else:
        assert expected == (
            header.api_key,
            header.api_version,
            header.correlation_id,
            header.client_id,
            header.body_offset,
        )


produce_requests = st.fixed_dictionaries(
    {
        "transactional_id": st.none() | names,
        "acks": st.integers(-32768, 32767),
        "timeout": int32s,
        "topic_data": st.lists(
            st.fixed_dictionaries(
                {
                    "name": names,
                    "partition_data": st.lists(
                        st.fixed_dictionaries(
                            {"index": int32s, "records": st.none() | st.binary(max_size=300)}
                        ),
                        max_size=3,
                    ),
                }
            ),
            max_size=3,
        ),
    }
)


def _produce_read(read: Any, version: int, data: bytes) -> Any:
    from odradek.errors import InvalidRequestError

    try:
        request = read(memoryview(data), 0, version)
    except InvalidRequestError as error:
        return type(error)
    return (
        request.transactional_id,
        request.acks,
        request.timeout_ms,
        [(p.topic, p.partition, bytes(p.records)) for p in request.partitions],
    )


@pytest.mark.parametrize("version", range(3, 13))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=produce_requests, cut=st.integers(0, 1000), noise=st.binary(min_size=1, max_size=4))
def test_the_produce_shortcut_reads_as_the_checked_reader(
    version: int, values: dict, cut: int, noise: bytes
) -> None:
    """The usual Produce is read by a shortcut: on valid, cut short and corrupted bodies it
    reads what the reader that checks every field reads, or fails as it does."""
    from odradek.protocol.kafka.produce_request import _read_checked, read_produce_request

    spec = request_spec(PRODUCE, version)
    data = b"".join(bytes(part) for part in encode_parts(spec, values))
    cut = min(cut, len(data))
    for body in (data, data[:cut], data[:cut] + noise + data[cut + len(noise) :]):
        assert _produce_read(read_produce_request, version, body) == _produce_read(
            _read_checked, version, body
        )


@pytest.mark.parametrize("header_version", [0, 1])
@pytest.mark.parametrize("with_region", [False, True])
def test_a_response_written_after_its_header_is_the_framed_body(
    header_version: int, with_region: bool
) -> None:
    """``start_response`` + ``finish_frame`` (the body written behind room for the size) frame
    a body exactly as ``response_frame`` frames it once written."""
    from odradek.protocol.kafka.fetch_request import KafkaFetchResponse, write_fetch_response
    from odradek.protocol.kafka.request_header import response_frame, start_response
    from odradek.protocol.values.fetch import FetchPartitionResponse

    region = _Region(300)
    response = KafkaFetchResponse(
        [
            FetchPartitionResponse("a", 0, 0, None, 17, 3, 16, region if with_region else b"xyz"),
            FetchPartitionResponse("b", 1, 0, None, 5, 0, 5, None),
        ]
    )
    body = PartsWriter()
    write_fetch_response(body, response, 12)
    expected = response_frame(-7, header_version, body.finish())
    out = start_response(-7, header_version)
    write_fetch_response(out, response, 12)

    framed = out.finish_frame()

    assert _coalesced(framed, region) == _coalesced(expected, region)
    assert len(framed) == (3 if with_region else 1)


def _coalesced(parts: list, region: object) -> list:
    """The parts with neighbouring bytes joined: the same frame whatever pieces carry it."""
    out: list = []
    for part in parts:
        if part is not region and out and out[-1] is not region:
            out[-1] += bytes(part)
        else:
            out.append(part if part is region else bytes(part))
    return out


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@pytest.mark.parametrize("rack_id", ["", "rack-1"])
def test_a_usual_fetch_is_read_by_the_shortcut(version: int, rack_id: str) -> None:
    """A consumer's usual fetch (no forgotten topics, no tagged fields, any rack id) takes the
    shortcut, and reads as the reader that checks every field reads it."""
    from odradek.protocol.kafka.fetch_request import _read_checked, _read_usual

    values = {
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "events",
                "partitions": [
                    {"partition": 0, "fetch_offset": 12, "partition_max_bytes": 1048576},
                    {"partition": 1, "fetch_offset": 7, "partition_max_bytes": -5},
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": rack_id,
    }
    data = memoryview(
        b"".join(bytes(p) for p in encode_parts(request_spec(FETCH, version), values))
    )

    assert _read_usual(data, 0, version) == _read_checked(data, 0, version)
    assert _read_usual(data, 0, version).partitions[1].partition_max_bytes == 0


@pytest.mark.parametrize("version", range(3, 13))
def test_a_usual_produce_is_read_by_the_shortcut(version: int) -> None:
    from odradek.protocol.kafka.produce_request import _read_checked, _read_usual

    values = {
        "transactional_id": None,
        "acks": 1,
        "timeout": 30000,
        "topic_data": [{"name": "events", "partition_data": [{"index": 3, "records": b"r" * 70}]}],
    }
    data = memoryview(
        b"".join(bytes(p) for p in encode_parts(request_spec(PRODUCE, version), values))
    )

    assert _produce_read(_read_usual, version, data) == _produce_read(_read_checked, version, data)


def test_a_repeated_fetch_body_is_read_once_and_the_bodies_kept_are_bounded() -> None:
    """A consumer finding nothing new repeats its body: the request read the first time
    answers it again; a body that differs is read afresh; the bodies kept stay bounded."""
    from odradek.protocol.kafka import fetch_request
    from odradek.protocol.kafka.fetch_request import _read_checked, read_fetch_request

    def body(offset: int) -> bytes:
        values = {
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": "t",
                    "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
        }
        return b"".join(bytes(p) for p in encode_parts(request_spec(FETCH, 12), values))

    first = read_fetch_request(memoryview(body(5)), 0, 12)
    again = read_fetch_request(memoryview(b"head" + body(5)), 4, 12)
    other = read_fetch_request(memoryview(body(6)), 0, 12)

    assert again is first
    assert first == _read_checked(memoryview(body(5)), 0, 12)
    assert other.partitions[0].fetch_offset == 6
    for offset in range(fetch_request.REPEATED_MAX_ENTRIES + 10):
        read_fetch_request(memoryview(body(offset)), 0, 12)
    assert len(fetch_request._repeated) <= fetch_request.REPEATED_MAX_ENTRIES
    large = memoryview(body(7) + bytes(fetch_request.REPEATED_MAX_BODY_BYTES))
    assert read_fetch_request(large, 0, 12) is not read_fetch_request(large, 0, 12)
