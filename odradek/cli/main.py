"""The ``odradek`` command: one click group, one module per sub-command."""

from __future__ import annotations

import click

from odradek.cli.consume import consume
from odradek.cli.dump_log import dump_log
from odradek.cli.health import health
from odradek.cli.produce import produce
from odradek.cli.serve import serve
from odradek.cli.topics import topics


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="odradek")
def cli() -> None:
    """odradek: a Kafka-style log broker."""


cli.add_command(consume)
cli.add_command(dump_log)
cli.add_command(health)
cli.add_command(produce)
cli.add_command(serve)
cli.add_command(topics)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
