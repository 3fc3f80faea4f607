"""KafkaTopicApis: CreateTopics, DeleteTopics and CreatePartitions on Kafka's protocol, with
the topics' ids. Each calls the AdminManager with Kafka's data for the topics
ApiAuthorization's rules let the principal touch, as the msgpack protocol's handlers do
(server/msgpack/topics.py)."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.errors import (
    InvalidReplicationFactorError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.security.acl import AclOperation
from odradek.server.admin.admin_manager import AdminManager, NewTopic
from odradek.server.admin.topic_ids import TopicIds
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.configs import CONFIG_SOURCE_CODES
from odradek.server.kafka.request import (
    KafkaHandler,
    KafkaRequest,
    TopicConfigsLookup,
    handle_permitted,
)
from odradek.server.request_context import RequestContext

INVALID_REQUEST = InvalidRequestError.code
INVALID_REPLICATION_FACTOR = InvalidReplicationFactorError.code


class KafkaTopicApis:
    """The topic administration APIs of Kafka's protocol."""

    def __init__(
        self,
        router: ApiRouter,
        admin_manager: AdminManager,
        topic_configs: TopicConfigsLookup,
        topic_ids: TopicIds,
        authorizer: Authorizer,
    ) -> None:
        self._apis = router
        self._admin = admin_manager
        self._topic_configs = topic_configs
        self._topic_ids = topic_ids
        self._authorizer = authorizer

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.CREATE_TOPICS: self._create_topics,
            apis.DELETE_TOPICS: self._delete_topics,
            apis.CREATE_PARTITIONS: self._create_partitions,
        }

    async def _create_topics(self, request: KafkaRequest, context: RequestContext) -> dict:
        """The AdminManager creates the topics the principal may create (ApiAuthorization's
        CreateTopics rule: Create on the cluster or the topic); each created topic comes back
        with its id and (v5+) its configs."""
        body = request.body
        validate_only = body["validate_only"]
        results: list[dict[str, Any] | None] = []
        creatable: list[NewTopic] = []
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
            creatable.append(NewTopic(topic["name"], topic["num_partitions"], configs))
            results.append(None)
        if creatable:
            outcomes = await handle_permitted(
                self._apis,
                context,
                apis.CREATE_TOPICS,
                [topic.name for topic in creatable],
                creatable,
                lambda topics: self._admin.create_topics(topics, validate_only, body["timeout"]),
            )
            created = {
                topic.name: outcome
                for topic, outcome in zip(creatable, outcomes, strict=True)
                if not isinstance(outcome, KafkaError)
            }
            configs_of: dict[str, list[dict[str, Any]]] = {}
            if not validate_only:
                await self._topic_ids.ensure(created)
                configs_of = self._configs(context, list(created))
            answers = iter(zip(creatable, outcomes, strict=True))
            for index, result in enumerate(results):
                if result is None:
                    topic, outcome = next(answers)
                    results[index] = self._created(topic.name, outcome, configs_of, validate_only)
        return {"topics": results}

    def _created(
        self,
        name: str,
        outcome: int | KafkaError,
        configs_of: dict[str, list[dict[str, Any]]],
        validate_only: bool,
    ) -> dict[str, Any]:
        """A creatable topic's result: its error, or its id, partitions and configs."""
        if isinstance(outcome, KafkaError):
            return {
                "name": name,
                "topic_id": None,
                "error_code": outcome.code,
                "error_message": outcome.message,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,  # (a failed topic has none)
            }
        result = {
            "name": name,
            "topic_id": self._topic_ids.get(name),
            "error_code": 0,
            "error_message": None,
            "num_partitions": outcome,
            "replication_factor": 1,
            # Kafka's Java admin client reads the configs of every topic created without
            # error (it fails on null).
            "configs": configs_of.get(name, []),
        }
        if not validate_only and name not in configs_of:  # no DescribeConfigs: Kafka's answer
            result.update(
                num_partitions=-1,
                replication_factor=-1,
                configs=[],
                topic_config_error_code=TopicAuthorizationFailedError.code,
            )
        return result

    def _configs(
        self, context: RequestContext, names: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """Every config of the topics just created, as CreateTopics v5+ returns them: those
        the principal may describe."""
        configs_of = {}
        for name in names:
            found = self._topic_configs(context, name)
            if isinstance(found, KafkaError):
                continue
            configs_of[name] = [
                {
                    "name": entry.name,
                    "value": entry.value,
                    "read_only": False,
                    "config_source": CONFIG_SOURCE_CODES[entry.source.name],
                    "is_sensitive": False,
                }
                for entry in found
            ]
        return configs_of

    async def _delete_topics(self, request: KafkaRequest, context: RequestContext) -> dict:
        """By name, or (v6+) by id: the AdminManager deletes those the principal may delete
        (ApiAuthorization's DeleteTopics rule); an unknown id is UNKNOWN_TOPIC_ID, and a topic
        asked for by id that the principal may not delete is named only if it may describe it
        (the id is not secret, the name is), as Kafka answers."""
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
        errors = await handle_permitted(
            self._apis, context, apis.DELETE_TOPICS, names, names, self._admin.delete_topics
        )
        for name, error in zip(names, errors, strict=True):
            if error is None:
                self._topic_ids.forget(name)
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
                    "name": None if self._name_hidden(context, name, error, asked_by_id) else name,
                    "topic_id": ids.get(name),
                    "error_code": error.code if error is not None else 0,
                    "error_message": error.message if error is not None else None,
                }
                for name, error in zip(names, errors, strict=True)
            ]
        }

    def _name_hidden(
        self,
        context: RequestContext,
        name: str,
        error: KafkaError | None,
        asked_by_id: set[str],
    ) -> bool:
        """Whether a topic asked for by id was refused to a principal that may not see it."""
        return (
            name in asked_by_id
            and error is not None
            and error.code == TopicAuthorizationFailedError.code
            and not self._authorizer.may(context, AclOperation.DESCRIBE, name)
        )

    async def _create_partitions(self, request: KafkaRequest, context: RequestContext) -> dict:
        """The AdminManager grows the topics the principal may alter (ApiAuthorization's
        CreatePartitions rule); new partitions get their topic's id."""
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
            counts.append((topic["name"], topic["count"]))
            results.append(None)
        if counts:
            errors = await handle_permitted(
                self._apis,
                context,
                apis.CREATE_PARTITIONS,
                [name for name, _ in counts],
                counts,
                lambda allowed: self._admin.create_partitions(
                    allowed, body["validate_only"], body["timeout"]
                ),
            )
            grown = iter(zip(counts, errors, strict=True))
            for index, result in enumerate(results):
                if result is None:
                    (name, _), error = next(grown)
                    results[index] = {
                        "name": name,
                        "error_code": error.code if error is not None else 0,
                        "error_message": error.message if error is not None else None,
                    }
            await self._topic_ids.ensure(dict.fromkeys(name for name, _ in counts))
        return {"results": results}
