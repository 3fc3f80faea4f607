"""ApiAuthorization: the one place each API's request is checked against the Authorizer.

ApiRouter runs the msgpack protocol's requests (and those of Kafka's it is handed) through
``handle``; a Kafka handler that calls the admin or replica manager with Kafka's data asks
``topic_denials`` (or ``metadata_topics``), the same rules, so both protocols are checked
alike. Per API, the operation and the resource each entry
needs: Produce writes its topics (InitProducerId needs IdempotentWrite on the cluster or
Write on some topic), Fetch reads them, ListOffsets describes them, DeleteRecords
deletes from them, CreateTopics creates and DeleteTopics deletes (on the cluster or the topic),
CreatePartitions alters, DescribeConfigs and AlterConfigs describe and alter configs. Entries
the principal may not touch are answered TOPIC_AUTHORIZATION_FAILED and never reach the
handler; the others go through as if alone. Metadata (and DescribeTopicPartitions) list only
the topics the principal may describe when it asked for all of them, answer
TOPIC_AUTHORIZATION_FAILED for a named one it may not, and auto-create only what it may create
(a missing topic it may not create is refused, as Kafka refuses it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.errors import KafkaError, UnknownTopicOrPartitionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.configs import TopicConfigs
from odradek.protocol.delete_records import DeleteRecordsPartitionResponse
from odradek.protocol.describe_topic_partitions import TopicDescription
from odradek.protocol.kafka_data import KafkaData
from odradek.protocol.list_offsets import ListOffsetsPartitionResponse
from odradek.protocol.messages import RESPONSE_TYPES
from odradek.protocol.schema import Message
from odradek.protocol.topics import CreatableTopicResult, TopicResult
from odradek.protocol.values.fetch import FetchPartitionResponse
from odradek.protocol.values.produce import ProducePartitionResponse
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.request_context import RequestContext

Handler = Callable[[Any, RequestContext], Awaitable[Message | None]]
T = TypeVar("T")
FindTopics = Callable[[Sequence[str] | None, bool], Awaitable[list[tuple[str, T | KafkaError]]]]
"""Looks topics up (all when None), auto-creating missing ones when told to."""


@dataclass(frozen=True)
class EntryRule:
    """What each entry of one API's request needs, and how a refused one is answered."""

    field: str
    """The request's and the response's tuple of entries."""
    operation: AclOperation
    topic: Callable[[Any], str]
    key: Callable[[Any], object]
    """What matches a request entry to its response entry."""
    refused: Callable[[Any, KafkaError], Any]
    on_cluster: bool = False
    """Whether the operation on the cluster allows every entry (CreateTopics, DeleteTopics)."""
    tells_missing: bool = False
    """Whether a refused entry naming a missing topic the principal may describe is answered
    UNKNOWN_TOPIC_OR_PARTITION (DeleteTopics: Kafka tells a describer what does not exist)."""


def _partition_key(entry: Any) -> object:
    return (entry.topic, entry.partition)


def _name(entry: Any) -> str:
    return entry if isinstance(entry, str) else entry.name


RULES: dict[ApiKey, EntryRule] = {
    ApiKey.PRODUCE: EntryRule(
        "partitions",
        AclOperation.WRITE,
        lambda e: e.topic,
        _partition_key,
        lambda e, error: ProducePartitionResponse(e.topic, e.partition, error.code, error.message),
    ),
    ApiKey.FETCH: EntryRule(
        "partitions",
        AclOperation.READ,
        lambda e: e.topic,
        _partition_key,
        lambda e, error: FetchPartitionResponse(e.topic, e.partition, error.code, error.message),
    ),
    ApiKey.LIST_OFFSETS: EntryRule(
        "partitions",
        AclOperation.DESCRIBE,
        lambda e: e.topic,
        _partition_key,
        lambda e, error: ListOffsetsPartitionResponse(
            e.topic, e.partition, error.code, error.message
        ),
    ),
    ApiKey.DELETE_RECORDS: EntryRule(
        "partitions",
        AclOperation.DELETE,
        lambda e: e.topic,
        _partition_key,
        lambda e, error: DeleteRecordsPartitionResponse(
            e.topic, e.partition, error.code, error.message
        ),
    ),
    ApiKey.CREATE_TOPICS: EntryRule(
        "topics",
        AclOperation.CREATE,
        _name,
        _name,
        lambda e, error: CreatableTopicResult(e.name, error.code, error.message),
        on_cluster=True,
    ),
    ApiKey.DELETE_TOPICS: EntryRule(
        "topics",
        AclOperation.DELETE,
        _name,
        _name,
        lambda e, error: TopicResult(e, error.code, error.message),
        on_cluster=True,
        tells_missing=True,
    ),
    ApiKey.CREATE_PARTITIONS: EntryRule(
        "topics",
        AclOperation.ALTER,
        _name,
        _name,
        lambda e, error: TopicResult(e.name, error.code, error.message),
    ),
    ApiKey.DESCRIBE_CONFIGS: EntryRule(
        "topics",
        AclOperation.DESCRIBE_CONFIGS,
        _name,
        _name,
        lambda e, error: TopicConfigs(e, error.code, error.message),
    ),
    ApiKey.ALTER_CONFIGS: EntryRule(
        "topics",
        AclOperation.ALTER_CONFIGS,
        _name,
        _name,
        lambda e, error: TopicResult(e.name, error.code, error.message),
    ),
}


class ApiAuthorization:
    """Runs a request's handler on the entries its principal may touch."""

    def __init__(
        self,
        authorizer: Authorizer,
        auto_creates_topics: bool = True,
        topic_exists: Callable[[str], bool] = lambda _topic: True,
    ) -> None:
        self.authorizer = authorizer
        self.auto_creates_topics = auto_creates_topics
        """``auto.create.topics.enable``: whether Metadata may create what it names."""
        self.topic_exists = topic_exists

    async def handle(
        self, api_key: ApiKey, handler: Handler, request: Any, context: RequestContext
    ) -> Message | None:
        if (
            not self.authorizer.enabled
            or isinstance(request, KafkaData)
            or api_key == ApiKey.METADATA
        ):
            # (A Kafka-data request's Kafka handler authorizes it, as on Kafka's listener;
            # Metadata's handler asks ``metadata_topics``.)
            return await handler(request, context)
        if api_key == ApiKey.DESCRIBE_TOPIC_PARTITIONS:
            return await self._describe_topic_partitions(handler, request, context)
        if api_key == ApiKey.INIT_PRODUCER_ID:
            self.check_idempotent_write(context)
            return await handler(request, context)
        rule = RULES.get(api_key)
        if rule is None:
            return await handler(request, context)
        return await self._by_entry(rule, api_key, handler, request, context)

    def check_idempotent_write(self, context: RequestContext) -> None:
        """InitProducerId (idempotent, no transactional id) needs IdempotentWrite on the
        cluster or, as since Kafka 2.8 (KIP-679), Write on some topic: raises the denial."""
        authorizer = self.authorizer
        if not authorizer.enabled:
            return
        if authorizer.may(
            context, AclOperation.IDEMPOTENT_WRITE, "", ResourceType.CLUSTER
        ) or authorizer.may_on_some(context, AclOperation.WRITE, ResourceType.TOPIC):
            return
        denial = authorizer.cluster_denial(context, AclOperation.IDEMPOTENT_WRITE)
        if denial is not None:  # audit-logged
            raise denial

    def _denial(self, context: RequestContext, rule: EntryRule, entry: Any) -> KafkaError | None:
        return self._topic_denial(context, rule, rule.topic(entry))

    def _topic_denial(
        self, context: RequestContext, rule: EntryRule, topic: str
    ) -> KafkaError | None:
        if rule.on_cluster and self.authorizer.may(
            context, rule.operation, topic, ResourceType.CLUSTER
        ):
            return None  # Create (Delete) on the cluster: any topic, as in Kafka
        denial = self.authorizer.topic_denial(context, rule.operation, topic)
        if (
            denial is not None
            and rule.tells_missing
            and not self.topic_exists(topic)
            and self.authorizer.may(context, AclOperation.DESCRIBE, topic)
        ):
            return UnknownTopicOrPartitionError(f"topic {topic} does not exist")
        return denial

    async def _by_entry(
        self,
        rule: EntryRule,
        api_key: ApiKey,
        handler: Handler,
        request: Any,
        context: RequestContext,
    ) -> Message | None:
        entries = getattr(request, rule.field)
        denials = [self._denial(context, rule, entry) for entry in entries]
        if not any(denials):
            return await handler(request, context)
        allowed = tuple(e for e, denial in zip(entries, denials, strict=True) if denial is None)
        answered: dict[object, Any] = {}
        response = None
        if allowed:
            response = await handler(dataclasses.replace(request, **{rule.field: allowed}), context)
            if response is None:
                return None  # acks=0: nothing is answered either way
            answered = {rule.key(entry): entry for entry in getattr(response, rule.field)}
        elif getattr(request, "acks", None) == 0:
            return None
        results = tuple(
            rule.refused(entry, denial) if denial is not None else answered[rule.key(entry)]
            for entry, denial in zip(entries, denials, strict=True)
        )
        if response is not None:
            return dataclasses.replace(response, **{rule.field: results})
        return RESPONSE_TYPES[api_key](**{rule.field: results})

    async def metadata_topics(
        self,
        context: RequestContext,
        names: Sequence[str] | None,
        allow_auto_topic_creation: bool,
        find: FindTopics[T],
    ) -> list[tuple[str, T | KafkaError]]:
        """The topics a Metadata request of either protocol names (all when None), found by
        ``find`` (AdminManager.find_topics) as its principal may see them, by Kafka's
        ``handleTopicMetadataRequest`` rules: asked for all, only those it may describe; a
        topic named without Describe is refused (its existence not looked at); with Describe
        but without Create (on the cluster or the topic), a missing topic the broker would
        auto-create is refused too."""
        if not self.authorizer.enabled:
            return await find(names, allow_auto_topic_creation)
        may = self.authorizer.may
        if names is None:
            return [
                (name, found)
                for name, found in await find(None, False)
                if may(context, AclOperation.DESCRIBE, name)
            ]
        denials = {
            name: self.authorizer.topic_denial(context, AclOperation.DESCRIBE, name)
            for name in names
        }
        allowed = [name for name in names if denials[name] is None]
        auto_create = allow_auto_topic_creation and self.auto_creates_topics
        creatable = allowed
        if auto_create and not may(context, AclOperation.CREATE, "", ResourceType.CLUSTER):
            creatable = [n for n in allowed if may(context, AclOperation.CREATE, n)]
        found = dict(await find(creatable, auto_create))
        uncreatable = [name for name in allowed if name not in found]
        if uncreatable:
            for name, looked_up in await find(uncreatable, False):
                if (
                    isinstance(looked_up, KafkaError)
                    and looked_up.code == UnknownTopicOrPartitionError.code
                ):
                    denials[name] = self.authorizer.topic_denial(context, AclOperation.CREATE, name)
                found[name] = looked_up
        return [(name, found[name] if denials[name] is None else denials[name]) for name in names]

    def topic_denials(
        self, context: RequestContext, api_key: ApiKey, topics: Sequence[str]
    ) -> list[KafkaError | None]:
        """Why the principal may not touch each of ``topics`` (None: it may) in a request of
        ``api_key``, by the rule ``handle`` applies to that API's entries: for a handler that
        hands its entries to the admin or replica manager as plain data."""
        if not self.authorizer.enabled:
            return [None] * len(topics)
        rule = RULES[api_key]
        return [self._topic_denial(context, rule, topic) for topic in topics]

    async def _describe_topic_partitions(
        self, handler: Handler, request: Any, context: RequestContext
    ) -> Message:
        response = await handler(request, context)
        topics = []
        for topic in response.topics:
            if self.authorizer.may(context, AclOperation.DESCRIBE, topic.name):
                topics.append(topic)
            elif request.topics is not None:
                denial = self.authorizer.topic_denial(context, AclOperation.DESCRIBE, topic.name)
                topics.append(TopicDescription(topic.name, denial.code, denial.message))
        return dataclasses.replace(response, topics=tuple(topics))
