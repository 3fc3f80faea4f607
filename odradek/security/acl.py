"""ACL bindings and filters with Kafka's vocabulary and wire codes (``AclBinding``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5

    @property
    def title(self) -> str:
        """Kafka's name: ``Topic``, ``TransactionalId``."""
        return "".join(word.capitalize() for word in self.name.split("_"))


class PatternType(enum.IntEnum):
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    @property
    def title(self) -> str:
        """Kafka's name: ``Read``, ``DescribeConfigs``, ``IdempotentWrite``."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def parse(cls, text: str) -> AclOperation:
        normalized = text.replace("_", "").replace("-", "").lower()
        for operation in cls:
            if operation.name.replace("_", "").lower() == normalized:
                return operation
        raise ValueError(f"unknown operation {text!r}")


class PermissionType(enum.IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
"""The name of the one Cluster resource, as Kafka names it."""

IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}
"""An ALLOW of any of these operations also allows the key (Kafka's implied operations)."""


SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
}
"""The operations an ACL may name per resource type (Kafka's ``AclEntry.supportedOperations``):
what the ``authorized_operations`` bit fields of Metadata, DescribeCluster and DescribeGroups
are made of."""

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""An ``authorized_operations`` field not asked for (or of a refused resource)."""


@dataclass(frozen=True)
class AclBinding:
    """One rule: ``principal`` from ``host`` is ``permission`` to ``operation`` on the
    resources ``resource_name`` names under ``pattern_type``."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def __str__(self) -> str:
        pattern = self.pattern_type.name
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.title}, "
            f"permissionType={self.permission.name}) on "
            f"{self.resource_type.title}:{pattern}:{self.resource_name}"
        )


@dataclass(frozen=True)
class AclBindingFilter:
    """Which bindings DescribeAcls lists and DeleteAcls removes; None fields match any."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if not self._matches_pattern(binding):
            return False
        if self.principal is not None and self.principal != binding.principal:
            return False
        if self.host is not None and self.host != binding.host:
            return False
        if self.operation not in (AclOperation.ANY, binding.operation):
            return False
        return self.permission in (PermissionType.ANY, binding.permission)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            # Every binding that would apply to the resource named (Kafka's MATCH).
            if self.resource_name is None:
                return True
            return binding.matches_resource(binding.resource_type, self.resource_name)
        if self.pattern_type not in (PatternType.ANY, binding.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == binding.resource_name
