"""KafkaRequestHandler: Kafka-protocol requests answered by the broker's one set of handlers.

Each Kafka request is turned into the body odradek's own protocol would carry
(ProduceRequest, FetchRequest, ...) and handed to ApiRouter, the same handlers and the same
validation and append path as msgpack requests; their answer is turned back into the Kafka
response of the request's version. Produce and Fetch, most of a broker's requests, are read
straight into those bodies and their responses written behind the response header, in one
piece of bytes unless records go out by ``sendfile``; the most common of them (one partition
at acks 0 or 1, or a fetch finding nothing new) are answered before any of that
(``answer_at_once``), and one partition at acks=all is appended so and its ready answer handed
to the connection to send once fsync'ed (``DurableAnswer``). What only Kafka's protocol has
(ApiVersions' list, fetch sessions, max-timestamp lookups, DescribeCluster) is answered here;
topic administration, configs and consumer groups are answered by KafkaTopicApis,
KafkaConfigApis and KafkaGroupApis.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from types import MappingProxyType
from typing import Any

from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    KafkaError,
    RebootstrapRequiredError,
    TopicAuthorizationFailedError,
    UnknownLeaderEpochError,
    UnknownTopicIdError,
    UnsupportedVersionError,
    error_code_for,
)
from odradek.network.session import Session
from odradek.protocol.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from odradek.protocol.fetch import FetchPartitionResponse
from odradek.protocol.header import RequestHeader
from odradek.protocol.init_producer_id import InitProducerIdRequest
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka import fetch_request, produce_request
from odradek.protocol.kafka.api_versions import (
    ADVERTISED,
    request_flexibility,
    response_header_version,
)
from odradek.protocol.kafka.fetch_request import (
    KafkaFetchRequest,
    KafkaFetchResponse,
    read_fetch_request,
    read_immediate_fetch,
    write_fetch_response,
    write_nothing_new,
)
from odradek.protocol.kafka.message_codec import (
    ZERO_UUID,
    Payload,
    decode,
    encode_parts,
    request_spec,
    response_spec,
)
from odradek.protocol.kafka.produce_request import (
    KafkaProduceRequest,
    read_immediate_produce,
    read_produce_request,
    write_appended,
    write_produce_response,
)
from odradek.protocol.kafka.request_header import (
    read_client_id,
    read_request_start,
    response_frame,
    start_response,
)
from odradek.protocol.list_offsets import ListOffsetsPartition, ListOffsetsRequest
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import (
    Acks,
    ProducePartitionResponse,
    ProduceRequest,
)
from odradek.protocol.schema import Message
from odradek.record.record_batch import starts_transactional
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.admin.admin_manager import AdminManager
from odradek.server.admin.topic_ids import TopicIds
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.durable_answer import DurableAnswer
from odradek.server.kafka.acls import KafkaAclApis
from odradek.server.kafka.configs import KafkaConfigApis
from odradek.server.kafka.groups import KafkaGroupApis
from odradek.server.kafka.partition_admin import KafkaPartitionAdminApis
from odradek.server.kafka.producers import KafkaProducerApis
from odradek.server.kafka.quotas import KafkaQuotaApis
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.kafka.security import KafkaSecurityApis
from odradek.server.kafka.topics import KafkaTopicApis
from odradek.server.kafka.transactions import KafkaTransactionApis
from odradek.server.quota.client_quota_admin import ClientQuotaAdmin
from odradek.server.quota.client_quotas import ClientQuotas
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext

UNSUPPORTED_VERSION = UnsupportedVersionError.code
TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailedError.code
INVALID_REQUEST = InvalidRequestError.code
FETCH_SESSION_ID_NOT_FOUND = FetchSessionIdNotFoundError.code
FENCED_LEADER_EPOCH = FencedLeaderEpochError.code
UNKNOWN_LEADER_EPOCH = UnknownLeaderEpochError.code
LEADER_EPOCH = 0
"""The partition leader epoch of every partition: the single broker leads each partition in
epoch 0 for ever (docs/kafka-compatibility.md, "Leader epochs")."""
MAX_TIMESTAMP = -3
READ_COMMITTED = 1
FIRST_SERVED_PRODUCE = ADVERTISED[apis.PRODUCE].min_served
ACKS = {acks.value: acks for acks in Acks}
# (Members at hand: looking one up on its enum class costs about a call, per request.)
_ACKS_NONE = Acks.NONE
_ACKS_ALL = Acks.ALL


class KafkaRequestHandler:
    """Decodes Kafka requests and answers them through ApiRouter."""

    def __init__(
        self,
        router: ApiRouter,
        replica_manager: ReplicaManager,
        admin_manager: AdminManager,
        topic_ids: TopicIds,
        broker_config: BrokerConfig,
        node_id: int,
        endpoint: Callable[[RequestContext], tuple[str, int]],
        security: KafkaSecurityApis | None = None,
        authorizer: Authorizer | None = None,
        executor: Executor | None = None,
        group_requests: KafkaGroupApis | None = None,
        quotas: ClientQuotas | None = None,
        partition_admin: KafkaPartitionAdminApis | None = None,
        transactions: KafkaTransactionApis | None = None,
    ) -> None:
        self._apis = router
        self._transactions = transactions
        self._quotas = quotas
        self._replicas = replica_manager
        self._admin = admin_manager
        self._topic_ids = topic_ids
        self._broker_config = broker_config
        self._node_id = node_id
        self._endpoint = endpoint
        self._authorizer = authorizer or Authorizer()
        executor = executor or ThreadPoolExecutor(1, thread_name_prefix="odradek-acls")
        self._handlers: dict[int, KafkaHandler] = {
            **(security.handlers() if security is not None else {}),
            **KafkaAclApis(self._authorizer, executor).handlers(),
            **KafkaTopicApis(self._call, topic_ids, self._authorizer).handlers(),
            **KafkaConfigApis(self._call, broker_config, node_id, self._authorizer).handlers(),
            **(group_requests.handlers() if group_requests is not None else {}),
            **(partition_admin.handlers() if partition_admin is not None else {}),
            **(transactions.handlers() if transactions is not None else {}),
            **KafkaProducerApis(replica_manager, self._authorizer).handlers(),
            **(
                KafkaQuotaApis(ClientQuotaAdmin(quotas, self._authorizer, executor)).handlers()
                if quotas is not None
                else {}
            ),
            apis.API_VERSIONS: self._api_versions,
            apis.METADATA: self._metadata,
            apis.PRODUCE: self._produce,
            apis.FETCH: self._fetch,
            apis.LIST_OFFSETS: self._list_offsets,
            apis.DELETE_RECORDS: self._delete_records,
            apis.DESCRIBE_CLUSTER: self._describe_cluster,
            apis.INIT_PRODUCER_ID: self._init_producer_id,
            apis.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
        }

    @property
    def served_api_keys(self) -> frozenset[int]:
        """The API keys this router answers (Kafka's protocol)."""
        return frozenset(self._handlers)

    @property
    def handlers(self) -> Mapping[int, KafkaHandler]:
        """The handler of each API served (read-only): what answers the msgpack protocol's
        Kafka-data requests too (server/msgpack/kafka_data.py)."""
        return MappingProxyType(self._handlers)

    # --- decoding ----------------------------------------------------------------------------

    def decode(self, frame: memoryview) -> KafkaRequest:
        """The request in ``frame`` (without its size prefix).

        An API or version not served comes back with a ``refusal``; raises
        InvalidRequestError when the header or body cannot be read (the connection closes).
        """
        api_key, api_version, correlation_id = read_request_start(frame)
        flexible = request_flexibility(api_key, api_version)
        if flexible is None:
            message = (
                f"unknown API key {api_key}"
                if api_key not in ADVERTISED
                else f"{apis.api_name(api_key)} v{api_version} is not supported; supported "
                f"versions are v{ADVERTISED[api_key].min_version}.."
                f"v{ADVERTISED[api_key].max_version}"
            )
            return KafkaRequest(
                api_key, api_version, correlation_id, refusal=UnsupportedVersionError(message)
            )
        client_id, body_offset = read_client_id(frame, flexible)
        if api_key == apis.PRODUCE:
            if api_version < FIRST_SERVED_PRODUCE:
                body = _legacy_produce(frame, body_offset)
            else:
                body = read_produce_request(frame, body_offset, api_version)
        elif api_key == apis.FETCH:
            body = read_fetch_request(frame, body_offset, api_version)
        else:
            body = decode(request_spec(api_key, api_version), frame, body_offset)
        return KafkaRequest(api_key, api_version, correlation_id, client_id, body)

    # --- answering at once -------------------------------------------------------------------

    def answer_at_once(self, frame: memoryview) -> bytes | DurableAnswer | None:
        """The response frame (b"" for acks=0: none) of a request answered here and now in a
        few steps: a Produce v3+ of one partition at acks 0 or 1 whose append is done at once,
        or a Fetch of one partition that may not wait and finds nothing new (its API key is
        ``frame[1]``); at acks=all, the appended Produce's DurableAnswer, to send once its
        fsync ends (``_durable_answer``). None for anything else (another API or shape, an
        error, a queued append, a quota or an authorizer in force): nothing was done, and
        ``decode`` and ``handle`` take it. The answer is the general path's (tests hold the
        two to each other)."""
        if frame[0] or not self._apis.answers_at_once:  # (an authorizer or quotas have a say)
            return None
        api_key = frame[1]
        if api_key == apis.PRODUCE:
            produce = read_immediate_produce(frame)
            if produce is None:
                return None
            version, correlation_id, topic, partition, records, acks, timeout_ms = produce
            if starts_transactional(records):
                return None  # a transactional batch: checked against its transaction
            if acks is _ACKS_ALL:
                return self._durable_answer(produce)
            info = self._replicas.append_at_once(topic, partition, records, acks)
            if info is None:
                return None
            if acks is _ACKS_NONE:
                return b""
            return write_appended(
                version,
                correlation_id,
                topic,
                partition,
                info.first_offset,
                info.log_append_time_ms,
                info.log_start_offset,
            )
        if api_key == apis.FETCH:
            read = read_immediate_fetch(frame)
            if read is None:
                return None
            correlation_id, fetch = read
            offsets = self._replicas.nothing_new(
                fetch.topic, fetch.partition, fetch.fetch_offset, fetch.isolation
            )
            if offsets is None:
                return None
            return write_nothing_new(fetch, correlation_id, *offsets)
        return None

    def answer_when_durable(self, frame: memoryview) -> DurableAnswer | None:
        """``answer_at_once`` of a Produce of one partition at acks=all alone: what may be
        answered at once behind answers still waiting for their fsync (they go out in order,
        as each fsync ends). None for anything else: ``decode`` and ``handle`` take it."""
        if frame[0] or frame[1] != apis.PRODUCE or not self._apis.answers_at_once:
            return None
        produce = read_immediate_produce(frame)
        if produce is None or produce[5] is not _ACKS_ALL:
            return None
        return self._durable_answer(produce)

    def _durable_answer(
        self, produce: tuple[int, int, str, int, memoryview, Acks, int]
    ) -> DurableAnswer | None:
        """The acks=all Produce ``produce`` (as ``read_immediate_produce`` reads it) appended
        here and now, its answer to go out once fsync'ed; None when it is not appended (nothing
        is written then) or has no time to wait (``timeout_ms`` 0: the general path answers)."""
        version, correlation_id, topic, partition, records, _, timeout_ms = produce
        if timeout_ms <= 0 or starts_transactional(records):
            return None  # (a transactional batch is checked against its transaction first)
        appended = self._replicas.append_durably_at_once(topic, partition, records)
        if appended is None:
            return None
        leader, info = appended
        response = write_appended(
            version,
            correlation_id,
            topic,
            partition,
            info.first_offset,
            info.log_append_time_ms,
            info.log_start_offset,
        )
        return DurableAnswer(
            response,
            version,
            correlation_id,
            topic,
            partition,
            leader,
            info.last_offset,
            timeout_ms,
        )

    def durable_answer_failed(self, answer: DurableAnswer, error: BaseException) -> list[Payload]:
        """The response frame saying ``error`` (the fsync failed, or did not end in time) to
        the Produce ``answer`` waited for, as the general path says it."""
        message = error.message if isinstance(error, KafkaError) else str(error)
        result = ProducePartitionResponse(
            answer.topic, answer.partition_index, error_code_for(error), message
        )
        version = answer.version
        header_version = 1 if version >= produce_request.FIRST_FLEXIBLE_VERSION else 0
        out = start_response(answer.correlation_id, header_version)
        write_produce_response(out.buffer, [result], version, 0)
        return out.finish_frame()

    # --- answering ---------------------------------------------------------------------------

    async def handle(
        self, peer: str, request: KafkaRequest, session: Session | None = None
    ) -> list[Payload] | None:
        """The response frame, or None when the request wants none (acks=0). ``session``
        says who sent it (principal, listener) for authorization."""
        if request.refusal is not None:  # ApiVersions of an unknown version: v0, full list
            body = self._api_versions_body(request.refusal.code)
            return self._frame(request, body, version=0)
        context = RequestContext(
            peer,
            RequestHeader(
                request.api_key, request.api_version, request.correlation_id, request.client_id
            ),
            session,
        )
        quotas = self._quotas
        if quotas is not None and quotas.enabled:  # --- quota hook
            return await self._handle_with_quotas(quotas, request, context)
        body = await self._handlers[request.api_key](request, context)
        if body is None:
            return None
        return self._frame(request, body)

    async def _handle_with_quotas(
        self, quotas: ClientQuotas, request: KafkaRequest, context: RequestContext
    ) -> list[Payload] | None:
        """Answer, then count the request against its client's quotas: its record bytes
        (Produce), the response's record bytes (Fetch) or the time it took (the others);
        the response carries the throttle time and the connection is muted that long."""
        api_key = request.api_key
        produced = 0
        if api_key == apis.PRODUCE:
            produced = sum(len(p.records) for p in request.body.partitions)
        body, throttle_ms, fetched = await quotas.answer_counted(
            context,
            lambda: self._handlers[api_key](request, context),
            produced,
            _fetched_bytes if api_key == apis.FETCH else None,
            timed=api_key not in (apis.PRODUCE, apis.FETCH),
        )
        if body is None:
            return None
        if throttle_ms and fetched:  # answered without its records, as Kafka does
            body = body._replace(
                partitions=[dataclasses.replace(p, records=b"") for p in body.partitions]
            )
        if throttle_ms and isinstance(body, dict):
            body["throttle_time"] = throttle_ms
        return self._frame(request, body, throttle_ms=throttle_ms)

    async def _call(self, context: RequestContext, message: Message) -> Any:
        """``message`` through ApiRouter, under its own API key (a Kafka request may become
        another API's message: AlterConfigs reads the configs first)."""
        header = context.header
        if message.api_key != header.api_key:
            own = RequestHeader(
                message.api_key, header.api_version, header.correlation_id, header.client_id
            )
            context = RequestContext(context.peer, own, context.session)
        return await self._apis.handle(context, message, count_quotas=False)

    def _frame(
        self,
        request: KafkaRequest,
        body: dict[str, Any],
        version: int | None = None,
        throttle_ms: int = 0,
    ) -> list[Payload]:
        api_key = request.api_key
        version = request.api_version if version is None else version
        if api_key == apis.FETCH:
            header_version = 1 if version >= fetch_request.FIRST_FLEXIBLE_VERSION else 0
            out = start_response(request.correlation_id, header_version)
            write_fetch_response(out, body, version, throttle_ms)
            return out.finish_frame()
        if api_key == apis.PRODUCE and version >= FIRST_SERVED_PRODUCE:
            header_version = 1 if version >= produce_request.FIRST_FLEXIBLE_VERSION else 0
            out = start_response(request.correlation_id, header_version)
            write_produce_response(out.buffer, body, version, throttle_ms)
            return out.finish_frame()
        if api_key == apis.PRODUCE:
            parts = _legacy_produce_response(body, version)
        else:
            parts = encode_parts(response_spec(api_key, version), body)
        header_version = response_header_version(api_key, version)
        return response_frame(request.correlation_id, header_version, parts)

    # --- ApiVersions, Metadata, DescribeCluster ------------------------------------------------

    def _api_versions_body(self, error_code: int = 0) -> dict[str, Any]:
        return {
            "error_code": error_code,
            "api_keys": [
                {"api_key": r.api_key, "min_version": r.min_version, "max_version": r.max_version}
                for r in ADVERTISED.values()
            ],
            "supported_features": [
                {
                    "name": apis.TRANSACTION_VERSION_FEATURE,
                    "min_version": 0,
                    "max_version": apis.FINALIZED_TRANSACTION_VERSION,
                }
            ],
            "finalized_features_epoch": apis.FINALIZED_FEATURES_EPOCH,
            "finalized_features": [
                {
                    "name": apis.TRANSACTION_VERSION_FEATURE,
                    "max_version_level": apis.FINALIZED_TRANSACTION_VERSION,
                    "min_version_level": apis.FINALIZED_TRANSACTION_VERSION,
                }
            ],
        }

    async def _api_versions(self, request: KafkaRequest, _context: RequestContext) -> dict:
        if request.api_version >= 5:  # KIP-1242: the cluster and node the client means
            cluster_id, node_id = request.body["cluster_id"], request.body["node_id"]
            if (cluster_id is None) != (node_id == -1):
                return {"error_code": INVALID_REQUEST, "api_keys": []}
            if cluster_id is not None and (
                cluster_id != self._admin.cluster_id or node_id != self._node_id
            ):
                return {"error_code": RebootstrapRequiredError.code, "api_keys": []}
        return self._api_versions_body()

    def _broker(self, context: RequestContext) -> dict[str, Any]:
        host, port = self._endpoint(context)
        return {"node_id": self._node_id, "broker_id": self._node_id, "host": host, "port": port}

    async def _metadata(self, request: KafkaRequest, context: RequestContext) -> dict:
        """Kafka's answer, authorized by ApiRouter; a topic asked for by id (v12) is named
        only to a principal that may describe it (else TOPIC_AUTHORIZATION_FAILED with a null
        name: the id is not secret, the name is), an unknown id is UNKNOWN_TOPIC_ID."""
        body = request.body
        topics = body["topics"]
        if request.api_version == 0 and not topics:
            topics = None
        names = None
        asked_by_id: dict[str, uuid.UUID] = {}
        unknown_ids: list[uuid.UUID] = []
        if topics is not None:
            names = []
            for topic in topics:
                topic_id = topic.get("topic_id")
                if topic["name"] is None and topic_id not in (None, ZERO_UUID):
                    name = await self._topic_ids.resolve(topic_id)
                    if name is None:
                        unknown_ids.append(topic_id)
                        continue
                    asked_by_id[name] = topic_id
                    names.append(name)
                else:
                    names.append(topic["name"] or "")
            names = tuple(names)
        auto_create = body.get("allow_auto_topic_creation", True)
        response = await self._call(context, MetadataRequest(names, auto_create))
        await self._topic_ids.ensure(
            {t.name: len(t.partitions) for t in response.topics if not t.error}
        )
        topic_entries: list[dict[str, Any]] = [
            {
                "error_code": UnknownTopicIdError.code,
                "name": None,
                "topic_id": topic_id,
                "partitions": [],
            }
            for topic_id in unknown_ids
        ]
        with_operations = body.get("include_topic_authorized_operations", False)
        for topic in response.topics:
            partitions = [
                {
                    "error_code": p.error,
                    "partition_index": p.partition,
                    "leader_id": p.leader,
                    "leader_epoch": LEADER_EPOCH if p.leader >= 0 else -1,
                    "replica_nodes": [p.leader] if p.leader >= 0 else [],
                    "isr_nodes": [p.leader] if p.leader >= 0 else [],
                }
                for p in topic.partitions
            ]
            entry = {
                "error_code": topic.error,
                "name": topic.name,
                "topic_id": self._topic_ids.get(topic.name) if not topic.error else None,
                "partitions": partitions,
            }
            if topic.error == TOPIC_AUTHORIZATION_FAILED:
                if topic.name in asked_by_id:
                    entry.update(name=None, topic_id=asked_by_id[topic.name])
            elif with_operations:
                entry["topic_authorized_operations"] = self._authorizer.authorized_operations(
                    context, ResourceType.TOPIC, topic.name
                )
            topic_entries.append(entry)
        answer = {
            "brokers": [self._broker(context)],
            "cluster_id": response.cluster_id,
            "controller_id": self._node_id,
            "topics": topic_entries,
        }
        if body.get("include_cluster_authorized_operations", False):  # v8-10
            answer["cluster_authorized_operations"] = self._cluster_operations(context)
        return answer

    def _cluster_operations(self, context: RequestContext) -> int:
        """What the principal may do on the cluster, as a bit field: 0 without Describe."""
        if not self._authorizer.may(context, AclOperation.DESCRIBE, "", ResourceType.CLUSTER):
            return 0
        return self._authorizer.authorized_operations(context, ResourceType.CLUSTER, "")

    async def _describe_cluster(self, request: KafkaRequest, context: RequestContext) -> dict:
        """Answered to anyone; the cluster's authorized operations (when asked) are the
        principal's, 0 without Describe on the cluster, as Kafka answers."""
        answer = {
            "cluster_id": self._admin.cluster_id,
            "controller_id": self._node_id,
            "brokers": [self._broker(context)],
        }
        if request.body.get("include_cluster_authorized_operations", False):
            answer["cluster_authorized_operations"] = self._cluster_operations(context)
        return answer

    # --- InitProducerId, OffsetForLeaderEpoch -------------------------------------------------

    async def _init_producer_id(self, request: KafkaRequest, context: RequestContext) -> dict:
        """A transactional id's producer from the transaction coordinator; an idempotent
        producer's (no transactional id) from the producer id manager."""
        body = request.body
        if body["transactional_id"] is not None and self._transactions is not None:
            return await self._transactions.init_producer_id(request, context)
        try:
            response = await self._call(
                context,
                InitProducerIdRequest(
                    body["transactional_id"],
                    _milliseconds(body["transaction_timeout"]),
                    body.get("producer_id", -1),
                    body.get("producer_epoch", -1),
                ),
            )
        except KafkaError as error:
            return {"error_code": error.code, "producer_id": -1, "producer_epoch": -1}
        return {
            "error_code": 0,
            "producer_id": response.producer_id,
            "producer_epoch": response.producer_epoch,
        }

    async def _offset_for_leader_epoch(
        self, request: KafkaRequest, context: RequestContext
    ) -> dict:
        """Where each asked epoch ends (Kafka's ``lastOffsetForLeaderEpoch``): the log end
        for the current epoch, the start of the next epoch for an older one. A topic needs
        Describe (or the cluster ClusterAction, as a follower has), else its partitions are
        answered TOPIC_AUTHORIZATION_FAILED and nothing else."""
        topics = request.body["topics"]
        denials: dict[str, KafkaError] = {}
        authorizer = self._authorizer
        if authorizer.enabled and not authorizer.may(
            context, AclOperation.CLUSTER_ACTION, "", ResourceType.CLUSTER
        ):
            for name in dict.fromkeys(topic["topic"] for topic in topics):
                denial = authorizer.topic_denial(context, AclOperation.DESCRIBE, name)
                if denial is not None:
                    denials[name] = denial
        return {
            "topics": [
                {
                    "topic": topic["topic"],
                    "partitions": [
                        {"partition": p["partition"], "error_code": denials[topic["topic"]].code}
                        if topic["topic"] in denials
                        else self._epoch_end_offset(topic["topic"], p)
                        for p in topic["partitions"]
                    ],
                }
                for topic in topics
            ]
        }

    def _epoch_end_offset(self, topic: str, entry: dict[str, Any]) -> dict[str, Any]:
        number = entry["partition"]
        current = entry.get("current_leader_epoch", -1)
        if current > LEADER_EPOCH:
            return {"partition": number, "error_code": UNKNOWN_LEADER_EPOCH}
        if 0 <= current < LEADER_EPOCH:
            return {"partition": number, "error_code": FENCED_LEADER_EPOCH}
        try:
            log = self._replicas.partition(topic, number).log
        except KafkaError as error:
            return {"partition": number, "error_code": error.code}
        found = log.end_offset_for_epoch(entry["leader_epoch"], LEADER_EPOCH)
        return {
            "partition": number,
            "error_code": 0,
            "leader_epoch": found.epoch,
            "end_offset": found.start_offset,
        }

    # --- Produce -----------------------------------------------------------------------------

    async def _produce(self, request: KafkaRequest, context: RequestContext) -> Any:
        """The partitions' results (a sequence; fields for v0-2), None for acks=0."""
        body: KafkaProduceRequest = request.body
        entries = body.partitions
        acks_value = body.acks
        acks = ACKS.get(acks_value)
        legacy = request.api_version < FIRST_SERVED_PRODUCE
        refusal: KafkaError | None = None
        if legacy:
            refusal = UnsupportedVersionError(
                f"Produce v{request.api_version} carries message format v0/v1, which this "
                f"broker does not store; use Produce v3 or later (record batches v2)"
            )
        elif acks is None:
            refusal = InvalidRequiredAcksError(f"acks must be -1, 0 or 1, not {acks_value}")
        if refusal is not None:
            if acks_value == 0:
                return None
            results = [
                ProducePartitionResponse(
                    entry.topic, entry.partition, refusal.code, refusal.message
                )
                for entry in entries
            ]
            return results if not legacy else _produce_response(results)
        timeout_ms = body.timeout_ms
        transactions = self._transactions
        if transactions is not None and (
            body.transactional_id is not None
            or any(starts_transactional(entry.records) for entry in entries)
        ):
            refused = await transactions.check_produce(request, context)
            if refused:
                return await self._produce_checked(context, body, acks, refused)
        produce = ProduceRequest(entries, acks, timeout_ms if timeout_ms > 0 else 0)
        response = await self._apis.handle(context, produce, count_quotas=False)
        return None if response is None else response.partitions

    async def _produce_checked(
        self,
        context: RequestContext,
        body: KafkaProduceRequest,
        acks: Acks,
        refused: dict[int, KafkaError],
    ) -> Any:
        """Append the partitions not ``refused``; answer those with their errors, in the
        request's order."""
        entries = body.partitions
        kept = tuple(entry for index, entry in enumerate(entries) if index not in refused)
        appended: list[ProducePartitionResponse] = []
        if kept:
            timeout_ms = body.timeout_ms
            produce = ProduceRequest(kept, acks, timeout_ms if timeout_ms > 0 else 0)
            response = await self._apis.handle(context, produce, count_quotas=False)
            if response is not None:
                appended = list(response.partitions)
        if acks is _ACKS_NONE:
            return None
        answers = iter(appended)
        return [
            ProducePartitionResponse(
                entry.topic, entry.partition, refused[index].code, refused[index].message
            )
            if index in refused
            else next(answers)
            for index, entry in enumerate(entries)
        ]

    # --- Fetch -------------------------------------------------------------------------------

    async def _fetch(self, request: KafkaRequest, context: RequestContext) -> KafkaFetchResponse:
        body: KafkaFetchRequest = request.body
        if body.session_id != 0:
            # Sessions are answered as sessionless (id 0); an incremental fetch in a session
            # this broker never created gets Kafka's error, and the client starts over.
            return KafkaFetchResponse((), FETCH_SESSION_ID_NOT_FOUND)
        if body.replica_id >= 0 and self._authorizer.enabled:
            # A follower's fetch (Kafka's isFromFollower) needs ClusterAction on the cluster.
            denial = self._authorizer.cluster_denial(context, AclOperation.CLUSTER_ACTION)
            if denial is not None:
                refused = [
                    FetchPartitionResponse(p.topic, p.partition, TOPIC_AUTHORIZATION_FAILED)
                    for p in body.fetch.partitions
                ]
                return KafkaFetchResponse(refused, 0)
        response = await self._apis.handle(context, body.fetch, count_quotas=False)
        partitions = response.partitions
        for p in partitions:
            if p.error:
                partitions = [self._with_offsets(p) if p.error else p for p in partitions]
                break
        return KafkaFetchResponse(partitions, 0, 0, body.isolation_level == READ_COMMITTED)

    def _with_offsets(self, p: FetchPartitionResponse) -> FetchPartitionResponse:
        """A partition's failed read with the partition's offsets, as Kafka answers them."""
        if p.error == TOPIC_AUTHORIZATION_FAILED:
            return p
        high_watermark, last_stable, log_start = self._offsets(p.topic, p.partition)
        return dataclasses.replace(
            p,
            high_watermark=high_watermark,
            last_stable_offset=last_stable,
            log_start_offset=log_start,
        )

    def _offsets(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(high watermark, last stable offset, log start offset), -1s when unknown."""
        try:
            log = self._replicas.partition(topic, partition).log
        except KafkaError:
            return -1, -1, -1
        return log.high_watermark, log.last_stable_offset, log.log_start_offset

    # --- ListOffsets, DeleteRecords ----------------------------------------------------------

    async def _list_offsets(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        wanted = []
        special: dict[int, dict[str, Any]] = {}
        for topic in body["topics"]:
            for partition in topic["partitions"]:
                timestamp = partition["timestamp"]
                index = len(wanted) + len(special)
                if timestamp == MAX_TIMESTAMP:
                    # Read here, not through ApiRouter: authorized here too.
                    denial = self._authorizer.topic_denial(context, "Describe", topic["name"])
                    special[index] = (
                        {"partition_index": partition["partition_index"], "error_code": denial.code}
                        if denial is not None
                        else self._max_timestamp(topic["name"], partition["partition_index"])
                    )
                elif timestamp < MAX_TIMESTAMP:
                    special[index] = {
                        "partition_index": partition["partition_index"],
                        "error_code": INVALID_REQUEST,
                    }
                else:
                    wanted.append(
                        (
                            index,
                            ListOffsetsPartition(
                                topic["name"], partition["partition_index"], timestamp
                            ),
                        )
                    )
        results: dict[int, dict[str, Any]] = dict(special)
        if wanted:
            # read_committed's latest offset is the last stable offset (Kafka's).
            isolation = (
                IsolationLevel.TXN_COMMITTED
                if body.get("isolation_level") == READ_COMMITTED
                else IsolationLevel.HIGH_WATERMARK
            )
            response = await self._call(
                context, ListOffsetsRequest(tuple(entry for _, entry in wanted), isolation)
            )
            for (index, _), p in zip(wanted, response.partitions, strict=True):
                results[index] = {
                    "partition_index": p.partition,
                    "error_code": p.error,
                    "timestamp": p.timestamp,
                    "offset": p.offset,
                    "leader_epoch": LEADER_EPOCH if not p.error else -1,
                }
        topics: list[dict[str, Any]] = []
        index = 0
        for topic in body["topics"]:
            entries = []
            for _ in topic["partitions"]:
                entries.append(results[index])
                index += 1
            topics.append({"name": topic["name"], "partitions": entries})
        return {"topics": topics}

    def _max_timestamp(self, topic: str, partition: int) -> dict[str, Any]:
        """The offset and timestamp of the record with the largest timestamp (ListOffsets v7)."""
        try:
            log = self._replicas.partition(topic, partition).log
        except KafkaError as error:
            return {"partition_index": partition, "error_code": error.code}
        best = log.max_timestamp_record()
        if best is None:
            return {"partition_index": partition, "error_code": 0}
        return {
            "partition_index": partition,
            "error_code": 0,
            "timestamp": best.timestamp,
            "offset": best.offset,
        }

    async def _delete_records(self, request: KafkaRequest, context: RequestContext) -> dict:
        topics = request.body["topics"]
        entries = tuple(
            DeleteRecordsPartition(topic["name"], p["partition_index"], p["offset"])
            for topic in topics
            for p in topic["partitions"]
        )
        response = await self._call(context, DeleteRecordsRequest(entries))
        results = iter(response.partitions)
        return {
            "topics": [
                {
                    "name": topic["name"],
                    "partitions": [
                        _delete_records_entry(next(results)) for _ in topic["partitions"]
                    ],
                }
                for topic in topics
            ]
        }


def _delete_records_entry(p: Any) -> dict[str, Any]:
    return {
        "partition_index": p.partition,
        "low_watermark": p.low_watermark,
        "error_code": p.error,
    }


def _produce_response(results: list[ProducePartitionResponse]) -> dict[str, Any]:
    """A refused Produce v0-2's response as fields for the legacy writer."""
    topics: list[dict[str, Any]] = []
    for r in results:
        entry = {"index": r.partition, "error_code": r.error, "base_offset": r.base_offset}
        if topics and topics[-1]["name"] == r.topic:
            topics[-1]["partition_responses"].append(entry)
        else:
            topics.append({"name": r.topic, "partition_responses": [entry]})
    return {"responses": topics}


def _legacy_produce(frame: memoryview, body_offset: int) -> KafkaProduceRequest:
    """A Produce v0-2 body: v3's layout without its leading transactional_id, so it is read
    as a v3 body with a null transactional id in front."""
    body = memoryview(b"\xff\xff" + bytes(frame[body_offset:]))
    return read_produce_request(body, 0, 3)


def _legacy_produce_response(body: dict[str, Any], version: int) -> list[Payload]:
    """Produce v0-2 responses (not in the schema package): per partition index, error,
    base offset (v2: log append time), then (v1+) the throttle time."""
    out = bytearray()
    topics = body["responses"]
    out += struct.pack(">i", len(topics))
    for topic in topics:
        name = topic["name"].encode()
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(">i", len(topic["partition_responses"]))
        for p in topic["partition_responses"]:
            out += struct.pack(">ihq", p["index"], p["error_code"], p["base_offset"])
            if version >= 2:
                out += struct.pack(">q", -1)
    if version >= 1:
        out += struct.pack(">i", 0)
    return [bytes(out)]


def _milliseconds(value: Any) -> int:
    """A duration field as decoded (a timedelta, or an int) in whole milliseconds."""
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    return int(value)


def _fetched_bytes(body: Any) -> int:
    """The record bytes a Fetch response body carries, as the consumer quota counts them."""
    return sum(len(p.records or b"") for p in body.partitions)
