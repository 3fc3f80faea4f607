"""How ``dump-log`` writes what it finds: ``key: value`` lines for people, JSON lines for tools.

Both printers take the same field mappings, so the two formats never drift apart. Values are
ints, strings, booleans, None (shown as ``null``) and lists; a record's key, value and headers
are bytes, shown as ``consume`` shows them (bytes_display.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import click

from odradek.cli.bytes_display import display_bytes, json_bytes, json_headers

Fields = Mapping[str, object]


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
            click.echo(f"| {_line(_text_record(record))}")

    def entry(self, fields: Fields) -> None:
        click.echo(_line(fields))

    def summary(self, fields: Fields) -> None:
        click.echo(f"Summary: {_line(fields)}")


class JsonPrinter:
    """One JSON object per line, told apart by ``type``: file, batch, entry, summary."""

    def file(self, path: Path) -> None:
        _emit("file", {"path": str(path)})

    def batch(self, fields: Fields, records: Sequence[Fields] | None) -> None:
        if records is not None:
            fields = {**fields, "records": [_json_record(record) for record in records]}
        _emit("batch", fields)

    def entry(self, fields: Fields) -> None:
        _emit("entry", fields)

    def summary(self, fields: Fields) -> None:
        _emit("summary", fields)


def _text_record(record: Fields) -> Fields:
    headers = record["headers"]
    return {
        **record,
        "key": display_bytes(record["key"]),
        "value": display_bytes(record["value"]),
        "headers": [(key, display_bytes(value)) for key, value in headers],
    }


def _json_record(record: Fields) -> Fields:
    """As ``consume --format json`` prints a record: strings when UTF-8, else base64."""
    return {
        **record,
        "key": json_bytes(record["key"]),
        "value": json_bytes(record["value"]),
        "headers": json_headers(record["headers"]),
    }


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
