"""How ``dump-log`` writes what it finds: ``key: value`` lines for people, JSON lines for tools.

Both printers take the same field mappings, so the two formats never drift apart. Values are
ints, strings, booleans, None (shown as ``null``), lists, and ``(key, value)`` tuples (headers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import click

Fields = Mapping[str, object]


def display_bytes(data: bytes | None) -> str | None:
    """Printable UTF-8 as text, anything else as an escaped bytes literal (``b'\\x00..'``)."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return repr(data)
    return text if text.isprintable() else repr(data)


class DumpPrinter(Protocol):
    """Where the dump of one file goes, piece by piece."""

    def file(self, path: Path) -> None: ...

    def batch(self, fields: Fields, records: Sequence[Fields] | None) -> None: ...

    def entry(self, fields: Fields) -> None: ...

    def summary(self, fields: Fields) -> None: ...


class TextPrinter:
    """Kafka ``kafka-dump-log.sh`` style: one ``key: value`` line per batch, ``| `` per record."""

    def file(self, path: Path) -> None:
        click.echo(f"Dumping {path}")

    def batch(self, fields: Fields, records: Sequence[Fields] | None) -> None:
        click.echo(_line(fields))
        for record in records or ():
            click.echo(f"| {_line(record)}")

    def entry(self, fields: Fields) -> None:
        click.echo(_line(fields))

    def summary(self, fields: Fields) -> None:
        click.echo(f"Summary: {_line(fields)}")


class JsonPrinter:
    """One JSON object per line, told apart by ``type``: file, batch, entry, summary."""

    def file(self, path: Path) -> None:
        _emit("file", {"path": str(path)})

    def batch(self, fields: Fields, records: Sequence[Fields] | None) -> None:
        _emit("batch", fields if records is None else {**fields, "records": list(records)})

    def entry(self, fields: Fields) -> None:
        _emit("entry", fields)

    def summary(self, fields: Fields) -> None:
        _emit("summary", fields)


def _emit(kind: str, fields: Fields) -> None:
    click.echo(json.dumps({"type": kind, **fields}))


def _line(fields: Fields) -> str:
    return " ".join(f"{name}: {_text(value)}" for name, value in fields.items())


def _text(value: object) -> str:
    """A field value as text: yes/no, null, ``[a, b]``, ``key=value``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    if isinstance(value, tuple):
        return "=".join(_text(part) for part in value)
    return str(value)
