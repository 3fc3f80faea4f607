"""ClientQuotaAdmin: DescribeClientQuotas and AlterClientQuotas for both protocols' handlers
(Kafka's ``ConfigAdminManager`` for quota entities): describing needs DescribeConfigs on the
cluster and altering AlterConfigs, as in Kafka; each entry of an alteration is validated on
its own (INVALID_REQUEST naming what is wrong) and the valid ones are applied together."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Executor

from odradek.errors import InvalidRequestError, KafkaError
from odradek.security.acl import AclOperation
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.quota.client_quota_entity import (
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
    filter_matches,
    validate_filter,
)
from odradek.server.quota.client_quota_store import QuotaChange, Quotas, validate_quota
from odradek.server.quota.client_quotas import ClientQuotas
from odradek.server.request_context import RequestContext

EntityParts = Sequence[tuple[str, str | None]]
"""(entity type, name or None for the default), as a request names an entity."""
Ops = Sequence[tuple[str, float | None]]
"""(quota key, value or None to remove it)."""


class ClientQuotaAdmin:
    def __init__(self, quotas: ClientQuotas, authorizer: Authorizer, executor: Executor) -> None:
        self._quotas = quotas
        self._authorizer = authorizer
        self._executor = executor

    async def describe(
        self,
        context: RequestContext,
        components: list[ClientQuotaFilterComponent],
        strict: bool,
    ) -> Quotas:
        """The quotas of the entities the filter matches; raises a KafkaError."""
        denied = self._authorizer.cluster_denial(context, AclOperation.DESCRIBE_CONFIGS)
        if denied is not None:
            raise denied
        try:
            validate_filter(components)
        except ValueError as error:
            raise InvalidRequestError(str(error)) from None
        quotas = await self._in_thread(self._quotas.describe)
        return {
            entity: values
            for entity, values in sorted(quotas.items(), key=lambda item: str(item[0]))
            if filter_matches(entity, components, strict)
        }

    async def alter(
        self,
        context: RequestContext,
        entries: list[tuple[EntityParts, Ops]],
        validate_only: bool,
    ) -> list[KafkaError | None]:
        """Each entry's refusal (None: applied, or valid when ``validate_only``)."""
        denied = self._authorizer.cluster_denial(context, AclOperation.ALTER_CONFIGS)
        errors: list[KafkaError | None] = []
        changes: list[QuotaChange] = []
        for parts, ops in entries:
            error: KafkaError | None = denied
            if error is None:
                try:
                    changes.append(_change(parts, ops))
                except ValueError as failure:
                    error = InvalidRequestError(str(failure))
            errors.append(error)
        if changes and not validate_only:
            quotas = await self._in_thread(lambda: self._quotas.alter(changes))
            self._quotas.applied(quotas)
        return errors

    async def _in_thread(self, function: object) -> object:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function)


def _change(parts: EntityParts, ops: Ops) -> QuotaChange:
    """One entry's entity and changes; raises ValueError when they are invalid."""
    mapping: dict[str, str | None] = {}
    for entity_type, name in parts:
        if entity_type in mapping:
            raise ValueError(f"entity type {entity_type!r} appears twice")
        mapping[entity_type] = name
    entity = ClientQuotaEntity.from_mapping(mapping)
    values: dict[str, float | None] = {}
    for key, value in ops:
        if key in values:
            raise ValueError(f"quota {key!r} is altered twice")
        validate_quota(key, value)
        values[key] = value
    return entity, values
