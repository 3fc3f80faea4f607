"""Reading Java ``.properties`` text (Kafka's ``server.properties``) into settings.

The rules are ``java.util.Properties.load``'s: ``key=value``, ``key: value`` or ``key value``;
lines whose first non-blank character is ``#`` or ``!`` are comments; a line ending in an odd
number of backslashes continues on the next one (whose leading blanks are dropped); ``\\t``,
``\\n``, ``\\r``, ``\\f`` and ``\\uHHHH`` are escapes and a backslash before any other character
stands for that character. A key given twice keeps its last value. Files are read as UTF-8.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from odradek.config.setting import Setting
from odradek.errors import InvalidConfigError

_BLANKS = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# The key runs to the first unescaped '=', ':' or blank; blanks, one '=' or ':', blanks follow.
_KEY_SEPARATOR_VALUE = re.compile(
    r"((?:\\.|[^\\=: \t\f])*)[ \t\f]*[=:]?[ \t\f]*(.*)", re.DOTALL
)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPED_CONTROLS = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(path: Path) -> list[Setting]:
    """The settings of the properties file at ``path``, each tagged ``path:line``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidConfigError(f"cannot read config file {path}: {error}") from None
    return parse_properties(text, str(path))


def parse_properties(text: str, origin: str) -> list[Setting]:
    """The settings in properties ``text``; ``origin`` names the file in their origins."""
    settings = []
    for line_number, line in _logical_lines(text):
        where = f"{origin}:{line_number}"
        key, value = _split_key_value(line)
        settings.append(Setting(_unescape(key, where), _unescape(value, where), where))
    return settings


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Non-blank, non-comment lines with continuations joined, with their first line's number."""
    lines = _LINE_BREAK.split(text)
    index = 0
    while index < len(lines):
        first = index
        line = lines[index].lstrip(_BLANKS)
        index += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if index < len(lines):
                line += lines[index].lstrip(_BLANKS)
                index += 1
        yield first + 1, line


def _continues(line: str) -> bool:
    """True when ``line`` ends in an odd number of backslashes (the last escapes the newline)."""
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """The raw key and value of a logical line (the pattern matches any line)."""
    key, value = _KEY_SEPARATOR_VALUE.fullmatch(line).groups()  # type: ignore[union-attr]
    return key, value


def _unescape(text: str, where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped == "u":
            raise InvalidConfigError(f"malformed \\uHHHH escape at {where}")
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return _ESCAPED_CONTROLS.get(escaped, escaped)

    return _ESCAPE.sub(replace, text)
