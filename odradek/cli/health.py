"""``odradek health``: whether a broker answers, as an exit status (for container health checks)."""

from __future__ import annotations

import click

from odradek.cli.client_options import bootstrap_option, client_settings, reports_errors
from odradek.client import Admin

DEFAULT_TIMEOUT_S = 5.0


@click.command()
@bootstrap_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for the connection and for the answer.",
)
@reports_errors
def health(bootstrap: str, timeout: float) -> None:
    """Exit 0 if the broker answers a metadata request within --timeout, 1 otherwise."""
    with Admin(**client_settings(bootstrap, request_timeout_ms=int(timeout * 1000))) as admin:
        metadata = admin.metadata(topics=())
    broker = metadata.broker
    click.echo(f"broker {broker.node_id} of cluster {metadata.cluster_id} is serving")
