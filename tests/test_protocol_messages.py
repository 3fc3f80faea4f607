"""Every request and response survives encode -> frame decoder -> decode unchanged."""

from __future__ import annotations

import pytest

from odradek.errors import (
    InvalidRequestError,
    OffsetOutOfRangeError,
    UnknownServerError,
    UnsupportedVersionError,
)
from odradek.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, check_supported
from odradek.protocol.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    supported_api_versions,
)
from odradek.protocol.client_quotas import (
    AlterClientQuotasEntry,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlteredClientQuotas,
    ClientQuotaEntry,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    QuotaEntityPart,
    QuotaFilterComponent,
    QuotaOp,
    QuotaValue,
)
from odradek.protocol.configs import (
    AlterableTopicConfigs,
    AlterConfigsRequest,
    AlterConfigsResponse,
    ConfigEntry,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    TopicConfigs,
)
from odradek.protocol.delete_groups import DeletedGroup, DeleteGroupsRequest, DeleteGroupsResponse
from odradek.protocol.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from odradek.protocol.describe_groups import (
    DescribedGroupEntry,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from odradek.protocol.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    PartitionDescription,
    TopicDescription,
)
from odradek.protocol.fetch import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
)
from odradek.protocol.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from odradek.protocol.frame import Frame, FrameDecoder
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.heartbeat import HeartbeatRequest, HeartbeatResponse
from odradek.protocol.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.join_group import (
    JoinGroupMemberEntry,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
)
from odradek.protocol.kafka.message_codec import read_defaults
from odradek.protocol.kafka_data import (
    KAFKA_DATA_VERSIONS,
    KafkaData,
    kafka_data_request,
    kafka_data_response,
)
from odradek.protocol.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMember,
    LeavingMemberResponse,
)
from odradek.protocol.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from odradek.protocol.list_offsets import (
    EARLIEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from odradek.protocol.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from odradek.protocol.metadata import (
    BrokerMetadata,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.protocol.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from odradek.protocol.offset_delete import (
    OffsetDeletePartitionResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from odradek.protocol.offset_fetch import (
    GroupPartition,
    OffsetFetchGroup,
    OffsetFetchGroupResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from odradek.protocol.produce import (
    Acks,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
)
from odradek.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from odradek.protocol.schema import Message
from odradek.protocol.sync_group import SyncGroupAssignment, SyncGroupRequest, SyncGroupResponse
from odradek.protocol.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    TopicResult,
)

REQUESTS: list[Message] = [
    ProduceRequest(
        (ProducePartitionData("a", 0, b"batch-0"), ProducePartitionData("b", 3, b"batch-3")),
        acks=Acks.LEADER,
        timeout_ms=1500,
    ),
    FetchRequest(
        (FetchPartition("a", 0, 42, 1000), FetchPartition("a", 1, 0)),
        max_wait_ms=100,
        min_bytes=10,
        max_bytes=5000,
        isolation=IsolationLevel.LOG_END,
    ),
    ListOffsetsRequest((ListOffsetsPartition("a", 0, EARLIEST_TIMESTAMP),)),
    MetadataRequest(("a", "b"), allow_auto_topic_creation=False),
    MetadataRequest(),
    ApiVersionsRequest("odradek-python", "0.1.0"),
    CreateTopicsRequest(
        (CreatableTopic("a", 3, {"retention.ms": "1000"}), CreatableTopic("b")),
        validate_only=True,
    ),
    DeleteTopicsRequest(("a", "b")),
    CreatePartitionsRequest((CreatePartitionsTopic("a", 6),), validate_only=True, timeout_ms=500),
    DeleteRecordsRequest((DeleteRecordsPartition("a", 0, 17),)),
    InitProducerIdRequest(),
    InitProducerIdRequest(producer_id=4, producer_epoch=2),
    DescribeConfigsRequest(("a",)),
    AlterConfigsRequest(
        (AlterableTopicConfigs("a", {"retention.ms": "5", "segment.bytes": None}),)
    ),
    DescribeTopicPartitionsRequest(("a",)),
    DescribeTopicPartitionsRequest(),
    FindCoordinatorRequest(("g",)),
    JoinGroupRequest(
        "g", 10000, "consumer", (JoinGroupProtocol("range", b"\x00\x00"),), 30000, "m", "i"
    ),
    SyncGroupRequest("g", 1, "m", None, "consumer", "range", (SyncGroupAssignment("m", b"a"),)),
    HeartbeatRequest("g", 1, "m"),
    LeaveGroupRequest("g", (LeavingMember("m"), LeavingMember("", "instance-1", "bye"))),
    OffsetCommitRequest("g", (OffsetCommitPartition("a", 0, 17, 3, "meta"),), 1, "m"),
    OffsetFetchRequest((OffsetFetchGroup("g", (GroupPartition("a", 0),)), OffsetFetchGroup("h"))),
    ListGroupsRequest(("Stable",)),
    DescribeGroupsRequest(("g",)),
    DeleteGroupsRequest(("g",)),
    OffsetDeleteRequest("g", (GroupPartition("a", 0),)),
    SaslHandshakeRequest("SCRAM-SHA-512"),
    SaslAuthenticateRequest("n,,n=alice,r=abc"),
    SaslAuthenticateRequest("\0alice\0secret"),
    DescribeClientQuotasRequest(
        (QuotaFilterComponent("user", 0, "alice"), QuotaFilterComponent("client-id", 1)), True
    ),
    AlterClientQuotasRequest(
        (
            AlterClientQuotasEntry(
                (QuotaEntityPart("user", None),),
                (QuotaOp("producer_byte_rate", 1024.5), QuotaOp("request_percentage", remove=True)),
            ),
        ),
        validate_only=True,
    ),
]

RESPONSES: list[Message] = [
    ProduceResponse(
        (
            ProducePartitionResponse("a", 0, base_offset=10, log_start_offset=0),
            ProducePartitionResponse("b", 3, error=10, message="too large"),
        )
    ),
    FetchResponse(
        (
            FetchPartitionResponse("a", 0, 0, None, 100, 0, 100, b"records of a-0"),
            FetchPartitionResponse("a", 1, OffsetOutOfRangeError.code, "range is [0, 5]"),
            FetchPartitionResponse("a", 2, high_watermark=7, records=b"partial"),
        )
    ),
    ListOffsetsResponse((ListOffsetsPartitionResponse("a", 0, offset=5, timestamp=1000),)),
    MetadataResponse(
        BrokerMetadata(1, "localhost", 9092),
        "cluster-x",
        (
            TopicMetadata("a", partitions=(PartitionMetadata(0, leader=1),)),
            TopicMetadata("missing", error=3, message="no such topic"),
        ),
    ),
    ApiVersionsResponse(supported_api_versions(), 1, "cluster-x", "0.1.0", 104857600),
    CreateTopicsResponse((CreatableTopicResult("a", num_partitions=3),)),
    DeleteTopicsResponse((TopicResult("a"), TopicResult("b", 3, "unknown"))),
    CreatePartitionsResponse((TopicResult("a"), TopicResult("b", 37, "has 6 partitions"))),
    DeleteRecordsResponse((DeleteRecordsPartitionResponse("a", 0, low_watermark=17),)),
    InitProducerIdResponse(producer_id=4, producer_epoch=3),
    DescribeConfigsResponse(
        (
            TopicConfigs(
                "a",
                entries=(
                    ConfigEntry("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG, False),
                    ConfigEntry("segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG, True),
                ),
            ),
        )
    ),
    AlterConfigsResponse((TopicResult("a"),)),
    DescribeTopicPartitionsResponse(
        (
            TopicDescription(
                "a",
                partitions=(PartitionDescription(0, 0, None, 0, 10, 12, 4096, 1, "/data/0"),),
                configs=(
                    ConfigEntry("cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG, True),
                ),
            ),
        )
    ),
    FindCoordinatorResponse((Coordinator("g", 1, "localhost", 9092),)),
    JoinGroupResponse(
        0,
        None,
        2,
        "consumer",
        "range",
        "m",
        False,
        "m",
        (JoinGroupMemberEntry("m", None, b"\x00"),),
    ),
    JoinGroupResponse(79, "rejoin", member_id="m-1"),
    SyncGroupResponse(0, None, "consumer", "range", b"assignment"),
    HeartbeatResponse(27, "rebalancing"),
    LeaveGroupResponse(members=(LeavingMemberResponse("m", None, 25, "unknown"),)),
    OffsetCommitResponse(
        (OffsetCommitPartitionResponse("a", 0), OffsetCommitPartitionResponse("b", 1, 3, "no"))
    ),
    OffsetFetchResponse(
        (OffsetFetchGroupResponse("g", partitions=(OffsetFetchPartitionResponse("a", 0, 17),)),)
    ),
    ListGroupsResponse(groups=(ListedGroup("g", "consumer", "Stable"),)),
    DescribeGroupsResponse(
        (
            DescribedGroupEntry(
                "g",
                0,
                None,
                "Stable",
                "consumer",
                "range",
                (DescribedGroupMember("m", None, "c", "/127.0.0.1", b"x", b"y"),),
            ),
        )
    ),
    DeleteGroupsResponse((DeletedGroup("g", 68, "not empty"),)),
    OffsetDeleteResponse(partitions=(OffsetDeletePartitionResponse("a", 0, 86, "subscribed"),)),
    SaslHandshakeResponse(("PLAIN", "SCRAM-SHA-256")),
    SaslAuthenticateResponse("r=abcdef,s=c2FsdA==,i=4096"),
    SaslAuthenticateResponse(""),
    DescribeClientQuotasResponse(
        entries=(
            ClientQuotaEntry(
                (QuotaEntityPart("client-id", "app"), QuotaEntityPart("user", "alice")),
                (QuotaValue("consumer_byte_rate", 2048.0),),
            ),
        )
    ),
    AlterClientQuotasResponse(
        (AlteredClientQuotas((QuotaEntityPart("user", "x"),), 42, "unknown quota 'bytes'"),)
    ),
]


def kafka_data(message_type: type[KafkaData], **values: object) -> KafkaData:
    """A Kafka-data message with every field of its Kafka version: the given ones, and the
    defaults (as decoding fills them in)."""
    return message_type({**read_defaults(message_type.spec), **values})


# The APIs whose only messages carry Kafka's data (protocol/kafka_data.py; their own tests are
# in tests/test_protocol_kafka_data.py): one request and one response each.
REQUESTS += [
    kafka_data(kafka_data_request(api_key, 0))
    for api_key, version in KAFKA_DATA_VERSIONS
    if version == 0
]
RESPONSES += [
    kafka_data(kafka_data_response(api_key, 0))
    for api_key, version in KAFKA_DATA_VERSIONS
    if version == 0
]


def one_frame(parts: list) -> Frame:
    (frame,) = FrameDecoder().feed(b"".join(parts))
    return frame


def test_every_api_has_a_request_and_a_response_type() -> None:
    assert set(REQUEST_TYPES) == set(ApiKey) == set(RESPONSE_TYPES)
    assert {type(r).api_key for r in REQUESTS} == set(ApiKey)
    assert {type(r).api_key for r in RESPONSES} == set(ApiKey)


@pytest.mark.parametrize("request_body", REQUESTS, ids=lambda r: type(r).__name__)
def test_request_round_trip(request_body: Message) -> None:
    header = RequestHeader(type(request_body).api_key, 0, 123, "client-1")
    frame = one_frame(encode_request(header, request_body))
    decoded_header = RequestHeader.from_header(frame.header)
    assert decoded_header == header
    decoded = decode_request(decoded_header, frame)
    assert decoded == request_body  # decoded Records are memoryviews, equal to the bytes sent
    assert decoded.payload_parts() == request_body.payload_parts()


@pytest.mark.parametrize("response_body", RESPONSES, ids=lambda r: type(r).__name__)
def test_response_round_trip(response_body: Message) -> None:
    api_key = type(response_body).api_key
    frame = one_frame(encode_response(ResponseHeader(77), response_body))
    assert ResponseHeader.from_header(frame.header) == ResponseHeader(77)
    decoded = decode_response(api_key, frame)
    assert decoded == response_body


def test_produce_payload_is_the_batches_concatenated_in_order() -> None:
    request = REQUESTS[0]
    frame = one_frame(encode_request(RequestHeader(0, 0, 1), request))
    assert bytes(frame.payload) == b"batch-0batch-3"
    assert [p["size"] for p in frame.header["partitions"]] == [7, 7]
    decoded = decode_request(RequestHeader(0, 0, 1), frame)
    assert [bytes(p.records) for p in decoded.partitions] == [b"batch-0", b"batch-3"]


def test_fetch_response_prefix_then_payload_pieces() -> None:
    response = RESPONSES[1]
    prefix, *pieces = encode_response(ResponseHeader(5), response)
    assert pieces == [b"records of a-0", b"partial"]  # empty records add no piece
    frame = one_frame([prefix, *pieces])
    assert [p["size"] for p in frame.header["partitions"]] == [14, 0, 7]


def test_records_may_be_any_sized_object() -> None:
    class FileSlice:
        def __len__(self) -> int:
            return 3

    file_slice = FileSlice()
    response = FetchResponse((FetchPartitionResponse("a", 0, records=file_slice),))
    prefix, piece = encode_response(ResponseHeader(1), response)
    assert piece is file_slice
    frame = one_frame([prefix, b"abc"])
    assert bytes(decode_response(ApiKey.FETCH, frame).partitions[0].records) == b"abc"


def test_request_level_error_response_is_raised_by_the_client() -> None:
    error = UnsupportedVersionError("Fetch v9 is not supported")
    frame = one_frame(encode_response(ResponseHeader.for_error(3, error)))
    assert frame.header == {"id": 3, "error": 35, "message": "Fetch v9 is not supported"}
    with pytest.raises(UnsupportedVersionError, match="Fetch v9"):
        decode_response(ApiKey.FETCH, frame)


def test_error_header_for_a_plain_exception_is_unknown_server_error() -> None:
    header = ResponseHeader.for_error(3, RuntimeError("boom"))
    assert (header.error, header.message) == (UnknownServerError.code, "boom")


def test_handshake_lists_every_supported_api() -> None:
    versions = supported_api_versions()
    assert {v.api_key for v in versions} == set(ApiKey)
    assert ApiVersion(ApiKey.PRODUCE, 0, 0) in versions
    assert all((v.min_version, v.max_version) == SUPPORTED_VERSIONS[v.api_key] for v in versions)


def test_unknown_api_key_is_unsupported() -> None:
    with pytest.raises(UnsupportedVersionError, match="unknown API key 999"):
        check_supported(999, 0)


def test_unknown_version_names_the_supported_range() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"ListOffsets v7 .* v0\.\.v0"):
        check_supported(ApiKey.LIST_OFFSETS, 7)


def test_decode_request_checks_the_version_before_the_body() -> None:
    frame = one_frame(encode_request(RequestHeader(1, 4, 1), FetchRequest(())))
    with pytest.raises(UnsupportedVersionError):
        decode_request(RequestHeader.from_header(frame.header), frame)


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    header = {**MetadataRequest().to_header(), "some_future_field": [1, 2]}
    assert MetadataRequest.from_header(header) == MetadataRequest()


def test_optional_fields_take_their_defaults_when_absent() -> None:
    partition = {"topic": "a", "partition": 0, "fetch_offset": 3}
    decoded = FetchRequest.from_header({"partitions": [partition]})
    assert decoded == FetchRequest((FetchPartition("a", 0, 3),))


def test_decoded_enums_are_enum_members() -> None:
    decoded = ProduceRequest.from_header({"partitions": [], "acks": 0})
    assert decoded.acks is Acks.NONE
    assert FetchRequest.from_header({"partitions": [], "isolation": "log_end"}).isolation is (
        IsolationLevel.LOG_END
    )


def test_request_payload_beyond_the_sizes_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="3 payload bytes are not covered"):
        MetadataRequest.from_header({}, memoryview(b"abc"))


@pytest.mark.parametrize("value", ["1024", float("nan"), float("inf"), True, None])
def test_a_float_field_takes_finite_numbers_only(value: object) -> None:
    entry = {"entity": [{"entity_type": "user"}], "ops": [{"key": "producer_byte_rate"}]}
    entry["ops"][0]["value"] = value
    with pytest.raises(InvalidRequestError, match=r"entries\[0\].ops\[0\].value must be"):
        AlterClientQuotasRequest.from_header({"entries": [entry]})


def test_a_float_field_takes_a_whole_number_written_as_an_integer() -> None:
    entry = {"entity": [{"entity_type": "user"}], "ops": [{"key": "k", "value": 1024}]}
    decoded = AlterClientQuotasRequest.from_header({"entries": [entry]})
    assert decoded.entries[0].ops[0].value == 1024.0
    assert type(decoded.entries[0].ops[0].value) is float
