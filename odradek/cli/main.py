"""The ``odradek`` command: one click group, one module per sub-command.

Each sub-command's module is imported only when that command runs (or when ``--help`` lists
them): a client command starts without importing the broker, and ``--version`` imports neither.
"""

from __future__ import annotations

import importlib
import logging

import click

# Each sub-command's name and the ``module:attribute`` defining it.
COMMANDS: dict[str, str] = {
    "acls": "odradek.cli.acls:acls",
    "consume": "odradek.cli.consume:consume",
    "dump-log": "odradek.cli.dump_log:dump_log",
    "groups": "odradek.cli.groups:groups",
    "health": "odradek.cli.health:health",
    "produce": "odradek.cli.produce:produce",
    "quotas": "odradek.cli.quotas:quotas",
    "serve": "odradek.cli.serve:serve",
    "topics": "odradek.cli.topics:topics",
    "transactions": "odradek.cli.transactions:transactions",
    "users": "odradek.cli.users:users",
}


class LazyGroup(click.Group):
    """A group that imports a sub-command's module when the command is looked up."""

    def __init__(self, *args: object, lazy_commands: dict[str, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = lazy_commands

    def list_commands(self, context: click.Context) -> list[str]:
        return sorted({*super().list_commands(context), *self.lazy_commands})

    def get_command(self, context: click.Context, name: str) -> click.Command | None:
        if name in self.lazy_commands:
            return self._load(name)
        return super().get_command(context, name)

    def _load(self, name: str) -> click.Command:
        module_name, attribute = self.lazy_commands[name].split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command) or command.name != name:
            raise RuntimeError(f"{self.lazy_commands[name]} is not the click command {name!r}")
        return command


def _print_version(context: click.Context, _: click.Parameter, value: bool) -> None:
    if not value or context.resilient_parsing:
        return
    from importlib.metadata import version

    from odradek.native import native_summary

    click.echo(f"odradek {version('odradek')}\n{native_summary()}")
    context.exit()


def _log_to_stderr() -> None:
    """Log lines on stderr as bare messages, as Python prints a warning when nothing is set
    up: warnings, and the client's INFO line that a broker is back after going away (its
    WARNING said it went away). Nothing changes where logging is set up already (a program
    running the commands); ``serve`` sets up its own."""
    if logging.getLogger().handlers:
        return
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("odradek.client.network_client").setLevel(logging.INFO)


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and which C modules are active, then exit.",
)
def cli() -> None:
    """odradek: a Kafka-style log broker."""
    _log_to_stderr()


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
