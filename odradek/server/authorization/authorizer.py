"""Authorizer: may this request's principal do this operation on this resource?

Kafka's StandardAuthorizer semantics over the AclStore: super users may do anything; a DENY
binding that matches wins over every ALLOW; an ALLOW of the operation, of All, or of an
operation that implies it (Read, Write, Delete or Alter imply Describe; AlterConfigs implies
DescribeConfigs) allows; a resource no binding names at all is allowed only with
``allow.everyone.if.no.acl.found``. Bindings match the resource LITERALly (or ``*``) or by
PREFIXED name, the principal exactly (or ``User:*``) and the client's host exactly (or ``*``).
Without ``authorizer.class.name`` everything is allowed.

Handlers of both protocols ask here, once per resource of a request (``topic_denial``,
``group_denial``, ``cluster_denial``). Every denial is logged on ``odradek.audit`` with the
principal, operation, resource and peer.
"""

from __future__ import annotations

import logging

from odradek.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from odradek.security.acl import (
    CLUSTER_NAME,
    IMPLIED_BY,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.security.acl_store import AclStore
from odradek.security.kafka_principal import KafkaPrincipal
from odradek.server.request_context import RequestContext

audit_logger = logging.getLogger("odradek.audit")

_DENIALS: dict[ResourceType, type[KafkaError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError,
}


class Authorizer:
    """Checks operations against the ACLs (``enabled``) or allows everything."""

    def __init__(
        self,
        acls: AclStore | None = None,
        enabled: bool = False,
        super_users: frozenset[str] = frozenset(),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.acls = acls
        self.enabled = enabled and acls is not None
        self._super_users = super_users
        self._allow_if_no_acl = allow_if_no_acl

    @classmethod
    def parse_super_users(cls, text: str) -> frozenset[str]:
        """``super.users``: principals separated by semicolons."""
        return frozenset(
            str(KafkaPrincipal.parse(entry)) for entry in text.split(";") if entry.strip()
        )

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the resource."""
        if not self.enabled or str(principal) in self._super_users:
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        allowing = {operation, AclOperation.ALL} | IMPLIED_BY.get(operation, frozenset())
        any_for_resource = False
        allowed = False
        for binding in self.acls.bindings():
            if not binding.matches_resource(resource_type, name):
                continue
            any_for_resource = True
            if binding.principal not in principals or binding.host not in (host, WILDCARD):
                continue
            if binding.permission == PermissionType.DENY and binding.operation in (
                operation,
                AclOperation.ALL,
            ):
                return False
            if binding.permission == PermissionType.ALLOW and binding.operation in allowing:
                allowed = True
        return allowed or (not any_for_resource and self._allow_if_no_acl)

    def denial(
        self,
        context: RequestContext,
        operation: AclOperation | str,
        resource_type: ResourceType,
        name: str,
    ) -> KafkaError | None:
        """None when the request's principal may; else the error to answer, audit-logged."""
        if not self.enabled:
            return None
        if isinstance(operation, str):
            operation = AclOperation.parse(operation)
        session = context.session
        if session is None:
            return None  # a handler called in-process, not on behalf of a connection
        if self.authorize(session.principal, session.host, operation, resource_type, name):
            return None
        audit_logger.warning(
            "denied: principal=%s operation=%s resource=%s:%s peer=%s listener=%s",
            session.principal,
            operation.title,
            resource_type.title,
            name,
            session.peer,
            session.listener.listener_name,
        )
        return _DENIALS[resource_type](
            f"{session.principal} may not {operation.title} {resource_type.title} {name}"
        )

    def topic_denial(
        self, context: RequestContext, operation: AclOperation | str, topic: str
    ) -> KafkaError | None:
        return self.denial(context, operation, ResourceType.TOPIC, topic)

    def group_denial(
        self, context: RequestContext, operation: AclOperation | str, group: str
    ) -> KafkaError | None:
        """For the group coordinator (Read, Describe, Delete on a group id)."""
        return self.denial(context, operation, ResourceType.GROUP, group)

    def transactional_id_denial(
        self, context: RequestContext, operation: AclOperation | str, transactional_id: str
    ) -> KafkaError | None:
        """For the transaction coordinator (Write, Describe on a transactional id)."""
        return self.denial(context, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)

    def cluster_denial(
        self, context: RequestContext, operation: AclOperation | str
    ) -> KafkaError | None:
        return self.denial(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(
        self, context: RequestContext, resource_type: ResourceType, name: str
    ) -> int:
        """The bit field (bit n: operation code n) of the operations the request's principal
        may do on the resource (Kafka's ``AuthHelper.authorizedOperations``); all of the
        resource type's without an authorizer."""
        if resource_type == ResourceType.CLUSTER:
            name = CLUSTER_NAME
        return sum(
            1 << operation
            for operation in SUPPORTED_OPERATIONS[resource_type]
            if self.may(context, operation, name, resource_type)
        )

    def may_on_some(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type (Kafka's
        ``Authorizer.authorizeByResourceType``, which InitProducerId asks with Write on
        topics). As Kafka's: allowed if it may on a resource named ``hardcode`` (a super
        user; or no ACL found, where allowed); else denied by a LITERAL ``*`` DENY; else
        allowed by a LITERAL ``*`` ALLOW, or by a LITERAL ALLOW no LITERAL DENY of the same
        name and no PREFIXED DENY of a prefix of it overrides, or by a PREFIXED ALLOW no
        PREFIXED DENY of a prefix of it overrides. Silent: nothing is audit-logged."""
        session = context.session
        if not self.enabled or session is None:
            return True
        if self.authorize(session.principal, session.host, operation, resource_type, "hardcode"):
            return True
        principals = (str(session.principal), WILDCARD_PRINCIPAL)
        denied: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        allowed: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        for binding in self.acls.bindings():
            if binding.resource_type != resource_type:
                continue
            if binding.host not in (session.host, WILDCARD) or binding.principal not in principals:
                continue
            if binding.operation not in (operation, AclOperation.ALL):
                continue
            if binding.permission == PermissionType.DENY:
                if (
                    binding.pattern_type == PatternType.LITERAL
                    and binding.resource_name == WILDCARD
                ):
                    return False
                denied[binding.pattern_type].add(binding.resource_name)
            elif binding.permission == PermissionType.ALLOW:
                allowed[binding.pattern_type].add(binding.resource_name)
        if WILDCARD in allowed[PatternType.LITERAL]:
            return True
        for pattern, names in allowed.items():
            for name in names:
                if pattern == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                    continue
                prefixes = (name[:end] for end in range(1, len(name) + 1))
                if not any(prefix in denied[PatternType.PREFIXED] for prefix in prefixes):
                    return True
        return False

    def may(
        self,
        context: RequestContext,
        operation: AclOperation | str,
        name: str,
        resource_type: ResourceType = ResourceType.TOPIC,
    ) -> bool:
        """Like ``topic_denial`` but silent: for filtering what a principal may see (and for
        a permission that may come from either of two resources)."""
        session = context.session
        if not self.enabled or session is None:
            return True
        if isinstance(operation, str):
            operation = AclOperation.parse(operation)
        if resource_type == ResourceType.CLUSTER:
            name = CLUSTER_NAME
        return self.authorize(session.principal, session.host, operation, resource_type, name)
