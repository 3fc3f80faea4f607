"""MsgpackMetadataApis: Metadata on odradek's msgpack protocol, answered from the
AdminManager's topics as the Kafka protocol's Metadata is (server/kafka/metadata.py), and
authorized by the same rules (ApiAuthorization.metadata_topics)."""

from __future__ import annotations

from odradek.errors import KafkaError
from odradek.protocol.metadata import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.server.admin.admin_manager import AdminManager, FoundTopic
from odradek.server.authorization.api_authorization import ApiAuthorization
from odradek.server.request_context import RequestContext


class MsgpackMetadataApis:
    """Metadata's messages mapped onto the AdminManager's topics."""

    def __init__(self, admin_manager: AdminManager, authorization: ApiAuthorization) -> None:
        self._admin = admin_manager
        self._authorization = authorization

    async def metadata(self, request: MetadataRequest, context: RequestContext) -> MetadataResponse:
        found = await self._authorization.metadata_topics(
            context, request.topics, request.allow_auto_topic_creation, self._admin.find_topics
        )
        broker = self._admin.broker
        topics = tuple(_topic_metadata(name, topic, broker.node_id) for name, topic in found)
        return MetadataResponse(broker, self._admin.cluster_id, topics)


def _topic_metadata(name: str, found: FoundTopic, leader: int) -> TopicMetadata:
    if isinstance(found, KafkaError):
        return TopicMetadata(name, found.code, found.message)
    return TopicMetadata(
        name,
        partitions=tuple(
            PartitionMetadata(p.partition, p.error.code, p.error.message)
            if p.error is not None
            else PartitionMetadata(p.partition, leader=leader)
            for p in found
        ),
    )
