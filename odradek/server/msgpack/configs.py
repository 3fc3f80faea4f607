"""MsgpackConfigApis: DescribeConfigs and AlterConfigs (topic configs) on odradek's msgpack
protocol, mapped onto the AdminManager's calls the Kafka protocol's handlers make
(server/kafka/configs.py). ApiRouter authorizes their entries first."""

from __future__ import annotations

from collections.abc import Iterable

from odradek.config.config_entry import ConfigEntry as StoredConfigEntry
from odradek.errors import KafkaError
from odradek.protocol.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    ConfigEntry,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    TopicConfigs,
)
from odradek.protocol.topics import TopicResult
from odradek.server.admin.admin_manager import AdminManager
from odradek.server.request_context import RequestContext


class MsgpackConfigApis:
    """The topic config messages mapped onto the AdminManager."""

    def __init__(self, admin_manager: AdminManager) -> None:
        self._admin = admin_manager

    async def describe_configs(
        self, request: DescribeConfigsRequest, _context: RequestContext
    ) -> DescribeConfigsResponse:
        return DescribeConfigsResponse(tuple(map(self._topic_configs, request.topics)))

    def _topic_configs(self, name: str) -> TopicConfigs:
        found = self._admin.topic_configs(name)
        if isinstance(found, KafkaError):
            return TopicConfigs(name, found.code, found.message)
        return TopicConfigs(name, entries=config_entries(found))

    async def alter_configs(
        self, request: AlterConfigsRequest, _context: RequestContext
    ) -> AlterConfigsResponse:
        """Each topic's overrides changed in turn (odradek's AlterConfigs is Kafka's
        IncrementalAlterConfigs: the overrides not named stay)."""
        results = []
        for topic in request.topics:
            error = await self._admin.alter_topic_configs(
                topic.name, topic.configs, request.validate_only
            )
            results.append(
                TopicResult(topic.name)
                if error is None
                else TopicResult(topic.name, error.code, error.message)
            )
        return AlterConfigsResponse(tuple(results))


def config_entries(entries: Iterable[StoredConfigEntry]) -> tuple[ConfigEntry, ...]:
    """A topic's config entries, as the AdminManager gives them, as the msgpack protocol's
    DescribeConfigs and DescribeTopicPartitions carry them."""
    return tuple(
        ConfigEntry(entry.name, entry.value, ConfigSource[entry.source.name], entry.is_default)
        for entry in entries
    )
