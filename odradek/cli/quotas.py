"""``odradek quotas alter|describe``: client quotas, in the shape of kafka-configs.sh.

They are kept in the broker's log directory (``__client_quotas.json``), written atomically; a
running broker sees a change within a second. Over the network, Kafka's AlterClientQuotas and
DescribeClientQuotas do the same (``kafka-configs.sh --bootstrap-server ... --entity-type
users`` works unchanged).

    odradek quotas alter --data-dir DIR --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    odradek quotas alter --data-dir DIR --entity-type users --entity-name alice \\
        --entity-type clients --entity-default --add-config request_percentage=50
    odradek quotas alter --data-dir DIR --entity-type clients --entity-name app \\
        --delete-config producer_byte_rate
    odradek quotas describe --data-dir DIR --entity-type users

Each ``--entity-name`` names the ``--entity-type`` at its position; ``--entity-default`` stands
for the name of the last one (the default user or client id), as does the name ``<default>``.
"""

from __future__ import annotations

import click

from odradek.cli.users import data_dir_option
from odradek.server.quota.client_quota_entity import (
    CLIENT_ID,
    DEFAULT_NAME,
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    QUOTA_KEYS,
    USER,
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
    filter_matches,
)
from odradek.server.quota.client_quota_store import ClientQuotaStore

ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
SHOWN = {USER: "user-principal", CLIENT_ID: "client-id"}


def _entity_options(command: click.Command) -> click.Command:
    for option in reversed(
        [
            click.option(
                "--entity-type",
                "entity_types",
                type=click.Choice(sorted(ENTITY_TYPES)),
                multiple=True,
                help="users or clients (both for a user's client id).",
            ),
            click.option(
                "--entity-name",
                "entity_names",
                multiple=True,
                help=f"Name of the entity type at its position ({DEFAULT_NAME} for the default).",
            ),
            click.option(
                "--entity-default",
                is_flag=True,
                help="The last entity type is the default user or client id.",
            ),
        ]
    ):
        command = option(command)
    return command


def _names(
    entity_types: tuple[str, ...], entity_names: tuple[str, ...], entity_default: bool
) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default), by position; a type without a name
    matches any when describing."""
    if len(set(entity_types)) != len(entity_types):
        raise click.UsageError("each entity type may be given once")
    names: list[str | None] = list(entity_names)
    if entity_default:
        if len(names) != len(entity_types) - 1:
            raise click.UsageError("--entity-default names the last entity type")
        names.append(DEFAULT_NAME)
    if len(names) > len(entity_types):
        raise click.UsageError("more --entity-name than --entity-type")
    return [
        (ENTITY_TYPES[entity_type], names[i] if i < len(names) else "")
        for i, entity_type in enumerate(entity_types)
    ]


def _parse_configs(text: str | None) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in filter(None, (text or "").split(",")):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in QUOTA_KEYS:
            raise click.UsageError(f"{item!r}: expected KEY=VALUE with KEY in {QUOTA_KEYS}")
        try:
            values[key] = float(value)
        except ValueError:
            raise click.UsageError(f"{key}: {value!r} is not a number") from None
    return values


@click.group()
def quotas() -> None:
    """Manage client quotas (producer_byte_rate, consumer_byte_rate, request_percentage)."""


@quotas.command("alter")
@data_dir_option
@_entity_options
@click.option("--add-config", help="KEY=VALUE[,KEY=VALUE...] to set.")
@click.option("--delete-config", help="KEY[,KEY...] to remove.")
def alter(
    data_dir,
    entity_types: tuple[str, ...],
    entity_names: tuple[str, ...],
    entity_default: bool,
    add_config: str | None,
    delete_config: str | None,
) -> None:
    """Set or remove quotas of one entity."""
    entries = _names(entity_types, entity_names, entity_default)
    if not entries or any(name == "" for _, name in entries):
        raise click.UsageError("alter needs a name (or --entity-default) for each entity type")
    entity = ClientQuotaEntity.from_mapping(
        {t: None if name == DEFAULT_NAME else name for t, name in entries}
    )
    changes: dict[str, float | None] = dict(_parse_configs(add_config))
    for key in filter(None, (k.strip() for k in (delete_config or "").split(","))):
        if key not in QUOTA_KEYS:
            raise click.UsageError(f"unknown quota {key!r}; known: {', '.join(QUOTA_KEYS)}")
        changes[key] = None
    if not changes:
        raise click.UsageError("nothing to change: give --add-config or --delete-config")
    try:
        ClientQuotaStore(data_dir).alter([(entity, changes)])
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    click.echo(f"Completed updating quotas of {entity}.")


@quotas.command("describe")
@data_dir_option
@_entity_options
def describe(
    data_dir, entity_types: tuple[str, ...], entity_names: tuple[str, ...], entity_default: bool
) -> None:
    """Show the quotas of the entities that match (all of them without --entity-type)."""
    components = []
    for entity_type, name in _names(entity_types, entity_names, entity_default):
        if name == "":
            components.append(ClientQuotaFilterComponent(entity_type, MATCH_ANY))
        elif name == DEFAULT_NAME:
            components.append(ClientQuotaFilterComponent(entity_type, MATCH_DEFAULT))
        else:
            components.append(ClientQuotaFilterComponent(entity_type, MATCH_EXACT, name))
    try:
        found = ClientQuotaStore(data_dir).quotas()
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    strict = bool(components)
    for entity, values in sorted(found.items(), key=lambda item: str(item[0])):
        if not filter_matches(entity, components, strict):
            continue
        who = ", ".join(
            f"{SHOWN[t]} {'the default' if n is None else repr(n)}" for t, n in entity.entries
        )
        shown = ", ".join(f"{key}={value}" for key, value in sorted(values.items()))
        click.echo(f"Quota configs for {who} are {shown}")
