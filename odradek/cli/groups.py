"""``odradek groups``: list, describe, delete consumer groups and reset their offsets, like
``kafka-consumer-groups.sh``."""

from __future__ import annotations

from datetime import datetime

import click

from odradek.cli.client_options import (
    bootstrap_option,
    client_settings,
    name_argument,
    reports_errors,
    topic_partitions,
)
from odradek.client import Admin
from odradek.errors import CorruptRecordError, GroupIdNotFoundError, NonEmptyGroupError
from odradek.protocol.consumer_protocol import parse_assignment
from odradek.protocol.describe_groups import DescribedGroupEntry
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.topic_partition import TopicPartition

NO_VALUE = "-"


def _table(rows: list[list[str]]) -> None:
    """Rows as left-aligned columns, the first row the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


@click.group()
def groups() -> None:
    """Consumer groups: their members, committed offsets and lag."""


@groups.command("list")
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only groups in this state (Empty, Stable, PreparingRebalance, "
    "CompletingRebalance); repeatable.",
)
@bootstrap_option
@reports_errors
def list_groups(states: tuple[str, ...], bootstrap: str) -> None:
    """Print every group id (with --state: and its state)."""
    with Admin(**client_settings(bootstrap)) as admin:
        listed = admin.list_consumer_groups(states)
    for group in listed:
        click.echo(f"{group.group_id}\t{group.group_state}" if states else group.group_id)


def _owners(group: DescribedGroupEntry) -> dict[TopicPartition, tuple[str, str, str]]:
    """Who owns each assigned partition: (member id, host, client id)."""
    owners = {}
    for member in group.members:
        try:
            assignment = parse_assignment(member.member_assignment)
        except CorruptRecordError:  # another protocol's bytes: nothing to show per partition
            continue
        for topic, numbers in assignment.partitions.items():
            for number in numbers:
                owners[TopicPartition(topic, number)] = (
                    member.member_id,
                    member.client_host,
                    member.client_id,
                )
    return owners


@groups.command()
@name_argument("group", "--group", "GROUP")
@click.option("--members", is_flag=True, help="List the members and their assignments instead.")
@bootstrap_option
@reports_errors
def describe(group: str, members: bool, bootstrap: str) -> None:
    """Print GROUP's partitions: committed offset, log end offset, lag and owner."""
    with Admin(**client_settings(bootstrap)) as admin:
        (described,) = admin.describe_consumer_groups([group])
        if described.group_state == "Dead":  # what a broker answers for a group it never had
            raise GroupIdNotFoundError(f"Consumer group '{group}' does not exist.")
        committed = admin.list_consumer_group_offsets(group)
        owners = _owners(described)
        partitions = sorted(set(committed) | set(owners))
        ends = admin.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP)) if partitions else {}
    click.echo(
        f"Group {group} is {described.group_state} with {len(described.members)} members"
        + (f" (protocol {described.protocol_data})" if described.protocol_data else "")
    )
    if members:
        rows = [["CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]]
        for member in described.members:
            mine = sorted(tp for tp, owner in owners.items() if owner[0] == member.member_id)
            rows.append(
                [
                    member.member_id,
                    member.client_host,
                    member.client_id,
                    str(len(mine)),
                    ",".join(str(tp) for tp in mine) or NO_VALUE,
                ]
            )
        _table(rows)
        return
    rows = [
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    ]
    for tp in partitions:
        current = committed.get(tp)
        end = ends[tp].offset if tp in ends else -1
        lag = str(max(end - current, 0)) if current is not None and end >= 0 else NO_VALUE
        owner = owners.get(tp, (NO_VALUE, NO_VALUE, NO_VALUE))
        rows.append(
            [
                group,
                tp.topic,
                str(tp.partition),
                NO_VALUE if current is None else str(current),
                NO_VALUE if end < 0 else str(end),
                lag,
                *owner,
            ]
        )
    _table(rows)


@groups.command()
@click.argument("group_ids", nargs=-1, metavar="GROUP...")
@click.option(
    "--group",
    "group_options",
    multiple=True,
    metavar="GROUP",
    help="A group to delete, as kafka-consumer-groups.sh names it (repeatable).",
)
@bootstrap_option
@reports_errors
def delete(group_ids: tuple[str, ...], group_options: tuple[str, ...], bootstrap: str) -> None:
    """Delete empty groups and their committed offsets."""
    group_ids = (*group_ids, *group_options)
    if not group_ids:
        raise click.UsageError("Missing argument 'GROUP...' (or --group GROUP).")
    with Admin(**client_settings(bootstrap)) as admin:
        admin.delete_consumer_groups(group_ids)
    for group in group_ids:
        click.echo(f"Deleted group {group}")


def _parse_datetime(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 date and time") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as kafka-consumer-groups.sh reads it
    return int(moment.timestamp() * 1000)


@groups.command("reset-offsets")
@name_argument("group", "--group", "GROUP")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,P...]",
    help="A topic (or some of its partitions) to reset; repeatable.",
)
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="To each partition's log start offset.")
@click.option("--to-latest", is_flag=True, help="To each partition's end (high watermark).")
@click.option("--to-offset", type=click.IntRange(min=0), metavar="N", help="To offset N.")
@click.option(
    "--to-datetime",
    callback=_parse_datetime,
    metavar="ISO",
    help="To the first record at or after this time, e.g. 2026-11-26T07:00:00Z.",
)
@click.option("--shift-by", type=int, metavar="N", help="By N (negative: back) from the commit.")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@click.option("--dry-run", is_flag=True, help="Only print them (the default).")
@bootstrap_option
@reports_errors
def reset_offsets(
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: int | None,
    shift_by: int | None,
    execute: bool,
    dry_run: bool,
    bootstrap: str,
) -> None:
    """Move GROUP's committed offsets (the group must have no members). Offsets are kept
    within each partition's log (as kafka-consumer-groups.sh does). Prints the plan; commits
    it only with --execute."""
    scenarios = [
        to_earliest,
        to_latest,
        to_offset is not None,
        to_datetime is not None,
        shift_by is not None,
    ]
    if scenarios.count(True) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, "
            "--to-datetime and --shift-by"
        )
    if execute and dry_run:
        raise click.UsageError("give --execute or --dry-run, not both")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    with Admin(**client_settings(bootstrap)) as admin:
        committed = admin.list_consumer_group_offsets(group)
        if all_topics:
            partitions = sorted(committed)
        else:
            partitions = [tp for spec in topics for tp in _partitions_of(admin, spec)]
        earliest = admin.list_offsets(dict.fromkeys(partitions, EARLIEST_TIMESTAMP))
        latest = admin.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP))
        low = {tp: entry.offset for tp, entry in earliest.items()}
        high = {tp: entry.offset for tp, entry in latest.items()}
        if to_earliest:
            wanted = dict(low)
        elif to_latest:
            wanted = dict(high)
        elif to_offset is not None:
            wanted = dict.fromkeys(partitions, to_offset)
        elif shift_by is not None:
            wanted = {tp: committed.get(tp, low[tp]) + shift_by for tp in partitions}
        else:
            found = admin.list_offsets(dict.fromkeys(partitions, to_datetime))
            wanted = {tp: (e.offset if e.offset >= 0 else high[tp]) for tp, e in found.items()}
        plan = {tp: min(max(offset, low[tp]), high[tp]) for tp, offset in wanted.items()}
        if execute:
            (described,) = admin.describe_consumer_groups([group])
            if described.members:
                raise NonEmptyGroupError(
                    f"group {group} is {described.group_state} with {len(described.members)} "
                    "members; stop them before resetting its offsets"
                )
            admin.alter_consumer_group_offsets(group, plan)
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, tp.topic, str(tp.partition), str(plan[tp])] for tp in sorted(plan)]
    _table(rows)
    if not execute:
        click.echo("(dry run: nothing committed; add --execute to commit these offsets)")


def _partitions_of(admin: Admin, spec: str) -> list[TopicPartition]:
    """``TOPIC`` (every partition) or ``TOPIC:P,P`` (those partitions) as partitions."""
    topic, _, numbers = spec.partition(":")
    every = topic_partitions(admin, topic)
    if not numbers:
        return every
    try:
        chosen = {int(n) for n in numbers.split(",")}
    except ValueError:
        raise click.BadParameter(f"{spec!r} is not TOPIC or TOPIC:P,P...") from None
    found = [tp for tp in every if tp.partition in chosen]
    if len(found) != len(chosen):
        raise click.BadParameter(
            f"topic {topic!r} has {len(every)} partitions; {spec!r} names others"
        )
    return found
