"""Every ``odradek ...`` command line in the fenced code blocks of README.md, examples/README.md
and docs/*.md names sub-commands and options the CLI has: each is parsed by click's own parser
against the real command tree, and an unknown one fails with its file and line."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from odradek.cli.main import cli

ROOT = Path(__file__).parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "examples" / "README.md", *sorted(ROOT.glob("docs/*.md"))]
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console"}
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", "$"}


def fenced_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines inside fenced code blocks of shell commands (no language, or a shell's),
    with their line numbers; a line ending in a backslash is joined with the next (numbered
    as the first)."""
    fenced = shell = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            shell = fenced and line.strip()[3:].strip() in SHELL_LANGUAGES
            continue
        if not shell:
            continue
        if pending is not None:
            number, line = pending[0], pending[1] + " " + line.lstrip()
            pending = None
        if line.endswith("\\"):
            pending = (number, line[:-1])
            continue
        yield number, line


def odradek_commands(line: str) -> Iterator[list[str]]:
    """The arguments of each ``odradek`` (or ``.venv/bin/odradek``) invocation on ``line``: an
    ``odradek`` in a command's place (first, after ``|``, ``&&``, ``$ `` or VAR=value), up to
    the end of that command."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;()")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: not a shell line
        return
    at_start = True
    for index, token in enumerate(tokens):
        if token in SEPARATORS:
            at_start = True
            continue
        if at_start and "=" in token and not token.startswith("-"):
            continue  # an environment assignment before the command
        if at_start and token.rsplit("/", 1)[-1] == "odradek":
            rest = tokens[index + 1 :]
            end = next((i for i, t in enumerate(rest) if t in SEPARATORS), len(rest))
            yield rest[:end]
        at_start = False


def unknown_in(args: list[str]) -> str | None:
    """What ``odradek ARGS`` names that the CLI lacks (a command or an option), or None.
    Values are not checked: documentation writes placeholders (NAME, HOST:PORT, ...)."""
    command: click.Command = cli
    path = ["odradek"]
    parent: click.Context | None = None
    while isinstance(command, click.Group):
        context = click.Context(command, info_name=path[-1], parent=parent)
        if not args or args[0] in ("-h", "--help", "--version"):
            return None
        if args[0].startswith("-"):
            return f"no option {args[0]} in {' '.join(path)}"
        sub = command.get_command(context, args[0])
        if sub is None:
            return f"no command {args[0]!r} in {' '.join(path)}"
        path.append(args[0])
        command, args, parent = sub, args[1:], context
    context = click.Context(command, info_name=path[-1], parent=parent)
    try:  # the parser alone: no conversions, callbacks or prompts
        command.make_parser(context).parse_args(list(args))
    except click.NoSuchOption as error:
        return f"no option {error.option_name} in {' '.join(path)}"
    except click.ClickException:
        return None  # e.g. an option's value missing: the names are known
    return None


def unknown_names(document: Path, root: Path = ROOT) -> list[str]:
    found = []
    for number, line in fenced_lines(document.read_text(encoding="utf-8")):
        for args in odradek_commands(line):
            problem = unknown_in(args)
            if problem:
                found.append(f"{document.relative_to(root)}:{number}: {problem}: {line.strip()}")
    return found


def test_every_documented_odradek_command_names_what_the_cli_has() -> None:
    checked = sum(
        1
        for document in DOCUMENTS
        for _, line in fenced_lines(document.read_text(encoding="utf-8"))
        for _ in odradek_commands(line)
    )
    assert checked >= 30, f"only {checked} commands found: is the extraction broken?"
    problems = [problem for document in DOCUMENTS for problem in unknown_names(document)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            "odradek topics create x --no-such-flag",
            "no option --no-such-flag in odradek topics create",
        ),
        (".venv/bin/odradek topcs list", "no command 'topcs' in odradek"),
        (
            "printf 'a\\n' | .venv/bin/odradek produce t --bootstrap-srv h:1",
            "no option --bootstrap-srv",
        ),
        ("X=1 odradek groups describe g --membrs  # a comment", "no option --membrs"),
        ("odradek consume t --from-beginning \\\n    --max-mesages 2", "no option --max-mesages"),
    ],
)
def test_the_check_finds_an_unknown_command_or_option(
    tmp_path: Path, line: str, problem: str
) -> None:
    document = tmp_path / "doc.md"
    document.write_text(f"# Doc\n\n```\nodradek topics list\n{line}\n```\n")
    (found,) = unknown_names(document, tmp_path)
    assert found.startswith("doc.md:5: " + problem), found


def test_the_check_passes_known_commands_with_placeholder_values(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        "```\n"
        "odradek serve --data-dir DIR --set KEY=VALUE\n"
        "odradek groups reset-offsets g --topic t --shift-by -1 --execute\n"
        "odradek topics describe --topic t --bootstrap-server HOST:PORT\n"
        "docker build -t odradek .\n"
        "```\n"
        "```python\n"
        'spark.read.format("odradek").option("no", "--such")\n'
        "```\n"
    )
    assert [
        unknown_in(args)
        for _, line in fenced_lines(document.read_text())
        for args in odradek_commands(line)
    ] == [None, None, None]
