"""MsgpackTopicApis: CreateTopics, DeleteTopics and CreatePartitions on odradek's msgpack
protocol, mapped onto the AdminManager's calls the Kafka protocol's handlers make
(server/kafka/topics.py); ApiRouter authorizes their entries first."""

from __future__ import annotations

from odradek.errors import KafkaError
from odradek.protocol.topics import (
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    TopicResult,
)
from odradek.server.admin.admin_manager import AdminManager, NewTopic
from odradek.server.request_context import RequestContext


class MsgpackTopicApis:
    """The topic administration messages mapped onto the AdminManager."""

    def __init__(self, admin_manager: AdminManager) -> None:
        self._admin = admin_manager

    async def create_topics(
        self, request: CreateTopicsRequest, _context: RequestContext
    ) -> CreateTopicsResponse:
        topics = request.topics
        outcomes = await self._admin.create_topics(
            [NewTopic(t.name, t.num_partitions, t.configs) for t in topics],
            request.validate_only,
            request.timeout_ms,
        )
        return CreateTopicsResponse(
            tuple(
                CreatableTopicResult(topic.name, outcome.code, outcome.message)
                if isinstance(outcome, KafkaError)
                else CreatableTopicResult(topic.name, num_partitions=outcome)
                for topic, outcome in zip(topics, outcomes, strict=True)
            )
        )

    async def delete_topics(
        self, request: DeleteTopicsRequest, _context: RequestContext
    ) -> DeleteTopicsResponse:
        errors = await self._admin.delete_topics(request.topics)
        return DeleteTopicsResponse(
            tuple(
                _topic_result(name, error)
                for name, error in zip(request.topics, errors, strict=True)
            )
        )

    async def create_partitions(
        self, request: CreatePartitionsRequest, _context: RequestContext
    ) -> CreatePartitionsResponse:
        errors = await self._admin.create_partitions(
            [(topic.name, topic.count) for topic in request.topics],
            request.validate_only,
            request.timeout_ms,
        )
        return CreatePartitionsResponse(
            tuple(
                _topic_result(topic.name, error)
                for topic, error in zip(request.topics, errors, strict=True)
            )
        )


def _topic_result(name: str, error: KafkaError | None) -> TopicResult:
    return TopicResult(name) if error is None else TopicResult(name, error.code, error.message)
