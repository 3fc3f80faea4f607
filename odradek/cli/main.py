"""The ``odradek`` command: one click group, one module per sub-command."""

from __future__ import annotations

from importlib.metadata import version

import click

from odradek.cli.acls import acls
from odradek.cli.consume import consume
from odradek.cli.dump_log import dump_log
from odradek.cli.groups import groups
from odradek.cli.health import health
from odradek.cli.produce import produce
from odradek.cli.quotas import quotas
from odradek.cli.serve import serve
from odradek.cli.topics import topics
from odradek.cli.users import users
from odradek.native import native_summary


def _print_version(context: click.Context, _: click.Parameter, value: bool) -> None:
    if not value or context.resilient_parsing:
        return
    click.echo(f"odradek {version('odradek')}\n{native_summary()}")
    context.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


cli.add_command(acls)
cli.add_command(consume)
cli.add_command(dump_log)
cli.add_command(groups)
cli.add_command(health)
cli.add_command(produce)
cli.add_command(quotas)
cli.add_command(serve)
cli.add_command(topics)
cli.add_command(users)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
