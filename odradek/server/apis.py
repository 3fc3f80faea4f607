"""ApiRouter: the shared router, each decoded request to what answers it (Kafka's ``KafkaApis``).

Requests arrive as the msgpack protocol's message classes, as its connection decodes them; Kafka's
handlers (server/kafka/) call the managers with Kafka's data themselves, using ``authorization``,
``count_entry_errors`` and ``fetch_max_bytes``. The router authorizes each request
(ApiAuthorization), counts it against the client quotas and calls its handler: the msgpack
protocol's family modules (server/msgpack/: produce, fetch, metadata, topics, configs, offsets,
producers, groups, quotas), which map its messages onto the plain calls of the ReplicaManager,
AdminManager and ProducerIdManager that the Kafka handlers make; the APIs whose msgpack messages
carry Kafka's data go to the Kafka handlers (server/msgpack/kafka_data.py), and a transactional
produce is checked against its transaction first (``check_transactional_produce``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from functools import cache
from typing import Any, get_args, get_origin, get_type_hints

from odradek.errors import (
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
    error_name_for,
)
from odradek.network.sasl_authenticator import SaslAuthenticator
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import ApiVersionsResponse
from odradek.protocol.produce import ProduceRequest, ProduceResponse
from odradek.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from odradek.protocol.schema import Message
from odradek.protocol.values.produce import Acks, ProducePartitionData, ProducePartitionResponse
from odradek.record.record_batch import starts_transactional
from odradek.server.admin.admin_manager import AdminManager
from odradek.server.authorization.api_authorization import ApiAuthorization
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.metrics.broker_metrics import BrokerMetrics
from odradek.server.msgpack.configs import MsgpackConfigApis
from odradek.server.msgpack.fetch import MsgpackFetchApis
from odradek.server.msgpack.groups import MsgpackGroupApis
from odradek.server.msgpack.kafka_data import MsgpackKafkaData, by_version
from odradek.server.msgpack.metadata import MsgpackMetadataApis
from odradek.server.msgpack.offsets import MsgpackOffsetApis
from odradek.server.msgpack.produce import MsgpackProduceApis
from odradek.server.msgpack.producers import MsgpackProducerApis
from odradek.server.msgpack.quotas import MsgpackQuotaApis
from odradek.server.msgpack.topics import MsgpackTopicApis
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.quota.client_quotas import ClientQuotas
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext

Handler = Callable[[Any, RequestContext], Awaitable[Message | None]]
TransactionalProduceCheck = Callable[
    [RequestContext, str | None, Sequence[ProducePartitionData]],
    Awaitable[Mapping[int, KafkaError]],
]
"""The partitions (by index) of a transactional produce that may not be appended, with why."""

_PRODUCE = int(ApiKey.PRODUCE)

EAGER_API_KEYS = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})
"""APIs whose handlers may run their first step in the connection's callback, before any task
exists (see start_eagerly): they need no current task (``asyncio.timeout`` does) until they
first wait. The two that carry records, and most of a broker's requests."""


class ApiRouter:
    """One handler per API of the protocol; records per-partition errors as metrics."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        admin_manager: AdminManager,
        api_versions: ApiVersionsResponse,
        metrics: BrokerMetrics,
        producer_ids: ProducerIdManager,
        groups: MsgpackGroupApis,
        authorizer: Authorizer | None = None,
        quotas: ClientQuotas | None = None,
        client_quotas: MsgpackQuotaApis | None = None,
    ) -> None:
        self._metrics = metrics
        self._quotas = quotas
        self.authorization = ApiAuthorization(
            authorizer or Authorizer(),
            admin_manager.auto_creates_topics,
            admin_manager.topic_exists,
        )
        """Who may do what, for both protocols' handlers."""
        self._api_versions = api_versions
        self.replicas = replica_manager
        """What ``answers_at_once`` lets a protocol call directly."""
        self.answers_at_once = True
        """Whether nothing but its partition has a say in the answer to a produce or fetch
        (no authorizer, no quota in force): a protocol may then answer a one-partition
        produce at acks 0 or 1 and a fetch that finds nothing new as ``handle`` would, with
        ``replicas.append_at_once`` and ``replicas.nothing_new`` (one call from the
        connection into the append). Kept current as quotas come and go."""
        if quotas is not None:
            quotas.watch(self._restrictions_changed)
        self._restrictions_changed()
        replicas, admin = replica_manager, admin_manager
        offsets = MsgpackOffsetApis(replicas)
        topics = MsgpackTopicApis(admin)
        configs = MsgpackConfigApis(admin)
        metadata = MsgpackMetadataApis(admin, self.authorization)
        self._handlers: dict[ApiKey, Handler] = {
            ApiKey.PRODUCE: MsgpackProduceApis(replicas).produce,
            ApiKey.FETCH: MsgpackFetchApis(replicas).fetch,
            ApiKey.LIST_OFFSETS: offsets.list_offsets,
            ApiKey.DELETE_RECORDS: offsets.delete_records,
            ApiKey.INIT_PRODUCER_ID: MsgpackProducerApis(producer_ids).init_producer_id,
            ApiKey.METADATA: metadata.metadata,
            ApiKey.API_VERSIONS: self._api_versions_response,
            ApiKey.CREATE_TOPICS: topics.create_topics,
            ApiKey.DELETE_TOPICS: topics.delete_topics,
            ApiKey.CREATE_PARTITIONS: topics.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
            ApiKey.ALTER_CONFIGS: configs.alter_configs,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: metadata.describe_topic_partitions,
            ApiKey.FIND_COORDINATOR: groups.find_coordinator,
            ApiKey.JOIN_GROUP: groups.join_group,
            ApiKey.SYNC_GROUP: groups.sync_group,
            ApiKey.HEARTBEAT: groups.heartbeat,
            ApiKey.LEAVE_GROUP: groups.leave_group,
            ApiKey.OFFSET_COMMIT: groups.offset_commit,
            ApiKey.OFFSET_FETCH: groups.offset_fetch,
            ApiKey.LIST_GROUPS: groups.list_groups,
            ApiKey.DESCRIBE_GROUPS: groups.describe_groups,
            ApiKey.DELETE_GROUPS: groups.delete_groups,
            ApiKey.OFFSET_DELETE: groups.offset_delete,
            **(
                {
                    ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.describe_client_quotas,
                    ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.alter_client_quotas,
                }
                if client_quotas is not None
                else {}
            ),
            ApiKey.SASL_HANDSHAKE: self._sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: self._sasl_authenticate,
        }
        self._refused: frozenset[int] = frozenset()
        self._produce_check: TransactionalProduceCheck | None = None

    def check_transactional_produce(self, check: TransactionalProduceCheck) -> None:
        """Have every Produce of odradek's protocol that carries a transactional id or a
        transactional batch checked by ``check`` (the transaction coordinator's: the id needs
        Write, a batch goes only to a partition of its producer's open transaction) before
        it is handled; refused partitions are answered with their errors, the others go on.
        (Kafka's protocol checks its produce in its own handler.)"""
        self._produce_check = check

    async def _produce_checked(
        self, check: TransactionalProduceCheck, context: RequestContext, request: ProduceRequest
    ) -> ProduceResponse | None:
        entries = request.partitions
        refused = await check(context, request.transactional_id, entries)
        if not refused:
            return await self._admit(context, request)
        kept = tuple(entry for index, entry in enumerate(entries) if index not in refused)
        appended: list[ProducePartitionResponse] = []
        if kept:
            response = await self._admit(context, dataclasses.replace(request, partitions=kept))
            if response is not None:
                appended = list(response.partitions)
        if request.acks is Acks.NONE:
            return None
        answers = iter(appended)
        return ProduceResponse(
            tuple(
                ProducePartitionResponse(
                    entry.topic, entry.partition, refused[index].code, refused[index].message
                )
                if index in refused
                else next(answers)
                for index, entry in enumerate(entries)
            )
        )

    def serve_kafka_data(self, kafka_data: MsgpackKafkaData) -> None:
        """Answer the Kafka-data versions of the APIs that have them (protocol/kafka_data.py)
        with ``kafka_data`` (the Kafka handlers, built over this router): for an API that
        also has its own message (v0), by version."""
        for api_key in kafka_data.api_keys():
            own = self._handlers.get(api_key)
            self._handlers[api_key] = (
                kafka_data.handle if own is None else by_version(own, kafka_data)
            )
        self._refused = kafka_data.api_keys() - kafka_data.served_api_keys() - self._refused

    @property
    def served_api_keys(self) -> frozenset[int]:
        """The API keys this router answers (odradek's protocol); not those it only refuses
        (a Kafka-data API whose Kafka handler this broker does not have)."""
        return frozenset(self._handlers) - self._refused

    def _restrictions_changed(self) -> None:
        quotas = self._quotas
        self.answers_at_once = not (
            self.authorization.authorizer.enabled or (quotas is not None and quotas.enabled)
        )

    def handle(self, context: RequestContext, request: Message) -> Awaitable[Message | None]:
        """The response to ``request`` (None when the request wants none: acks=0), to await.

        Raises a KafkaError when the request fails as a whole. Entries the request's
        principal may not touch are refused first (ApiAuthorization). With client quotas in
        force the request is counted against them and a fetch asks for one quota window at
        most (``fetch_max_bytes``).
        (A function returning the handler's coroutine, not one of its own: one coroutine
        layer less per request.)
        """
        check = self._produce_check
        if (
            check is not None
            and context.header.api_key == _PRODUCE
            and (
                request.transactional_id is not None
                or any(starts_transactional(entry.records) for entry in request.partitions)
            )
        ):
            return self._produce_checked(check, context, request)
        return self._admit(context, request)

    def _admit(self, context: RequestContext, request: Message) -> Awaitable[Message | None]:
        quotas = self._quotas
        if quotas is not None and quotas.enabled:  # --- quota hook
            return self._handle_with_quotas(quotas, context, request)
        return self._handle(context, request)

    def fetch_max_bytes(self, context: RequestContext, max_bytes: int) -> int:
        """``max_bytes`` of a fetch of either protocol, held to one window of its client's
        consumer quota when quotas are in force (a throttled client gets at most that)."""
        quotas = self._quotas
        if quotas is not None and quotas.enabled:
            window_bytes = quotas.fetch_max_bytes(context)
            if window_bytes is not None and max_bytes > window_bytes:
                return window_bytes
        return max_bytes

    async def _handle(self, context: RequestContext, request: Message) -> Message | None:
        api_key = context.header.api_key
        handler = self._handlers[api_key]
        if self.authorization.authorizer.enabled:
            response = await self.authorization.handle(api_key, handler, request, context)
        else:
            response = await handler(request, context)
        if response is not None:
            self._count_entry_errors(api_key, response)
        return response

    async def _handle_with_quotas(
        self, quotas: ClientQuotas, context: RequestContext, request: Message
    ) -> Message | None:
        api_key = context.api_key
        if api_key == ApiKey.FETCH:
            max_bytes = self.fetch_max_bytes(context, request.max_bytes)
            if max_bytes != request.max_bytes:
                request = dataclasses.replace(request, max_bytes=max_bytes)
        produced = 0
        if api_key == ApiKey.PRODUCE:
            produced = sum(len(p.records) for p in request.partitions)
        response, throttle_ms, fetched = await quotas.answer_counted(
            context,
            lambda: self._handle(context, request),
            produced,
            _fetched_bytes if api_key == ApiKey.FETCH else None,
            timed=api_key != ApiKey.FETCH,
        )
        if throttle_ms and fetched:
            response = dataclasses.replace(
                response,
                partitions=tuple(dataclasses.replace(p, records=b"") for p in response.partitions),
            )
        if throttle_ms and response is not None and api_key in (ApiKey.PRODUCE, ApiKey.FETCH):
            response = dataclasses.replace(response, throttle_time_ms=throttle_ms)
        return response

    async def _api_versions_response(self, _request: Message, _context: RequestContext) -> Message:
        return self._api_versions

    async def _sasl_handshake(
        self, request: SaslHandshakeRequest, context: RequestContext
    ) -> SaslHandshakeResponse:
        authenticator = _authenticator(context)
        authenticator.handshake(request.mechanism, 1)
        return SaslHandshakeResponse(tuple(authenticator.mechanisms))

    async def _sasl_authenticate(
        self, request: SaslAuthenticateRequest, context: RequestContext
    ) -> SaslAuthenticateResponse:
        authenticator = _authenticator(context)
        try:
            token = await authenticator.authenticate(request.token.encode("utf-8"))
        except SaslAuthenticationFailedError:
            await asyncio.sleep(authenticator.failure_delay_s)
            raise
        return SaslAuthenticateResponse(token.decode("utf-8"))

    def _count_entry_errors(self, api_key: int, response: Message) -> None:
        """Count the per-topic and per-partition errors of ``response``."""
        for name in _entry_fields(type(response)):
            entries = getattr(response, name)
            if entries is None:
                continue
            self.count_entry_errors(api_key, (getattr(entry, "error", 0) for entry in entries))

    def count_entry_errors(self, api_key: int, error_codes: Iterable[int]) -> None:
        """Count the per-topic (per-partition) errors of a response of ``api_key`` (0: none),
        for a handler that answers without ``handle``."""
        for code in error_codes:
            if code:
                counter = self._metrics.partition_errors
                counter.labels(ApiKey(api_key).display_name, error_name_for(code)).inc()


@cache
def _entry_fields(response_type: type[Message]) -> tuple[str, ...]:
    """The fields of a response type that hold its entries (tuples, or tuples or None)."""
    hints = get_type_hints(response_type)

    def holds_entries(hint: Any) -> bool:
        return get_origin(hint) is tuple or any(get_origin(arg) is tuple for arg in get_args(hint))

    return tuple(f.name for f in fields(response_type) if holds_entries(hints[f.name]))


def _authenticator(context: RequestContext) -> SaslAuthenticator:
    session = context.session
    if session is None or session.authenticator is None:
        raise IllegalSaslStateError("this listener does not use SASL")
    return session.authenticator


def _fetched_bytes(response: Message) -> int:
    """The record bytes a fetch response carries, as the consumer quota counts them."""
    return sum(len(p.records) for p in response.partitions)
