"""The ``odradek`` command imports only what the command it runs needs: a client command does not
pay for importing the broker, and ``--version`` imports neither (odradek/cli/main.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from odradek.cli.main import COMMANDS, cli

# Runs the command in the child's own process and prints which odradek packages it imported.
_IMPORTED_BY = """
import json, sys
from odradek.cli.main import cli
try:
    cli.main(sys.argv[1:], prog_name="odradek")
except SystemExit:
    pass
print(json.dumps(sorted(name for name in sys.modules if name.startswith("odradek."))))
"""

BROKER_PACKAGES = ("odradek.server", "odradek.storage", "odradek.cleaner")


def imported_by(*arguments: str) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-c", _IMPORTED_BY, *arguments],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(completed.stdout.splitlines()[-1])


def under(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    return [name for name in modules if name.split(".")[:2] in [p.split(".") for p in packages]]


@pytest.mark.parametrize("command", ["produce", "consume", "topics", "groups", "health"])
def test_a_client_command_does_not_import_the_broker(command: str) -> None:
    modules = imported_by(command, "--help")
    assert f"odradek.cli.{command}" in modules  # the command itself was loaded
    assert under(modules, BROKER_PACKAGES) == []


def test_version_imports_no_command() -> None:
    modules = imported_by("--version")
    assert [name for name in modules if name.startswith("odradek.cli.")] == ["odradek.cli.main"]
    assert under(modules, ("odradek.server", "odradek.client")) == []


def test_help_lists_every_command_with_its_short_help() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    listing = result.output.split("Commands:")[1]
    for name in COMMANDS:
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.name == name
        short_help = command.get_short_help_str(limit=30).removesuffix("...")
        lines = listing.splitlines()
        assert any(line.split()[:1] == [name] and short_help in line for line in lines)


def test_version_names_the_native_modules() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("odradek ")
    assert "native modules: " in result.output
