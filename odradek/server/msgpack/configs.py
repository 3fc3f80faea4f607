"""MsgpackConfigApis: DescribeConfigs and AlterConfigs (topic configs) on odradek's msgpack
protocol; DescribeConfigs is mapped onto the AdminManager's call the Kafka protocol's
handler makes (server/kafka/configs.py). ApiRouter authorizes their entries first."""

from __future__ import annotations

from odradek.errors import KafkaError
from odradek.protocol.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    TopicConfigs,
)
from odradek.server.admin.admin_manager import AdminManager, config_entries
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
        return await self._admin.alter_configs(request)
