"""MsgpackMetadataApis: Metadata on odradek's msgpack protocol, answered from the
AdminManager's topics as the Kafka protocol's Metadata is (server/kafka/metadata.py), and
authorized by the same rules (ApiAuthorization.metadata_topics); and DescribeTopicPartitions,
which only this protocol has, mapped from the AdminManager's descriptions of the partitions'
logs (ApiRouter authorizes it first)."""

from __future__ import annotations

from odradek.errors import KafkaError
from odradek.protocol.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    PartitionDescription,
    TopicDescription,
)
from odradek.protocol.metadata import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.server.admin.admin_manager import AdminManager, DescribedTopic, FoundTopic
from odradek.server.authorization.api_authorization import ApiAuthorization
from odradek.server.msgpack.configs import config_entries
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

    async def describe_topic_partitions(
        self, request: DescribeTopicPartitionsRequest, _context: RequestContext
    ) -> DescribeTopicPartitionsResponse:
        described = await self._admin.describe_topic_partitions(request.topics)
        return DescribeTopicPartitionsResponse(tuple(map(_topic_description, described)))


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


def _topic_description(topic: DescribedTopic) -> TopicDescription:
    if topic.error is not None:
        return TopicDescription(topic.name, topic.error.code, topic.error.message)
    partitions = tuple(
        PartitionDescription(partition, found.code, found.message)
        if isinstance(found, KafkaError)
        else PartitionDescription(
            partition,
            log_start_offset=found.log_start_offset,
            high_watermark=found.high_watermark,
            log_end_offset=found.log_end_offset,
            size_bytes=found.size_in_bytes,
            segment_count=found.number_of_segments,
            log_dir=str(found.log_dir),
        )
        for partition, found in topic.partitions
    )
    return TopicDescription(
        topic.name, partitions=partitions, configs=config_entries(topic.configs)
    )
