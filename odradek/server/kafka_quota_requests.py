"""KafkaQuotaRequests: DescribeClientQuotas (48) and AlterClientQuotas (49) on Kafka's
protocol, so ``kafka-configs.sh --entity-type users/clients`` and Kafka's admin clients manage
odradek's client quotas. Describing needs DescribeConfigs on the cluster, altering
AlterConfigs (CLUSTER_AUTHORIZATION_FAILED otherwise), as in Kafka."""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Any

from odradek.errors import InvalidRequestError, KafkaError
from odradek.protocol.kafka import api_versions as apis
from odradek.security.acl import AclOperation
from odradek.server.authorizer import Authorizer
from odradek.server.kafka_request import KafkaHandler, KafkaRequest
from odradek.server.quota.client_quota_entity import (
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
    filter_matches,
    validate_filter,
)
from odradek.server.quota.client_quota_store import QuotaChange, validate_quota
from odradek.server.quota.client_quotas import ClientQuotas
from odradek.server.request_context import RequestContext


class KafkaQuotaRequests:
    """The client-quota APIs of Kafka's protocol."""

    def __init__(self, quotas: ClientQuotas, authorizer: Authorizer, executor: Executor) -> None:
        self._quotas = quotas
        self._authorizer = authorizer
        self._executor = executor

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.DESCRIBE_CLIENT_QUOTAS: self._describe_client_quotas,
            apis.ALTER_CLIENT_QUOTAS: self._alter_client_quotas,
        }

    async def _describe_client_quotas(self, request: KafkaRequest, context: RequestContext) -> dict:
        denied = self._authorizer.cluster_denial(context, AclOperation.DESCRIBE_CONFIGS)
        if denied is not None:
            return _describe_error(denied)
        body = request.body
        components = [
            ClientQuotaFilterComponent(c["entity_type"], c["match_type"], c["match"])
            for c in body["components"]
        ]
        try:
            validate_filter(components)
        except ValueError as error:
            return _describe_error(InvalidRequestError(str(error)))
        quotas = await self._in_thread(self._quotas.describe)
        entries = [
            {
                "entity": [
                    {"entity_type": entity_type, "entity_name": name}
                    for entity_type, name in entity.entries
                ],
                "values": [{"key": key, "value": value} for key, value in sorted(values.items())],
            }
            for entity, values in sorted(quotas.items(), key=lambda item: str(item[0]))
            if filter_matches(entity, components, body["strict"])
        ]
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries}

    async def _alter_client_quotas(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        denied = self._authorizer.cluster_denial(context, AclOperation.ALTER_CONFIGS)
        results: list[tuple[list[dict[str, Any]], KafkaError | None]] = []
        changes: list[QuotaChange] = []
        for entry in body["entries"]:
            error: KafkaError | None = denied
            if error is None:
                try:
                    changes.append(_change(entry))
                except ValueError as failure:
                    error = InvalidRequestError(str(failure))
            results.append((entry["entity"], error))
        if changes and not body["validate_only"]:
            quotas = await self._in_thread(lambda: self._quotas.alter(changes))
            self._quotas.applied(quotas)
        return {
            "throttle_time": 0,
            "entries": [
                {
                    "error_code": error.code if error else 0,
                    "error_message": error.message if error else None,
                    "entity": [
                        {"entity_type": e["entity_type"], "entity_name": e["entity_name"]}
                        for e in entity
                    ],
                }
                for entity, error in results
            ],
        }

    async def _in_thread(self, function: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function)


def _change(entry: dict[str, Any]) -> QuotaChange:
    """One entry's entity and quota changes; raises ValueError when they are invalid."""
    mapping: dict[str, str | None] = {}
    for e in entry["entity"]:
        if e["entity_type"] in mapping:
            raise ValueError(f"entity type {e['entity_type']!r} appears twice")
        mapping[e["entity_type"]] = e["entity_name"]
    entity = ClientQuotaEntity.from_mapping(mapping)
    values: dict[str, float | None] = {}
    for op in entry["ops"]:
        if op["key"] in values:
            raise ValueError(f"quota {op['key']!r} is altered twice")
        value = None if op["remove"] else float(op["value"])
        validate_quota(op["key"], value)
        values[op["key"]] = value
    return entity, values


def _describe_error(error: KafkaError) -> dict:
    return {
        "throttle_time": 0,
        "error_code": error.code,
        "error_message": error.message,
        "entries": None,
    }
