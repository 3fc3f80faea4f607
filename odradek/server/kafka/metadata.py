"""KafkaMetadataApis: ApiVersions, Metadata and DescribeCluster on Kafka's protocol: what a
client asks first, of the broker, its APIs and the cluster's topics and partitions.

Metadata reads the AdminManager's topics (AdminManager.find_topics) with Kafka's request data,
authorized by ApiAuthorization's Metadata rules, the same as the msgpack protocol's
(server/msgpack/metadata.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from odradek.errors import (
    InvalidRequestError,
    KafkaError,
    RebootstrapRequiredError,
    TopicAuthorizationFailedError,
    UnknownTopicIdError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.api_versions import ADVERTISED
from odradek.protocol.kafka.message_codec import ZERO_UUID
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.admin.admin_manager import AdminManager, PartitionState
from odradek.server.admin.topic_ids import TopicIds
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import LEADER_EPOCH, KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext

INVALID_REQUEST = InvalidRequestError.code
TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailedError.code


def api_versions_body(error_code: int = 0) -> dict[str, Any]:
    """ApiVersions' answer: every API and version range served, and the finalized features
    (also what an ApiVersions of a version not served gets, at v0, with its error)."""
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


class KafkaMetadataApis:
    """The broker's APIs, the cluster and its topics, as Kafka's protocol asks for them."""

    def __init__(
        self,
        router: ApiRouter,
        admin_manager: AdminManager,
        topic_ids: TopicIds,
        node_id: int,
        endpoint: Callable[[RequestContext], tuple[str, int]],
        authorizer: Authorizer,
    ) -> None:
        self._apis = router
        self._admin = admin_manager
        self._topic_ids = topic_ids
        self._node_id = node_id
        self._endpoint = endpoint
        self._authorizer = authorizer

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.API_VERSIONS: self._api_versions,
            apis.METADATA: self._metadata,
            apis.DESCRIBE_CLUSTER: self._describe_cluster,
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
        return api_versions_body()

    def _broker(self, context: RequestContext) -> dict[str, Any]:
        host, port = self._endpoint(context)
        return {"node_id": self._node_id, "broker_id": self._node_id, "host": host, "port": port}

    async def _metadata(self, request: KafkaRequest, context: RequestContext) -> dict:
        """The AdminManager's topics as the principal may see them (ApiAuthorization's
        Metadata rules, as for the msgpack protocol); a topic asked for by id (v12) is named
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
        auto_create = body.get("allow_auto_topic_creation", True)
        found = await self._apis.authorization.metadata_topics(
            context, names, auto_create, self._admin.find_topics
        )
        self._apis.count_entry_errors(
            apis.METADATA, (t.code if isinstance(t, KafkaError) else 0 for _, t in found)
        )
        await self._topic_ids.ensure(
            {name: len(t) for name, t in found if not isinstance(t, KafkaError)}
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
        for name, topic in found:
            if isinstance(topic, KafkaError):
                entry = {"error_code": topic.code, "name": name, "topic_id": None, "partitions": []}
            else:
                entry = {
                    "error_code": 0,
                    "name": name,
                    "topic_id": self._topic_ids.get(name),
                    "partitions": [self._partition_entry(p) for p in topic],
                }
            if entry["error_code"] == TOPIC_AUTHORIZATION_FAILED:
                if name in asked_by_id:
                    entry.update(name=None, topic_id=asked_by_id[name])
            elif with_operations:
                entry["topic_authorized_operations"] = self._authorizer.authorized_operations(
                    context, ResourceType.TOPIC, name
                )
            topic_entries.append(entry)
        answer = {
            "brokers": [self._broker(context)],
            "cluster_id": self._admin.cluster_id,
            "controller_id": self._node_id,
            "topics": topic_entries,
        }
        if body.get("include_cluster_authorized_operations", False):  # v8-10
            answer["cluster_authorized_operations"] = self._cluster_operations(context)
        return answer

    def _partition_entry(self, partition: PartitionState) -> dict[str, Any]:
        if partition.error is not None:
            return {
                "error_code": partition.error.code,
                "partition_index": partition.partition,
                "leader_id": -1,
                "leader_epoch": -1,
                "replica_nodes": [],
                "isr_nodes": [],
            }
        leader = self._node_id
        return {
            "error_code": 0,
            "partition_index": partition.partition,
            "leader_id": leader,
            "leader_epoch": LEADER_EPOCH,
            "replica_nodes": [leader],
            "isr_nodes": [leader],
        }

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
