"""Requests and responses as frames: the registry of bodies by API key, and the codec entry points.

A broker reads a request with :meth:`RequestHeader.from_header` then :func:`decode_request`, and
answers with :func:`encode_response`; a client does the mirror image with :func:`encode_request`
and :func:`decode_response`. The encoders return the frame as a list of parts, the prefix first
and then the payload pieces, ready for ``transport.writelines`` (or ``sendfile`` for pieces that
are file slices rather than bytes).
"""

from __future__ import annotations

from odradek.errors import error_for_code
from odradek.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, check_supported
from odradek.protocol.api_versions import ApiVersionsRequest, ApiVersionsResponse
from odradek.protocol.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from odradek.protocol.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from odradek.protocol.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from odradek.protocol.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from odradek.protocol.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from odradek.protocol.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from odradek.protocol.fetch import FetchRequest, FetchResponse
from odradek.protocol.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from odradek.protocol.frame import Frame, encode_frame_prefix
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.heartbeat import HeartbeatRequest, HeartbeatResponse
from odradek.protocol.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from odradek.protocol.join_group import JoinGroupRequest, JoinGroupResponse
from odradek.protocol.kafka_data import (
    KAFKA_DATA_VERSIONS,
    kafka_data_request,
    kafka_data_response,
)
from odradek.protocol.leave_group import LeaveGroupRequest, LeaveGroupResponse
from odradek.protocol.list_groups import ListGroupsRequest, ListGroupsResponse
from odradek.protocol.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from odradek.protocol.metadata import MetadataRequest, MetadataResponse
from odradek.protocol.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from odradek.protocol.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from odradek.protocol.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from odradek.protocol.produce import ProduceRequest, ProduceResponse
from odradek.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from odradek.protocol.schema import Message
from odradek.protocol.sync_group import SyncGroupRequest, SyncGroupResponse
from odradek.protocol.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from odradek.protocol.values.wire_types import Payload

REQUEST_TYPES: dict[ApiKey, type[Message]] = {
    cls.api_key: cls
    for cls in (
        ProduceRequest,
        FetchRequest,
        ListOffsetsRequest,
        MetadataRequest,
        ApiVersionsRequest,
        CreateTopicsRequest,
        DeleteTopicsRequest,
        DeleteRecordsRequest,
        InitProducerIdRequest,
        CreatePartitionsRequest,
        DescribeConfigsRequest,
        AlterConfigsRequest,
        DescribeTopicPartitionsRequest,
        FindCoordinatorRequest,
        JoinGroupRequest,
        SyncGroupRequest,
        HeartbeatRequest,
        LeaveGroupRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
        ListGroupsRequest,
        DescribeGroupsRequest,
        DeleteGroupsRequest,
        OffsetDeleteRequest,
        DescribeClientQuotasRequest,
        AlterClientQuotasRequest,
        SaslHandshakeRequest,
        SaslAuthenticateRequest,
    )
}
"""odradek's own request message of each API (its v0), or its Kafka-data message (v0) for an
API that has no other."""

RESPONSE_TYPES: dict[ApiKey, type[Message]] = {
    cls.api_key: cls
    for cls in (
        ProduceResponse,
        FetchResponse,
        ListOffsetsResponse,
        MetadataResponse,
        ApiVersionsResponse,
        CreateTopicsResponse,
        DeleteTopicsResponse,
        DeleteRecordsResponse,
        InitProducerIdResponse,
        CreatePartitionsResponse,
        DescribeConfigsResponse,
        AlterConfigsResponse,
        DescribeTopicPartitionsResponse,
        FindCoordinatorResponse,
        JoinGroupResponse,
        SyncGroupResponse,
        HeartbeatResponse,
        LeaveGroupResponse,
        OffsetCommitResponse,
        OffsetFetchResponse,
        ListGroupsResponse,
        DescribeGroupsResponse,
        DeleteGroupsResponse,
        OffsetDeleteResponse,
        DescribeClientQuotasResponse,
        AlterClientQuotasResponse,
        SaslHandshakeResponse,
        SaslAuthenticateResponse,
    )
}

for _api_key, _version in KAFKA_DATA_VERSIONS:
    if _version == 0:
        REQUEST_TYPES[_api_key] = kafka_data_request(_api_key, 0)
        RESPONSE_TYPES[_api_key] = kafka_data_response(_api_key, 0)

_READABLE: dict[tuple[int, int], type[Message]] = {
    **{(int(api_key), 0): request_type for api_key, request_type in REQUEST_TYPES.items()},
    **{
        (int(key), version): kafka_data_request(key, version)
        for key, version in KAFKA_DATA_VERSIONS
    },
}
"""The request type of every supported API key and version, looked up in one step."""

_RESPONSES: dict[tuple[int, int], type[Message]] = {
    **{(int(api_key), 0): response_type for api_key, response_type in RESPONSE_TYPES.items()},
    **{
        (int(key), version): kafka_data_response(key, version)
        for key, version in KAFKA_DATA_VERSIONS
    },
}
assert all(
    SUPPORTED_VERSIONS[ApiKey(key)][0] <= version <= SUPPORTED_VERSIONS[ApiKey(key)][1]
    for key, version in _READABLE
)


def encode_request(header: RequestHeader, request: Message) -> list[Payload]:
    """The frame of ``request``: its prefix, then its payload pieces."""
    return _encode(header, request)


def decode_request(header: RequestHeader, frame: Frame) -> Message:
    """The body of the request whose envelope is ``header``.

    Raises UnsupportedVersionError for an unknown API or version (the message gives the
    supported range) and InvalidRequestError for a bad field; both are answered with
    :meth:`ResponseHeader.for_error` and the connection stays open.
    """
    request_type = _READABLE.get((header.api_key, header.api_version))
    if request_type is None:
        check_supported(header.api_key, header.api_version)  # raises, saying what is
    return request_type.from_header(frame.header, frame.payload)


def encode_response(header: ResponseHeader, response: Message | None = None) -> list[Payload]:
    """The frame answering a request: the envelope plus the body (none for a request error)."""
    return _encode(header, response)


def response_type(api_key: int, api_version: int = 0) -> type[Message]:
    """The response message of ``api_version`` of ``api_key``."""
    return _RESPONSES[api_key, api_version]


def decode_response(api_key: ApiKey, frame: Frame, api_version: int = 0) -> Message:
    """The body of a response to an ``api_key`` request of ``api_version``; a request-level
    error is raised."""
    header = ResponseHeader.from_header(frame.header)
    if header.error:
        raise error_for_code(header.error, header.message or "")
    return _RESPONSES[api_key, api_version].from_header(frame.header, frame.payload)


def _encode(envelope: Message, body: Message | None) -> list[Payload]:
    fields = envelope.encode([])
    parts: list[Payload] = []
    if body is not None:
        fields.update(body.encode(parts))
    return [encode_frame_prefix(fields, sum(map(len, parts))), *parts]
