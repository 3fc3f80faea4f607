"""KafkaRequestHandler: Kafka-protocol requests decoded, answered by their API family's
handlers (one module per family in server/kafka/), and framed back as Kafka responses.

Produce and Fetch, most of a broker's requests, are read straight into their bodies and their
responses written behind the response header, in one piece of bytes unless records go out by
``sendfile``; the most common of them (one partition at acks 0 or 1, or a fetch finding nothing
new) are answered before any of that (``answer_at_once``), and one partition at acks=all is
appended so and its ready answer handed to the connection to send once fsync'ed
(``DurableAnswer``). With client quotas in force, each request is counted against them here
(``_handle_with_quotas``), once, whichever family answers it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from types import MappingProxyType
from typing import Any

from odradek.config.broker_config import BrokerConfig
from odradek.errors import KafkaError, UnsupportedVersionError, error_code_for
from odradek.network.session import Session
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka import fetch_request, produce_request
from odradek.protocol.kafka.api_versions import (
    ADVERTISED,
    request_flexibility,
    response_header_version,
)
from odradek.protocol.kafka.fetch_request import (
    read_fetch_request,
    read_immediate_fetch,
    write_fetch_response,
    write_nothing_new,
)
from odradek.protocol.kafka.message_codec import (
    Payload,
    decode,
    encode_parts,
    request_spec,
    response_spec,
)
from odradek.protocol.kafka.produce_request import (
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
from odradek.protocol.values.produce import Acks, ProducePartitionResponse
from odradek.record.record_batch import starts_transactional
from odradek.server.admin.admin_manager import AdminManager
from odradek.server.admin.topic_ids import TopicIds
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.durable_answer import DurableAnswer
from odradek.server.kafka.acls import KafkaAclApis
from odradek.server.kafka.configs import KafkaConfigApis
from odradek.server.kafka.fetch import KafkaFetchApis
from odradek.server.kafka.groups import KafkaGroupApis
from odradek.server.kafka.metadata import KafkaMetadataApis, api_versions_body
from odradek.server.kafka.offsets import KafkaOffsetApis
from odradek.server.kafka.partition_admin import KafkaPartitionAdminApis
from odradek.server.kafka.produce import (
    FIRST_SERVED_PRODUCE,
    KafkaProduceApis,
    read_legacy_produce,
    write_legacy_produce_response,
)
from odradek.server.kafka.producers import KafkaProducerApis
from odradek.server.kafka.quotas import KafkaQuotaApis
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.kafka.security import KafkaSecurityApis
from odradek.server.kafka.topics import KafkaTopicApis
from odradek.server.kafka.transactions import KafkaTransactionApis
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.quota.client_quota_admin import ClientQuotaAdmin
from odradek.server.quota.client_quotas import ClientQuotas
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext

# (Members at hand: looking one up on its enum class costs about a call, per request.)
_ACKS_NONE = Acks.NONE
_ACKS_ALL = Acks.ALL


class KafkaRequestHandler:
    """Decodes Kafka requests, answers them with their API family's handler, frames the
    answers."""

    def __init__(
        self,
        router: ApiRouter,
        replica_manager: ReplicaManager,
        admin_manager: AdminManager,
        producer_ids: ProducerIdManager,
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
        self._quotas = quotas
        self._replicas = replica_manager
        authorizer = authorizer or Authorizer()
        executor = executor or ThreadPoolExecutor(1, thread_name_prefix="odradek-acls")
        configs = KafkaConfigApis(router, admin_manager, broker_config, node_id, authorizer)
        self._handlers: dict[int, KafkaHandler] = {
            **KafkaMetadataApis(
                router, admin_manager, topic_ids, node_id, endpoint, authorizer
            ).handlers(),
            **KafkaProduceApis(router, replica_manager, transactions).handlers(),
            **KafkaFetchApis(router, replica_manager, authorizer).handlers(),
            **KafkaOffsetApis(router, replica_manager, authorizer).handlers(),
            **KafkaProducerApis(
                router, producer_ids, replica_manager, authorizer, transactions
            ).handlers(),
            **(security.handlers() if security is not None else {}),
            **KafkaAclApis(authorizer, executor).handlers(),
            **KafkaTopicApis(
                router, admin_manager, configs.topic_configs, topic_ids, authorizer
            ).handlers(),
            **configs.handlers(),
            **(group_requests.handlers() if group_requests is not None else {}),
            **(partition_admin.handlers() if partition_admin is not None else {}),
            **(transactions.handlers() if transactions is not None else {}),
            **(
                KafkaQuotaApis(ClientQuotaAdmin(quotas, authorizer, executor)).handlers()
                if quotas is not None
                else {}
            ),
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
                body = read_legacy_produce(frame, body_offset)
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
            body = api_versions_body(request.refusal.code)
            return self._frame(request, body, version=0)
        context = RequestContext(peer, request, session)
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
            parts = write_legacy_produce_response(body, version)
        else:
            parts = encode_parts(response_spec(api_key, version), body)
        header_version = response_header_version(api_key, version)
        return response_frame(request.correlation_id, header_version, parts)


def _fetched_bytes(body: Any) -> int:
    """The record bytes a Fetch response body carries, as the consumer quota counts them."""
    return sum(len(p.records or b"") for p in body.partitions)
