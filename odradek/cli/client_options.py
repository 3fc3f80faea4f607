"""What the client commands share: ``--bootstrap``, error reporting, a topic's partitions."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from odradek.client import Admin
from odradek.errors import KafkaError, UnknownTopicOrPartitionError, error_for_code
from odradek.topic_partition import TopicPartition

P = ParamSpec("P")
R = TypeVar("R")

bootstrap_option = click.option(
    "--bootstrap",
    default="localhost:9092",
    envvar="ODRADEK_BOOTSTRAP",
    show_default=True,
    show_envvar=True,
    metavar="HOST:PORT",
    help="The broker to connect to.",
)
"""The ``--bootstrap HOST:PORT`` option every client command takes."""


def reports_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Make a KafkaError raised by ``command`` an exit status 1 with ``NAME: message`` on stderr."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except KafkaError as error:
            click.echo(str(error), err=True)
            raise click.exceptions.Exit(1) from None

    return run


def topic_partitions(admin: Admin, topic: str, create: bool = False) -> list[TopicPartition]:
    """The partitions of ``topic``; if ``create``, the broker creates it when it may.

    UNKNOWN_TOPIC_OR_PARTITION (or the broker's error) when the topic is not there.
    """
    for entry in admin.metadata([topic], allow_auto_topic_creation=create).topics:
        if entry.name != topic:
            continue
        if entry.error:
            raise error_for_code(entry.error, entry.message or f"topic {topic!r}")
        if entry.partitions:
            return [TopicPartition(topic, p.partition) for p in entry.partitions]
    raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
