"""The partitions of the topics a producer writes to, fetched from the broker on first use."""

from __future__ import annotations

import asyncio
import logging

from odradek.client.network_client import NetworkClient
from odradek.errors import KafkaError, UnknownTopicOrPartitionError, error_for_code
from odradek.protocol.metadata import MetadataRequest, MetadataResponse
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class ProducerMetadata:
    """The producer's cache of topic -> partitions; reads are safe from any thread."""

    def __init__(self, client: NetworkClient, retry_backoff_ms: int) -> None:
        self._client = client
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._partitions: dict[str, tuple[TopicPartition, ...]] = {}

    def partitions(self, topic: str) -> tuple[TopicPartition, ...] | None:
        """The topic's partitions if known, without waiting."""
        return self._partitions.get(topic)

    async def fetch_partitions(self, topic: str) -> tuple[TopicPartition, ...]:
        """The topic's partitions, asking the broker (which may create the topic) until it knows.

        Retriable errors (e.g. a topic still being created) are retried every
        ``retry_backoff_ms``, others raised; the caller bounds the wait.
        """
        while True:
            known = self._partitions.get(topic)
            if known is not None:
                return known
            try:
                self._update(await self._client.send(MetadataRequest((topic,))), topic)
            except KafkaError as error:
                if not error.retriable:
                    raise
                logger.debug("metadata for %r not available yet: %s", topic, error)
                await asyncio.sleep(self._retry_backoff_s)

    def _update(self, response: MetadataResponse, topic: str) -> None:
        for entry in response.topics:
            if entry.name != topic:
                continue
            if entry.error:
                raise error_for_code(entry.error, entry.message or "")
            if not entry.partitions:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partitions yet")
            self._partitions[topic] = tuple(
                TopicPartition(topic, p) for p in range(len(entry.partitions))
            )
            return
        raise UnknownTopicOrPartitionError(f"the broker's metadata does not list topic {topic!r}")
