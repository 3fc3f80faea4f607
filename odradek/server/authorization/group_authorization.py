"""GroupAuthorization: the Authorizer's questions the group APIs of both protocols ask
(Kafka's ``KafkaApis`` rules for groups), so each protocol's handlers ask them alike.

A group API needs an operation on its group (Read to take part, Describe to look, Delete to
delete) and some need one on each topic they name; a topic's refusal is asked (and
audit-logged) once per request, however many partitions name it.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.errors import KafkaError
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.request_context import RequestContext


class GroupAuthorization:
    """Asks the Authorizer about groups and the topics a group request names."""

    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    def group_denial(
        self, context: RequestContext, operation: AclOperation, group_id: str
    ) -> KafkaError | None:
        """None when the principal may; else GROUP_AUTHORIZATION_FAILED (audit-logged)."""
        if not self.authorizer.enabled:
            return None
        return self.authorizer.group_denial(context, operation, group_id)

    def transactional_id_denial(
        self, context: RequestContext, operation: AclOperation, transactional_id: str
    ) -> KafkaError | None:
        """None when the principal may; else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        (audit-logged): TxnOffsetCommit writes for its transaction."""
        if not self.authorizer.enabled:
            return None
        return self.authorizer.transactional_id_denial(context, operation, transactional_id)

    def topic_denials(
        self, context: RequestContext, operation: AclOperation, topics: Iterable[str]
    ) -> dict[str, KafkaError]:
        """The refusal of each distinct topic the principal may not touch (none: empty)."""
        if not self.authorizer.enabled:
            return {}
        denials = {}
        for topic in dict.fromkeys(topics):
            denial = self.authorizer.topic_denial(context, operation, topic)
            if denial is not None:
                denials[topic] = denial
        return denials

    def may_describe_topic(self, context: RequestContext, topic: str) -> bool:
        """Silent: for leaving out what a principal may not see."""
        return self.authorizer.may(context, AclOperation.DESCRIBE, topic)

    def describable(self, context: RequestContext, group_ids: Iterable[str]) -> set[str]:
        """The groups ListGroups shows: all with Describe on the cluster, else those the
        principal may describe (silently: a listing is filtered, not refused)."""
        group_ids = list(group_ids)
        may = self.authorizer.may
        if not self.authorizer.enabled or may(
            context, AclOperation.DESCRIBE, "", ResourceType.CLUSTER
        ):
            return set(group_ids)
        return {g for g in group_ids if may(context, AclOperation.DESCRIBE, g, ResourceType.GROUP)}
