"""KafkaQuotaApis: DescribeClientQuotas (48) and AlterClientQuotas (49) on Kafka's
protocol, so ``kafka-configs.sh --entity-type users/clients`` and Kafka's admin clients manage
odradek's client quotas (ClientQuotaAdmin answers both protocols)."""

from __future__ import annotations

from odradek.errors import KafkaError
from odradek.protocol.kafka import api_versions as apis
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.quota.client_quota_admin import ClientQuotaAdmin
from odradek.server.quota.client_quota_entity import ClientQuotaFilterComponent
from odradek.server.request_context import RequestContext


class KafkaQuotaApis:
    """The client-quota APIs of Kafka's protocol."""

    def __init__(self, admin: ClientQuotaAdmin) -> None:
        self._admin = admin

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.DESCRIBE_CLIENT_QUOTAS: self._describe_client_quotas,
            apis.ALTER_CLIENT_QUOTAS: self._alter_client_quotas,
        }

    async def _describe_client_quotas(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        components = [
            ClientQuotaFilterComponent(c["entity_type"], c["match_type"], c["match"])
            for c in body["components"]
        ]
        try:
            quotas = await self._admin.describe(context, components, body["strict"])
        except KafkaError as error:
            return {
                "throttle_time": 0,
                "error_code": error.code,
                "error_message": error.message,
                "entries": None,
            }
        entries = [
            {
                "entity": [
                    {"entity_type": entity_type, "entity_name": name}
                    for entity_type, name in entity.entries
                ],
                "values": [{"key": key, "value": value} for key, value in sorted(values.items())],
            }
            for entity, values in quotas.items()
        ]
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries}

    async def _alter_client_quotas(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        entries = [
            (
                [(e["entity_type"], e["entity_name"]) for e in entry["entity"]],
                [(op["key"], None if op["remove"] else float(op["value"])) for op in entry["ops"]],
            )
            for entry in body["entries"]
        ]
        errors = await self._admin.alter(context, entries, body["validate_only"])
        return {
            "throttle_time": 0,
            "entries": [
                {
                    "error_code": error.code if error else 0,
                    "error_message": error.message if error else None,
                    "entity": [
                        {"entity_type": e["entity_type"], "entity_name": e["entity_name"]}
                        for e in entry["entity"]
                    ],
                }
                for entry, error in zip(body["entries"], errors, strict=True)
            ],
        }
