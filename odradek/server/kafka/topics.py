"""KafkaTopicApis: CreateTopics, DeleteTopics and CreatePartitions on Kafka's protocol,
answered through AdminManager's handlers (via ApiRouter), with the topics' ids."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.errors import (
    InvalidReplicationFactorError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
)
from odradek.protocol.configs import DescribeConfigsRequest
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.topics import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from odradek.security.acl import AclOperation
from odradek.server.admin.topic_ids import TopicIds
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.configs import CONFIG_SOURCE_CODES
from odradek.server.kafka.request import CallApis, KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext

INVALID_REQUEST = InvalidRequestError.code
INVALID_REPLICATION_FACTOR = InvalidReplicationFactorError.code


class KafkaTopicApis:
    """The topic administration APIs of Kafka's protocol."""

    def __init__(self, call: CallApis, topic_ids: TopicIds, authorizer: Authorizer) -> None:
        self._call = call
        self._topic_ids = topic_ids
        self._authorizer = authorizer

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.CREATE_TOPICS: self._create_topics,
            apis.DELETE_TOPICS: self._delete_topics,
            apis.CREATE_PARTITIONS: self._create_partitions,
        }

    async def _create_topics(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        results: list[dict[str, Any] | None] = []
        creatable = []
        for topic in body["topics"]:
            if topic["replication_factor"] not in (-1, 1):
                results.append(
                    {
                        "name": topic["name"],
                        "error_code": INVALID_REPLICATION_FACTOR,
                        "error_message": f"replication factor {topic['replication_factor']} "
                        f"is larger than the 1 broker available",
                    }
                )
                continue
            if topic["assignments"]:
                results.append(
                    {
                        "name": topic["name"],
                        "error_code": INVALID_REQUEST,
                        "error_message": "manual partition assignments are not supported",
                    }
                )
                continue
            configs = {c["name"]: c["value"] for c in topic["configs"] if c["value"] is not None}
            creatable.append(CreatableTopic(topic["name"], topic["num_partitions"], configs))
            results.append(None)
        if creatable:
            response = await self._call(
                context,
                CreateTopicsRequest(tuple(creatable), body["validate_only"], body["timeout"]),
            )
            configs_of: dict[str, list[dict[str, Any]]] = {}
            if not body["validate_only"]:
                await self._topic_ids.ensure(
                    {t.name: t.num_partitions for t in response.topics if not t.error}
                )
                configs_of = await self._configs(
                    context, [t.name for t in response.topics if not t.error]
                )
            created = iter(response.topics)
            for index, result in enumerate(results):
                if result is None:
                    found = next(created)
                    results[index] = {
                        "name": found.name,
                        "topic_id": None if found.error else self._topic_ids.get(found.name),
                        "error_code": found.error,
                        "error_message": found.message,
                        "num_partitions": found.num_partitions,
                        "replication_factor": 1 if not found.error else -1,
                        # Kafka's Java admin client reads the configs of every topic created
                        # without error (it fails on null); a failed topic has none.
                        "configs": None if found.error else configs_of.get(found.name, []),
                    }
                    if not found.error and not body["validate_only"]:
                        if found.name not in configs_of:  # no DescribeConfigs: Kafka's answer
                            results[index].update(
                                num_partitions=-1,
                                replication_factor=-1,
                                configs=[],
                                topic_config_error_code=TopicAuthorizationFailedError.code,
                            )
        return {"topics": results}

    async def _configs(
        self, context: RequestContext, names: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """Every config of the topics just created, as CreateTopics v5+ returns them."""
        if not names:
            return {}
        response = await self._call(context, DescribeConfigsRequest(tuple(names)))
        return {
            topic.name: [
                {
                    "name": entry.name,
                    "value": entry.value,
                    "read_only": False,
                    "config_source": CONFIG_SOURCE_CODES[entry.source.name],
                    "is_sensitive": False,
                }
                for entry in topic.entries
            ]
            for topic in response.topics
            if not topic.error
        }

    async def _delete_topics(self, request: KafkaRequest, context: RequestContext) -> dict:
        """By name, or (v6+) by id: an unknown id is UNKNOWN_TOPIC_ID, and a topic asked for
        by id that the principal may not delete is named only if it may describe it (the id
        is not secret, the name is), as Kafka answers."""
        body = request.body
        unknown_ids: list[uuid.UUID] = []
        asked_by_id: set[str] = set()
        if request.api_version >= 6:
            names = []
            for topic in body["topics"]:
                name = topic["name"]
                if name is None:
                    name = await self._topic_ids.resolve(topic["topic_id"])
                    if name is None:
                        unknown_ids.append(topic["topic_id"])
                        continue
                    asked_by_id.add(name)
                names.append(name)
        else:
            names = list(body["topic_names"])
        ids = {name: self._topic_ids.get(name) for name in names}
        response = await self._call(context, DeleteTopicsRequest(tuple(names)))
        for result in response.topics:
            if not result.error:
                self._topic_ids.forget(result.name)
        unknown = UnknownTopicIdError("no topic has this id")
        return {
            "responses": [
                {
                    "name": None,
                    "topic_id": topic_id,
                    "error_code": unknown.code,
                    "error_message": unknown.message,
                }
                for topic_id in unknown_ids
            ]
            + [
                {
                    "name": None if self._name_hidden(context, r, asked_by_id) else r.name,
                    "topic_id": ids.get(r.name),
                    "error_code": r.error,
                    "error_message": r.message,
                }
                for r in response.topics
            ]
        }

    def _name_hidden(self, context: RequestContext, result: Any, asked_by_id: set[str]) -> bool:
        """Whether a topic asked for by id was refused to a principal that may not see it."""
        return (
            result.name in asked_by_id
            and result.error == TopicAuthorizationFailedError.code
            and not self._authorizer.may(context, AclOperation.DESCRIBE, result.name)
        )

    async def _create_partitions(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        results: list[dict[str, Any] | None] = []
        counts = []
        for topic in body["topics"]:
            if topic["assignments"]:
                results.append(
                    {
                        "name": topic["name"],
                        "error_code": INVALID_REQUEST,
                        "error_message": "manual partition assignments are not supported",
                    }
                )
                continue
            counts.append(CreatePartitionsTopic(topic["name"], topic["count"]))
            results.append(None)
        if counts:
            response = await self._call(
                context,
                CreatePartitionsRequest(tuple(counts), body["validate_only"], body["timeout"]),
            )
            grown = iter(response.topics)
            for index, result in enumerate(results):
                if result is None:
                    found = next(grown)
                    results[index] = {
                        "name": found.name,
                        "error_code": found.error,
                        "error_message": found.message,
                    }
            await self._topic_ids.ensure(dict.fromkeys(c.name for c in counts))
        return {"results": results}
