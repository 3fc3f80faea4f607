"""What the client commands share: ``--bootstrap`` (or Kafka's ``--bootstrap-server``) and
``--command-config`` (every command), a name given as an argument or as Kafka's tools take it
(``--topic``, ``--group``), client properties (``--producer-property``,
``--consumer-property``), error reporting, a topic's partitions."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import click

from odradek.client import Admin
from odradek.client.config import ClientConfig
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

_JAAS_CREDENTIAL = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_META_KEY = "odradek.command_config"


def _read_command_config(context: click.Context, _: click.Parameter, path: Path | None) -> None:
    """Keep the ``--command-config`` file's properties (Kafka's names) for the command; the
    credentials of a Java client's ``sasl.jaas.config`` become ``sasl.username`` and
    ``sasl.password``."""
    if path is None:
        return
    try:
        settings = read_properties(path)
    except (OSError, InvalidConfigError) as error:
        raise click.BadParameter(str(error), param_hint="--command-config") from None
    properties: dict[str, str] = {}
    for setting in settings:
        if setting.name == "sasl.jaas.config":
            for name, value in _JAAS_CREDENTIAL.findall(setting.value):
                properties[f"sasl.{name}"] = value
            continue
        properties[setting.name] = setting.value
    context.meta[_META_KEY] = properties


def bootstrap_option(command: Callable[P, R]) -> Callable[P, R]:
    """The ``--bootstrap HOST:PORT`` and ``--command-config FILE`` options every client
    command takes (see :func:`client_configs`)."""
    command = click.option(
        "--command-config",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        expose_value=False,
        is_eager=True,
        callback=_read_command_config,
        envvar="ODRADEK_COMMAND_CONFIG",
        show_envvar=True,
        metavar="FILE",
        help="Client properties (NAME=VALUE lines, Kafka's names, # comments), as Kafka's "
        "tools read them: security.protocol, sasl.mechanism, sasl.username, sasl.password (or "
        "sasl.jaas.config), ssl.ca.location, ...; the --*-property options and the command's "
        "own options override them.",
    )(command)
    return click.option(
        "--bootstrap",
        "--bootstrap-server",
        "bootstrap",
        default="localhost:9092",
        envvar="ODRADEK_BOOTSTRAP",
        show_default=True,
        show_envvar=True,
        metavar="HOST:PORT",
        help="The broker to connect to (--bootstrap-server, as Kafka's tools say, is the same).",
    )(command)


def name_argument(
    parameter: str, flag: str, metavar: str
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """The positional argument ``parameter`` (shown as ``metavar``), which may instead be given
    as ``flag`` (``--topic``, ``--group``), as Kafka's tools take it; exactly one of the two."""
    option_parameter = f"{parameter}_option"

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> R:
            positional, option = kwargs.pop(parameter), kwargs.pop(option_parameter)
            if positional is not None and option is not None:
                raise click.UsageError(f"give {metavar} or {flag} {metavar}, not both")
            if positional is None and option is None:
                raise click.UsageError(f"Missing argument '{metavar}' (or {flag} {metavar}).")
            return command(*args, **{parameter: option or positional}, **kwargs)

        run = click.option(
            flag, option_parameter, metavar=metavar, help=f"The same as the {metavar} argument."
        )(run)
        return click.argument(parameter, required=False, metavar=metavar)(run)

    return decorate


def property_option(flag: str, what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A repeatable ``--<what>-property NAME=VALUE`` option (Kafka's console tools' knob)."""
    return click.option(
        flag,
        "properties",
        multiple=True,
        metavar="NAME=VALUE",
        help=f"A {what} property under its Kafka name, e.g. linger.ms=100 (repeatable).",
    )


def client_configs(
    config_class: type[ClientConfig],
    properties: Sequence[str] = (),
    flag: str = "--command-config",
) -> dict[str, Any]:
    """The client settings (keyword arguments of ``config_class``) that ``--command-config``
    and the ``flag`` options give, the latter winning. Kafka's names (``batch.size``) map to
    the client's (``batch_size``); an unknown name or a value of the wrong type is a usage
    error naming it."""
    settings: dict[str, str] = dict(click.get_current_context().meta.get(_META_KEY, {}))
    settings.update(parse_assignments(properties, flag))
    fields = {field.name: field for field in dataclasses.fields(config_class)}
    configs: dict[str, Any] = {}
    for name, value in settings.items():
        field = fields.get(name.replace(".", "_"))
        if field is None:
            known = ", ".join(sorted(f.replace("_", ".") for f in fields))
            raise click.BadParameter(f"unknown property {name!r} (known: {known})", param_hint=flag)
        configs[field.name] = _typed(name, value, str(field.type), flag)
    return configs


def parse_assignments(assignments: Sequence[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` strings as a mapping; a usage error for one without ``=``."""
    parsed: dict[str, str] = {}
    for assignment in assignments:
        name, found, value = assignment.partition("=")
        if not found or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {assignment!r}", param_hint=flag)
        parsed[name.strip()] = value
    return parsed


def _typed(name: str, value: str, annotation: str, flag: str) -> object:
    """``value`` as the field's type: int and bool (also optional ones: ``bool | None``, as
    ``enable.idempotence``, whose None means Kafka's default); anything else stays a string."""
    annotation = annotation.removesuffix(" | None")
    if annotation == "int":
        try:
            return int(value)
        except ValueError:
            message = f"{name} must be an integer, not {value!r}"
            raise click.BadParameter(message, param_hint=flag) from None
    if annotation == "bool":
        if value.lower() not in ("true", "false"):
            message = f"{name} must be true or false, not {value!r}"
            raise click.BadParameter(message, param_hint=flag)
        return value.lower() == "true"
    return value


def with_explicit(configs: Mapping[str, Any], **explicit: object) -> dict[str, Any]:
    """``configs`` overridden by the command's own options that were given (not None)."""
    return {**configs, **{name: value for name, value in explicit.items() if value is not None}}


def bootstrap_from(bootstrap: str, configs: dict[str, Any]) -> dict[str, Any]:
    """``configs`` with ``bootstrap_servers``: ``--bootstrap`` when given on the command line
    (or in the environment), else a ``bootstrap.servers`` property, else the default."""
    source = click.get_current_context().get_parameter_source("bootstrap")
    if source is not click.core.ParameterSource.DEFAULT or "bootstrap_servers" not in configs:
        configs = {**configs, "bootstrap_servers": bootstrap}
    return configs


def client_settings(bootstrap: str, **settings: object) -> dict[str, Any]:
    """The keyword arguments of an Admin (or any client) for a command: the
    ``--command-config`` file's settings, the broker, then ``settings``."""
    return {**bootstrap_from(bootstrap, client_configs(ClientConfig)), **settings}


def admin_settings(configs: dict[str, Any]) -> dict[str, Any]:
    """The settings in a producer's or consumer's ``configs`` that an Admin takes too (the
    broker, security), for the metadata a command asks before it produces or consumes."""
    common = {field.name for field in dataclasses.fields(ClientConfig)}
    return {name: value for name, value in configs.items() if name in common}


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
