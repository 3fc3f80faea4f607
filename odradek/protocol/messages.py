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
from odradek.protocol.schema import Message, Payload
from odradek.protocol.sync_group import SyncGroupRequest, SyncGroupResponse
from odradek.protocol.topics import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

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


_READABLE: dict[tuple[int, int], type[Message]] = {
    (int(api_key), version): request_type
    for api_key, request_type in REQUEST_TYPES.items()
    for version in range(SUPPORTED_VERSIONS[api_key][0], SUPPORTED_VERSIONS[api_key][1] + 1)
}
"""The request type of every supported API key and version, looked up in one step."""


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


def decode_response(api_key: ApiKey, frame: Frame) -> Message:
    """The body of a response to an ``api_key`` request; a request-level error is raised."""
    header = ResponseHeader.from_header(frame.header)
    if header.error:
        raise error_for_code(header.error, header.message or "")
    return RESPONSE_TYPES[api_key].from_header(frame.header, frame.payload)


def _encode(envelope: Message, body: Message | None) -> list[Payload]:
    fields = envelope.encode([])
    parts: list[Payload] = []
    if body is not None:
        fields.update(body.encode(parts))
    return [encode_frame_prefix(fields, sum(map(len, parts))), *parts]
