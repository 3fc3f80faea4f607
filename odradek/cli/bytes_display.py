"""How the commands show a record's keys, values and header values, so that ``consume`` and
``dump-log`` agree and no two different byte strings look alike.

JSON: a string when the bytes are UTF-8, ``{"base64": "..."}`` otherwise, null for null.
Text: the text as it is when it is printable UTF-8 that cannot be mistaken for another form;
otherwise a double-quoted string (JSON escapes) for other UTF-8, or a bytes literal
(``b'\\x00'``) for bytes that are not UTF-8 text; ``null`` for null. So the text key
``b'\\x00'`` shows as ``"b'\\\\x00'"`` and the one byte 0x00 as ``b'\\x00'``.
"""

from __future__ import annotations

import base64
import json


def json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text, or ``{"base64": ...}`` when ``data`` is not valid UTF-8; None stays None."""
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def json_headers(headers: tuple[tuple[str, bytes | None], ...]) -> list[dict[str, object]]:
    """Headers as ``[{"key": ..., "value": ...}]``, values as :func:`json_bytes` shows them."""
    return [{"key": key, "value": json_bytes(value)} for key, value in headers]


def display_bytes(data: bytes | None) -> str:
    """``data`` for a line of text: bare printable text, a quoted string, a bytes literal, or
    ``null`` (see the module's docstring)."""
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return repr(data)
    if not text.isprintable() or _looks_quoted(text):
        return json.dumps(text, ensure_ascii=False) if _is_ordinary(text) else repr(data)
    return text


def _looks_quoted(text: str) -> bool:
    """Text a reader could take for null, a quoted string or a bytes literal."""
    return text == "null" or text.startswith(('"', "b'", 'b"')) or text == ""


def _is_ordinary(text: str) -> bool:
    """Text with no control characters but common whitespace: shown as a quoted string."""
    return all(char.isprintable() or char in "\t\n\r" for char in text)
