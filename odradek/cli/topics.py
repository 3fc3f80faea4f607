"""``odradek topics``: create, list, describe, alter and delete topics, like ``kafka-topics.sh``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import click

from odradek.cli.client_options import (
    bootstrap_option,
    client_settings,
    name_argument,
    reports_errors,
)
from odradek.client import Admin, NewTopic
from odradek.errors import UnknownTopicOrPartitionError
from odradek.protocol.describe_topic_partitions import PartitionDescription, TopicDescription


def _parse_configs(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    """``--config KEY=VALUE`` options as a dict; the value may be empty, the key may not."""
    configs = {}
    for item in values:
        key, separator, value = item.partition("=")
        if not (separator and key):
            raise click.BadParameter(f"{item!r} is not of the form KEY=VALUE")
        configs[key] = value
    return configs


def _config_option(help_text: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The repeatable ``--config KEY=VALUE`` option, as a dict."""
    return click.option(
        "--config",
        "configs",
        multiple=True,
        callback=_parse_configs,
        metavar="KEY=VALUE",
        help=help_text,
    )


@contextlib.contextmanager
def _existing(name: str) -> Iterator[None]:
    """Topic ``name`` not being there is said in kafka-topics.sh's words."""
    try:
        yield
    except UnknownTopicOrPartitionError:
        raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist as expected") from None


@click.group()
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


@topics.command()
@name_argument("name", "--topic", "TOPIC")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    metavar="N",
    help="Number of partitions  [default: the broker's num.partitions]",
)
@_config_option("A topic config override, e.g. retention.ms=3600000; repeatable.")
@bootstrap_option
@reports_errors
def create(name: str, partitions: int | None, configs: dict[str, str], bootstrap: str) -> None:
    """Create topic TOPIC."""
    topic = NewTopic(name, -1 if partitions is None else partitions, configs)
    with Admin(**client_settings(bootstrap)) as admin:
        admin.create_topics([topic])
    click.echo(f"Created topic {name}.")


@topics.command("list")
@bootstrap_option
@reports_errors
def list_topics(bootstrap: str) -> None:
    """Print the name of every topic, one a line, sorted."""
    with Admin(**client_settings(bootstrap)) as admin:
        names = admin.list_topics()
    for name in names:
        click.echo(name)


@topics.command()
@name_argument("name", "--topic", "TOPIC")
@bootstrap_option
@reports_errors
def describe(name: str, bootstrap: str) -> None:
    """Print topic TOPIC's partitions and configs.

    One line per partition: its log start offset, high watermark, log end offset, size in
    bytes, number of segments and log directory. Then one line per config: KEY=VALUE and
    where the value comes from (DYNAMIC_TOPIC_CONFIG for an override of this topic,
    STATIC_BROKER_CONFIG for the broker's setting, DEFAULT_CONFIG for the built-in default).
    """
    with Admin(**client_settings(bootstrap)) as admin, _existing(name):
        (topic,) = admin.describe_topics([name])
    for line in _description_lines(topic):
        click.echo(line)


def _description_lines(topic: TopicDescription) -> list[str]:
    lines = [f"Topic: {topic.name}\tPartitionCount: {len(topic.partitions)}"]
    lines += [_partition_line(partition) for partition in topic.partitions]
    lines.append("Configs:")
    lines += [
        f"\t{entry.name}={'' if entry.value is None else entry.value}\tsource={entry.source}"
        for entry in sorted(topic.configs, key=lambda entry: entry.name)
    ]
    return lines


def _partition_line(partition: PartitionDescription) -> str:
    return (
        f"\tPartition: {partition.partition}"
        f"\tLogStartOffset: {partition.log_start_offset}"
        f"\tHighWatermark: {partition.high_watermark}"
        f"\tLogEndOffset: {partition.log_end_offset}"
        f"\tSize: {partition.size_bytes}"
        f"\tSegments: {partition.segment_count}"
        f"\tLogDir: {partition.log_dir}"
    )


@topics.command()
@name_argument("name", "--topic", "TOPIC")
@_config_option("Set the override KEY of the topic to VALUE; repeatable.")
@click.option(
    "--delete-config",
    "deleted",
    multiple=True,
    metavar="KEY",
    help="Remove the override KEY, back to the broker's default; repeatable.",
)
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    help="Grow the topic to N partitions in all (never fewer than it has).",
    metavar="N",
)
@bootstrap_option
@reports_errors
def alter(
    name: str,
    configs: dict[str, str],
    deleted: tuple[str, ...],
    partitions: int | None,
    bootstrap: str,
) -> None:
    """Change config overrides of topic TOPIC, or grow it to more partitions; overrides not
    named stay as they are.

    Only --delete-config removes an override: --config KEY= sets KEY to the empty string,
    which the broker checks like any other value. Records keep the partition they are in:
    keys may map to other partitions after the topic grows.
    """
    if not (configs or deleted or partitions):
        raise click.UsageError("nothing to change: give --config, --delete-config or --partitions")
    both = sorted(configs.keys() & set(deleted))
    if both:
        raise click.UsageError(f"both set and deleted: {', '.join(both)}")
    with Admin(**client_settings(bootstrap)) as admin, _existing(name):
        if partitions is not None:
            admin.create_partitions({name: partitions})
            click.echo(f"Topic {name} now has {partitions} partitions.")
        if configs or deleted:
            admin.alter_configs({name: {**configs, **dict.fromkeys(deleted)}})
            click.echo(f"Altered configs of topic {name}.")


@topics.command()
@name_argument("name", "--topic", "TOPIC")
@bootstrap_option
@reports_errors
def delete(name: str, bootstrap: str) -> None:
    """Delete topic TOPIC and its records."""
    with Admin(**client_settings(bootstrap)) as admin, _existing(name):
        admin.delete_topics([name])
    click.echo(f"Deleted topic {name}.")
