"""KafkaAclApis: CreateAcls, DescribeAcls and DeleteAcls on Kafka's protocol, over the
AclStore (so kafka-acls.sh and the clients' admin APIs manage odradek's ACLs). They need
Alter (create, delete) or Describe on the Cluster, and an authorizer configured
(SECURITY_DISABLED otherwise, as Kafka answers)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from odradek.errors import InvalidRequestError, KafkaError, SecurityDisabledError
from odradek.protocol.kafka import api_versions as apis
from odradek.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.security.kafka_principal import KafkaPrincipal
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext


class KafkaAclApis:
    """The ACL APIs of Kafka's protocol."""

    def __init__(self, authorizer: Authorizer, executor: Executor) -> None:
        self._authorizer = authorizer
        self._executor = executor

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.CREATE_ACLS: self._create_acls,
            apis.DESCRIBE_ACLS: self._describe_acls,
            apis.DELETE_ACLS: self._delete_acls,
        }

    def _refusal(self, context: RequestContext, operation: AclOperation) -> KafkaError | None:
        if not self._authorizer.enabled:
            return SecurityDisabledError("no authorizer is configured (authorizer.class.name)")
        return self._authorizer.cluster_denial(context, operation)

    async def _create_acls(self, request: KafkaRequest, context: RequestContext) -> dict:
        creations = request.body["creations"]
        refusal = self._refusal(context, AclOperation.ALTER)
        results: list[KafkaError | None] = []
        bindings = []
        for creation in creations:
            if refusal is not None:
                results.append(refusal)
                continue
            try:
                bindings.append(binding_of(creation))
                results.append(None)
            except InvalidRequestError as error:
                results.append(error)
        if bindings:
            await self._in_thread(lambda: self._authorizer.acls.add(bindings))
        return {
            "throttle_time": 0,
            "results": [
                {
                    "error_code": error.code if error else 0,
                    "error_message": error.message if error else None,
                }
                for error in results
            ],
        }

    async def _describe_acls(self, request: KafkaRequest, context: RequestContext) -> dict:
        refusal = self._refusal(context, AclOperation.DESCRIBE)
        if refusal is not None:
            return _describe_error(refusal)
        try:
            acl_filter = filter_of(request.body)
        except InvalidRequestError as error:
            return _describe_error(error)
        bindings = await self._in_thread(self._authorizer.acls.bindings)
        resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for binding in bindings:
            if acl_filter.matches(binding):
                key = (binding.resource_type, binding.resource_name, binding.pattern_type)
                resources.setdefault(key, []).append(
                    {
                        "principal": binding.principal,
                        "host": binding.host,
                        "operation": binding.operation,
                        "permission_type": binding.permission,
                    }
                )
        return {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "resources": [
                {
                    "resource_type": int(kind),
                    "resource_name": name,
                    "pattern_type": int(pattern),
                    "acls": [{k: int(v) if k in _INTS else v for k, v in a.items()} for a in acls],
                }
                for (kind, name, pattern), acls in resources.items()
            ],
        }

    async def _delete_acls(self, request: KafkaRequest, context: RequestContext) -> dict:
        refusal = self._refusal(context, AclOperation.ALTER)
        filters: list[AclBindingFilter | KafkaError] = []
        for entry in request.body["filters"]:
            if refusal is not None:
                filters.append(refusal)
                continue
            try:
                filters.append(filter_of(entry))
            except InvalidRequestError as error:
                filters.append(error)
        valid = [f for f in filters if isinstance(f, AclBindingFilter)]
        removed = iter(await self._in_thread(lambda: self._authorizer.acls.remove(valid)))
        results = []
        for entry in filters:
            if isinstance(entry, KafkaError):
                results.append(
                    {"error_code": entry.code, "error_message": entry.message, "matching_acls": []}
                )
                continue
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": int(b.resource_type),
                            "resource_name": b.resource_name,
                            "pattern_type": int(b.pattern_type),
                            "principal": b.principal,
                            "host": b.host,
                            "operation": int(b.operation),
                            "permission_type": int(b.permission),
                        }
                        for b in next(removed)
                    ],
                }
            )
        return {"throttle_time": 0, "filter_results": results}

    async def _in_thread(self, function: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function)


_INTS = frozenset({"operation", "permission_type"})


def binding_of(creation: dict[str, Any]) -> AclBinding:
    """The binding a CreateAcls entry asks for; InvalidRequestError saying what is wrong."""
    resource_type = _enum(ResourceType, creation["resource_type"], "resource type")
    pattern = _enum(PatternType, creation.get("resource_pattern_type", 3), "pattern type")
    operation = _enum(AclOperation, creation["operation"], "operation")
    permission = _enum(PermissionType, creation["permission_type"], "permission type")
    name = creation["resource_name"]
    if resource_type == ResourceType.ANY:
        raise InvalidRequestError("an ACL needs a resource type, not ANY")
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError("an ACL's pattern type is LITERAL or PREFIXED")
    if operation == AclOperation.ANY or permission == PermissionType.ANY:
        raise InvalidRequestError("an ACL needs an operation and a permission, not ANY")
    if not name:
        raise InvalidRequestError("an ACL needs a resource name")
    if resource_type == ResourceType.CLUSTER and name != CLUSTER_NAME:
        raise InvalidRequestError(f"the cluster resource is named {CLUSTER_NAME}, not {name}")
    try:
        principal = str(KafkaPrincipal.parse(creation["principal"]))
    except ValueError as error:
        raise InvalidRequestError(str(error)) from None
    return AclBinding(
        resource_type, name, pattern, principal, creation["host"] or "*", operation, permission
    )


def filter_of(entry: dict[str, Any]) -> AclBindingFilter:
    """The filter of a DescribeAcls request or DeleteAcls entry."""
    return AclBindingFilter(
        _enum(ResourceType, entry["resource_type_filter"], "resource type"),
        entry["resource_name_filter"],
        _enum(PatternType, entry.get("pattern_type_filter", 3), "pattern type"),
        entry["principal_filter"],
        entry["host_filter"],
        _enum(AclOperation, entry["operation"], "operation"),
        _enum(PermissionType, entry["permission_type"], "permission type"),
    )


def _enum(kind: Any, value: int, what: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise InvalidRequestError(f"{what} {value} is unknown or not supported") from None


def _describe_error(error: KafkaError) -> dict:
    return {
        "throttle_time": 0,
        "error_code": error.code,
        "error_message": error.message,
        "resources": [],
    }
