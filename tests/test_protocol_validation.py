"""Bad input on the wire gets an error naming the field, never a crash."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.errors import InvalidRequestError, KafkaError
from odradek.protocol.configs import AlterConfigsRequest, DescribeConfigsResponse
from odradek.protocol.fetch import FetchRequest, FetchResponse
from odradek.protocol.frame import FrameDecoder, FrameError, encode_frame
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.list_offsets import ListOffsetsRequest
from odradek.protocol.messages import REQUEST_TYPES, decode_request
from odradek.protocol.metadata import MetadataRequest, MetadataResponse
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreateTopicsRequest, DeleteTopicsRequest


def fetch_header(**partition_fields) -> dict:
    partition = {"topic": "a", "partition": 0, "fetch_offset": 0, **partition_fields}
    return {"partitions": [{"topic": "a", "partition": 0, "fetch_offset": 0}, partition]}


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ({}, "partitions is missing"),
        ({"partitions": {}}, "partitions must be an array, got dict"),
        ({"partitions": [5]}, r"partitions\[0\] must be a map, got int"),
        (fetch_header(topic=7), r"partitions\[1\].topic must be a string, got int 7"),
        (fetch_header(topic=b"a"), r"partitions\[1\].topic must be a string, got bytes"),
        (fetch_header(partition=-1), r"partitions\[1\].partition must be an int32 >= 0"),
        (fetch_header(partition=2**31), r"partitions\[1\].partition must be an int32 >= 0"),
        (fetch_header(partition=True), r"partitions\[1\].partition must be .* got bool"),
        (fetch_header(partition=1.0), r"partitions\[1\].partition must be .* got float"),
        (fetch_header(fetch_offset="0"), r"partitions\[1\].fetch_offset must be an int64"),
        (fetch_header(fetch_offset=2**63), r"partitions\[1\].fetch_offset must be an int64"),
        (fetch_header(fetch_offset=None), r"partitions\[1\].fetch_offset must be an int64"),
        ({**fetch_header(), "isolation": "dirty"}, "isolation must be 'high_watermark' or"),
        ({**fetch_header(), "isolation": 1}, "isolation must be 'high_watermark' or"),
        ({**fetch_header(), "max_wait_ms": -5}, "max_wait_ms must be an int32 >= 0"),
    ],
)
def test_bad_fetch_fields(header: dict, expected: str) -> None:
    with pytest.raises(InvalidRequestError, match=expected):
        FetchRequest.from_header(header)


def test_missing_nested_field_names_its_path() -> None:
    with pytest.raises(InvalidRequestError, match=r"partitions\[0\].fetch_offset is missing"):
        FetchRequest.from_header({"partitions": [{"topic": "a", "partition": 0}]})


@pytest.mark.parametrize("acks", [2, -2, "all", None])
def test_bad_acks(acks) -> None:
    with pytest.raises(InvalidRequestError, match="acks must be -1 or 0 or 1"):
        ProduceRequest.from_header({"partitions": [], "acks": acks})


def produce_header(*sizes: int) -> dict:
    return {"partitions": [{"topic": "t", "partition": i, "size": s} for i, s in enumerate(sizes)]}


def test_produce_sizes_beyond_the_payload() -> None:
    with pytest.raises(InvalidRequestError, match=r"partitions\[1\].size is 5 but only 2"):
        ProduceRequest.from_header(produce_header(3, 5), memoryview(b"abcde"))


def test_produce_payload_longer_than_the_sizes() -> None:
    with pytest.raises(InvalidRequestError, match="2 payload bytes are not covered"):
        ProduceRequest.from_header(produce_header(3), memoryview(b"abcde"))


@pytest.mark.parametrize("size", [-1, "3", None, 2**31])
def test_bad_records_size(size) -> None:
    with pytest.raises(InvalidRequestError, match=r"partitions\[0\].size must be an int32 >= 0"):
        ProduceRequest.from_header(produce_header(size), memoryview(b"abc"))


def test_missing_records_size_in_produce() -> None:
    with pytest.raises(InvalidRequestError, match=r"partitions\[0\].size is missing"):
        ProduceRequest.from_header({"partitions": [{"topic": "t", "partition": 0}]})


def test_fetch_response_sizes_must_cover_the_payload() -> None:
    header = {"partitions": [{"topic": "t", "partition": 0, "size": 4}]}
    with pytest.raises(InvalidRequestError, match="size is 4 but only 3"):
        FetchResponse.from_header(header, memoryview(b"abc"))


def test_bad_list_offsets_timestamp() -> None:
    header = {"partitions": [{"topic": "t", "partition": 0, "timestamp": -3}]}
    with pytest.raises(InvalidRequestError, match=r"timestamp must be an int64 >= -2"):
        ListOffsetsRequest.from_header(header)


def test_metadata_topics_must_be_strings_or_nil() -> None:
    assert MetadataRequest.from_header({"topics": None}).topics is None
    with pytest.raises(InvalidRequestError, match=r"topics\[1\] must be a string"):
        MetadataRequest.from_header({"topics": ["a", 1]})
    with pytest.raises(InvalidRequestError, match="allow_auto_topic_creation must be a boolean"):
        MetadataRequest.from_header({"allow_auto_topic_creation": 1})


def test_create_topics_config_values_must_be_strings() -> None:
    header = {"topics": [{"name": "a", "configs": {"retention.ms": 1000}}]}
    with pytest.raises(InvalidRequestError, match=r"topics\[0\].configs\['retention.ms'\] must"):
        CreateTopicsRequest.from_header(header)


def test_create_topics_config_values_cannot_be_nil() -> None:
    header = {"topics": [{"name": "a", "configs": {"retention.ms": None}}]}
    with pytest.raises(InvalidRequestError, match="must be a string, got NoneType"):
        CreateTopicsRequest.from_header(header)


def test_alter_configs_takes_nil_to_remove_an_override() -> None:
    header = {"topics": [{"name": "a", "configs": {"retention.ms": None, "x": "1"}}]}
    request = AlterConfigsRequest.from_header(header)
    assert request.topics[0].configs == {"retention.ms": None, "x": "1"}


def test_delete_topics_names_must_be_an_array() -> None:
    with pytest.raises(InvalidRequestError, match="topics must be an array, got str"):
        DeleteTopicsRequest.from_header({"topics": "a"})


def test_bad_response_fields_are_reported_too() -> None:
    with pytest.raises(InvalidRequestError, match=r"broker.port must be a TCP port"):
        MetadataResponse.from_header(
            {"broker": {"node_id": 1, "host": "h", "port": 70000}, "cluster_id": "c", "topics": []}
        )
    entry = {"name": "x", "value": "1", "source": "SOMEWHERE", "is_default": False}
    with pytest.raises(InvalidRequestError, match=r"entries\[0\].source must be 'DYNAMIC_TOPIC"):
        DescribeConfigsResponse.from_header({"topics": [{"name": "a", "entries": [entry]}]})


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ({"v": 0, "id": 1}, "api is missing"),
        ({"api": "produce", "v": 0, "id": 1}, "api must be an int16"),
        ({"api": 0, "id": 1}, "v is missing"),
        ({"api": 0, "v": 0}, "id is missing"),
        ({"api": 0, "v": 0, "id": 2**31}, "id must be an int32"),
        ({"api": 0, "v": 0, "id": 1, "client_id": 5}, "client_id must be a string"),
    ],
)
def test_unanswerable_request_header_is_a_frame_error(header: dict, field: str) -> None:
    with pytest.raises(FrameError, match=f"bad request header: {field}"):
        RequestHeader.from_header(header)


def test_response_header_is_validated() -> None:
    with pytest.raises(InvalidRequestError, match="error must be an int16"):
        ResponseHeader.from_header({"id": 1, "error": "bad"})


api_keys = st.sampled_from(sorted(REQUEST_TYPES))
wire_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(),
        st.text(max_size=5),
        st.binary(max_size=5),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
field_names = st.sampled_from(
    [
        "partitions",
        "topics",
        "topic",
        "partition",
        "size",
        "name",
        "configs",
        "acks",
        "isolation",
        "timestamp",
        "fetch_offset",
        "offset",
        "validate_only",
    ]
)


@given(
    api_key=api_keys,
    body=st.dictionaries(field_names, wire_values, max_size=4),
    payload=st.binary(max_size=20),
)
def test_arbitrary_bodies_decode_or_raise_a_kafka_error(api_key, body, payload) -> None:
    frame_bytes = encode_frame({"api": int(api_key), "v": 0, "id": 1, **body}, payload)
    (frame,) = FrameDecoder().feed(frame_bytes)
    header = RequestHeader.from_header(frame.header)
    try:
        decode_request(header, frame)
    except KafkaError as error:
        assert isinstance(error, InvalidRequestError)


def test_msgpack_extension_types_are_refused_not_crashed_on() -> None:
    header = {"partitions": msgpack.ExtType(5, b"xx")}
    (frame,) = FrameDecoder().feed(encode_frame(header))
    with pytest.raises(InvalidRequestError, match="partitions must be an array, got ExtType"):
        FetchRequest.from_header(frame.header)
