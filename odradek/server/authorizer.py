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
)
from odradek.security.acl import (
    CLUSTER_NAME,
    IMPLIED_BY,
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

    def cluster_denial(
        self, context: RequestContext, operation: AclOperation | str
    ) -> KafkaError | None:
        return self.denial(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_on_some_topic(self, context: RequestContext, operation: AclOperation) -> bool:
        """Whether some ACL allows ``operation`` on some topic to the context's principal
        (Kafka's authorizeByResourceType, as InitProducerId asks with Write): an allowing
        binding that no DENY of the operation on every topic overrides."""
        session = context.session
        if not self.enabled or session is None or str(session.principal) in self._super_users:
            return True
        principals = (str(session.principal), WILDCARD_PRINCIPAL)
        allowing = {operation, AclOperation.ALL}
        allowed = False
        for binding in self.acls.bindings():
            if binding.resource_type != ResourceType.TOPIC:
                continue
            if binding.principal not in principals or binding.host not in (
                session.host,
                WILDCARD,
            ):
                continue
            if binding.operation not in allowing:
                continue
            if binding.permission == PermissionType.DENY and (
                binding.pattern_type == PatternType.LITERAL and binding.resource_name == WILDCARD
            ):
                return False
            if binding.permission == PermissionType.ALLOW:
                allowed = True
        return allowed

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
