"""``odradek users add|delete|list``: the SCRAM users of a broker, in its log directory.

The credentials are salted (the password is never stored) and written atomically to the file
the broker reads (``__scram_credentials.json``); a running broker sees a change at its next
authentication. Over the network, Kafka's AlterUserScramCredentials does the same
(``kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users``).
"""

from __future__ import annotations

from pathlib import Path

import click

from odradek.security.credential_store import CredentialStore
from odradek.security.scram_credential import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
)

data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    envvar="ODRADEK_DATA_DIR",
    show_envvar=True,
    help="The broker's (first) log directory.",
)
mechanism_option = click.option(
    "--mechanism",
    "mechanisms",
    type=click.Choice(sorted(SCRAM_MECHANISMS)),
    multiple=True,
    help="SCRAM mechanism (repeatable). Default: both.",
)


@click.group()
def users() -> None:
    """Manage SCRAM users (SASL PLAIN checks the same credentials)."""


@users.command("add")
@click.argument("name")
@data_dir_option
@mechanism_option
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    envvar="ODRADEK_USER_PASSWORD",
    help="The password (prompted for when not given).",
)
@click.option(
    "--iterations",
    type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
    default=MIN_ITERATIONS,
    show_default=True,
    help="PBKDF2 iterations of the salted password.",
)
def add(
    name: str, data_dir: Path, mechanisms: tuple[str, ...], password: str, iterations: int
) -> None:
    """Add user NAME, or replace its password."""
    if not password:
        raise click.ClickException("the password cannot be empty")
    store = CredentialStore(data_dir)
    for mechanism in mechanisms or sorted(SCRAM_MECHANISMS):
        store.upsert(name, ScramCredential.from_password(mechanism, password, iterations))
        click.echo(f"{name}: {mechanism} credential stored ({iterations} iterations)")


@users.command("delete")
@click.argument("name")
@data_dir_option
@mechanism_option
def delete(name: str, data_dir: Path, mechanisms: tuple[str, ...]) -> None:
    """Delete user NAME (or only its credentials of the mechanisms given)."""
    store = CredentialStore(data_dir)
    removed = [m for m in (mechanisms or (None,)) if store.delete(name, m)]
    if not removed:
        raise click.ClickException(f"user {name} has no such credential")
    click.echo(f"{name}: deleted")


@users.command("list")
@data_dir_option
def list_users(data_dir: Path) -> None:
    """List the users and their mechanisms (never a secret)."""
    for name, credentials in sorted(CredentialStore(data_dir).users().items()):
        mechanisms = ", ".join(
            f"{m} ({c.iterations} iterations)" for m, c in sorted(credentials.items())
        )
        click.echo(f"{name}: {mechanisms}")
