"""MsgpackQuotaApis: DescribeClientQuotas and AlterClientQuotas on odradek's msgpack
protocol, answered by the ClientQuotaAdmin Kafka's protocol uses."""

from __future__ import annotations

from odradek.protocol.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlteredClientQuotas,
    ClientQuotaEntry,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    QuotaEntityPart,
    QuotaValue,
)
from odradek.server.quota.client_quota_admin import ClientQuotaAdmin
from odradek.server.quota.client_quota_entity import ClientQuotaFilterComponent
from odradek.server.request_context import RequestContext


class MsgpackQuotaApis:
    def __init__(self, admin: ClientQuotaAdmin) -> None:
        self._admin = admin

    async def describe_client_quotas(
        self, request: DescribeClientQuotasRequest, context: RequestContext
    ) -> DescribeClientQuotasResponse:
        """A refusal (CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST) is the request's error."""
        components = [
            ClientQuotaFilterComponent(c.entity_type, c.match_type, c.match)
            for c in request.components
        ]
        quotas = await self._admin.describe(context, components, request.strict)
        return DescribeClientQuotasResponse(
            entries=tuple(
                ClientQuotaEntry(
                    tuple(QuotaEntityPart(t, name) for t, name in entity.entries),
                    tuple(QuotaValue(key, value) for key, value in sorted(values.items())),
                )
                for entity, values in quotas.items()
            )
        )

    async def alter_client_quotas(
        self, request: AlterClientQuotasRequest, context: RequestContext
    ) -> AlterClientQuotasResponse:
        entries = [
            (
                [(part.entity_type, part.entity_name) for part in entry.entity],
                [(op.key, None if op.remove else op.value) for op in entry.ops],
            )
            for entry in request.entries
        ]
        errors = await self._admin.alter(context, entries, request.validate_only)
        return AlterClientQuotasResponse(
            tuple(
                AlteredClientQuotas(
                    entry.entity, error.code if error else 0, error.message if error else None
                )
                for entry, error in zip(request.entries, errors, strict=True)
            )
        )
