"""What the client commands share: ``--bootstrap`` and ``--command-config``, error reporting,
a topic's partitions."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import click

from odradek.client import Admin
from odradek.config.properties_file import read_properties
from odradek.errors import (
    InvalidConfigError,
    KafkaError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from odradek.topic_partition import TopicPartition

P = ParamSpec("P")
R = TypeVar("R")

COMMAND_CONFIG_KEYS = frozenset(
    {
        "client.id",
        "request.timeout.ms",
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.truststore.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.keystore.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
    }
)
"""Kafka's client keys a ``--command-config`` file may set (others are refused by name)."""
_JAAS_CREDENTIAL = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_META_KEY = "odradek.command_config"


def _read_command_config(context: click.Context, _: click.Parameter, path: Path | None) -> None:
    if path is None:
        return
    try:
        settings = read_properties(path)
    except (OSError, InvalidConfigError) as error:
        raise click.BadParameter(str(error), param_hint="--command-config") from None
    options: dict[str, object] = {}
    for setting in settings:
        if setting.name == "sasl.jaas.config":  # Kafka's Java clients put them here
            for name, value in _JAAS_CREDENTIAL.findall(setting.value):
                options[f"sasl_{name}"] = value
            continue
        if setting.name not in COMMAND_CONFIG_KEYS:
            raise click.BadParameter(
                f"{path}: {setting.name} is not a client setting odradek takes; it takes "
                f"{', '.join(sorted(COMMAND_CONFIG_KEYS | {'sasl.jaas.config'}))}",
                param_hint="--command-config",
            )
        value: object = setting.value
        if setting.name == "request.timeout.ms":
            value = int(setting.value)
        options[setting.name.replace(".", "_")] = value
    context.meta[_META_KEY] = options


def bootstrap_option(command: Callable[P, R]) -> Callable[P, R]:
    """The ``--bootstrap HOST:PORT`` and ``--command-config FILE`` options every client
    command takes (see :func:`client_settings`)."""
    command = click.option(
        "--command-config",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        expose_value=False,
        is_eager=True,
        callback=_read_command_config,
        envvar="ODRADEK_COMMAND_CONFIG",
        show_envvar=True,
        help="Properties file of Kafka client settings: security.protocol, sasl.mechanism, "
        "sasl.username, sasl.password (or sasl.jaas.config), ssl.ca.location, "
        "ssl.certificate.location, ssl.key.location, ...",
    )(command)
    return click.option(
        "--bootstrap",
        default="localhost:9092",
        envvar="ODRADEK_BOOTSTRAP",
        show_default=True,
        show_envvar=True,
        metavar="HOST:PORT",
        help="The broker to connect to.",
    )(command)


def client_settings(bootstrap: str, **settings: object) -> dict[str, object]:
    """The client keyword arguments of a command: the broker, the ``--command-config`` file's
    settings, then ``settings``."""
    file_settings = click.get_current_context().meta.get(_META_KEY, {})
    return {"bootstrap_servers": bootstrap, **file_settings, **settings}


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
