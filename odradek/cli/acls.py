"""``odradek acls add|list|remove``: the broker's ACLs, in the shape of kafka-acls.sh.

They are kept in the broker's log directory (``__acls.json``), written atomically; a running
broker sees a change at its next check. Over the network, Kafka's CreateAcls, DescribeAcls and
DeleteAcls do the same (``kafka-acls.sh --bootstrap-server ...`` works unchanged).

    odradek acls add --data-dir DIR --allow-principal User:alice --operation Read \\
        --operation Write --topic orders- --resource-pattern-type prefixed
    odradek acls add --data-dir DIR --allow-principal User:app --consumer --topic t --group g
    odradek acls add --data-dir DIR --allow-principal User:app --producer --topic t \\
        --transactional-id app-tx
    odradek acls list --data-dir DIR --topic orders-payments --resource-pattern-type match
    odradek acls remove --data-dir DIR --allow-principal User:alice --topic orders-
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from odradek.cli.users import data_dir_option
from odradek.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.security.acl_store import AclStore
from odradek.security.kafka_principal import KafkaPrincipal

OPERATIONS = [op.title for op in AclOperation if op != AclOperation.ANY]


def _resource_options(command: click.Command) -> click.Command:
    for option in reversed(
        [
            click.option("--topic", "topics", multiple=True, help="Topic (repeatable)."),
            click.option("--group", "groups", multiple=True, help="Consumer group (repeatable)."),
            click.option(
                "--transactional-id",
                "transactional_ids",
                multiple=True,
                help="Transactional id (repeatable).",
            ),
            click.option("--cluster", is_flag=True, help="The cluster resource."),
            click.option(
                "--resource-pattern-type",
                type=click.Choice(["literal", "prefixed", "any", "match"], case_sensitive=False),
                default=None,
                help="How resource names match: literal (default for add) or prefixed; list "
                "and remove also take any and match.",
            ),
        ]
    ):
        command = option(command)
    return command


def _principal_options(command: click.Command) -> click.Command:
    for option in reversed(
        [
            click.option("--allow-principal", "allow_principals", multiple=True, metavar="P"),
            click.option("--deny-principal", "deny_principals", multiple=True, metavar="P"),
            click.option("--allow-host", "allow_hosts", multiple=True, metavar="HOST"),
            click.option("--deny-host", "deny_hosts", multiple=True, metavar="HOST"),
            click.option(
                "--operation",
                "operations",
                multiple=True,
                type=click.Choice(OPERATIONS, case_sensitive=False),
            ),
            click.option(
                "--producer",
                is_flag=True,
                help="Write, Describe, Create on topics; Write, Describe on transactional ids.",
            ),
            click.option(
                "--consumer", is_flag=True, help="Read, Describe on topics, Read on groups."
            ),
        ]
    ):
        command = option(command)
    return command


@click.group()
def acls() -> None:
    """Manage ACLs (enforced with authorizer.class.name set)."""


def _resources(options: dict[str, Any]) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in options["topics"]]
    resources += [(ResourceType.GROUP, g) for g in options["groups"]]
    resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in options["transactional_ids"]]
    if options["cluster"]:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _bindings(
    resources: list[tuple[ResourceType, str]],
    pattern: PatternType,
    principals: list[tuple[PermissionType, str, tuple[str, ...]]],
    operations: tuple[str, ...],
    producer: bool,
    consumer: bool,
) -> list[AclBinding]:
    bindings = []
    for resource_type, name in resources:
        wanted = {AclOperation.parse(op) for op in operations}
        if producer and resource_type == ResourceType.TOPIC:
            wanted |= {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE}
        elif producer and resource_type == ResourceType.TRANSACTIONAL_ID:
            wanted |= {AclOperation.WRITE, AclOperation.DESCRIBE}
        if consumer and resource_type == ResourceType.TOPIC:
            wanted |= {AclOperation.READ, AclOperation.DESCRIBE}
        elif consumer and resource_type == ResourceType.GROUP:
            wanted |= {AclOperation.READ}
        for permission, principal, hosts in principals:
            for host in hosts or ("*",):
                for operation in sorted(wanted):
                    bindings.append(
                        AclBinding(
                            resource_type, name, pattern, principal, host, operation, permission
                        )
                    )
    return bindings


def _principals(options: dict[str, Any]) -> list[tuple[PermissionType, str, tuple[str, ...]]]:
    try:
        allowed = [
            (PermissionType.ALLOW, str(KafkaPrincipal.parse(p)), options["allow_hosts"])
            for p in options["allow_principals"]
        ]
        denied = [
            (PermissionType.DENY, str(KafkaPrincipal.parse(p)), options["deny_hosts"])
            for p in options["deny_principals"]
        ]
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return allowed + denied


@acls.command("add")
@data_dir_option
@_resource_options
@_principal_options
def add(data_dir: Path, **options: Any) -> None:
    """Add ACLs: each principal, host and operation on each resource given."""
    resources = _resources(options)
    principals = _principals(options)
    operations, producer, consumer = (options[k] for k in ("operations", "producer", "consumer"))
    pattern = PatternType[(options["resource_pattern_type"] or "literal").upper()]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise click.BadParameter("add takes --resource-pattern-type literal or prefixed")
    if not resources or not principals or not (operations or producer or consumer):
        raise click.UsageError(
            "add needs a resource (--topic, --group, --transactional-id, --cluster), a principal "
            "(--allow-principal, --deny-principal) and an operation (or --producer, --consumer)"
        )
    bindings = _bindings(resources, pattern, principals, operations, producer, consumer)
    AclStore(data_dir).add(bindings)
    for binding in bindings:
        click.echo(f"added {binding}")


@acls.command("list")
@data_dir_option
@_resource_options
@click.option("--principal", default=None, help="Only this principal's ACLs.")
def list_acls(data_dir: Path, **options: Any) -> None:
    """List ACLs (all, or those of the resources and principal given)."""
    filters = _filters(options)
    for binding in AclStore(data_dir).bindings():
        if any(f.matches(binding) for f in filters):
            click.echo(str(binding))


@acls.command("remove")
@data_dir_option
@_resource_options
@_principal_options
def remove(data_dir: Path, **options: Any) -> None:
    """Remove the ACLs matching the resources, principals, hosts and operations given."""
    resources = _resources(options)
    if not resources:
        raise click.UsageError(
            "remove needs a resource (--topic, --group, --transactional-id, --cluster)"
        )
    pattern = PatternType[(options["resource_pattern_type"] or "literal").upper()]
    filters = []
    principals = _principals(options)
    wanted = [AclOperation.parse(op) for op in options["operations"]] or [AclOperation.ANY]
    for resource_type, name in resources:
        for permission, principal, hosts in principals or [(PermissionType.ANY, None, ())]:
            for host in hosts or (None,):
                for operation in wanted:
                    filters.append(
                        AclBindingFilter(
                            resource_type, name, pattern, principal, host, operation, permission
                        )
                    )
    removed = [b for group in AclStore(data_dir).remove(filters) for b in group]
    for binding in dict.fromkeys(removed):
        click.echo(f"removed {binding}")
    if not removed:
        click.echo("no ACL matched")


def _filters(options: dict[str, Any]) -> list[AclBindingFilter]:
    pattern = PatternType[(options["resource_pattern_type"] or "any").upper()]
    principal = options["principal"]
    resources = _resources(options)
    if not resources:
        return [AclBindingFilter(principal=principal, pattern_type=pattern)]
    return [
        AclBindingFilter(resource_type, name, pattern, principal)
        for resource_type, name in resources
    ]
