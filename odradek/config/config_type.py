"""The value types a config key can have (Kafka's ``ConfigDef.Type``), parsed from text."""

from __future__ import annotations

import math
import re
from enum import Enum

from odradek.int_limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class ConfigType(Enum):
    """How a key's value is written as text and what Python value it becomes.

    ``parse`` raises ValueError with a short reason; the caller names the key and the source.
    Text is trimmed first, as Kafka does. Lists are comma separated and hold at least one item.
    A password is a string that is never described or logged (Kafka's ``Type.PASSWORD``).
    """

    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"

    def parse(self, value: object) -> object:
        """The typed value of ``value``: text as it arrives, or an already typed Python value."""
        if self in (ConfigType.INT, ConfigType.LONG):
            return self._parse_integer(value)
        if self is ConfigType.DOUBLE:
            return _parse_double(value)
        if self is ConfigType.BOOLEAN:
            return _parse_boolean(value)
        if self is ConfigType.LIST:
            return _parse_list(value)
        if not isinstance(value, str):
            raise ValueError("not a string")
        return value.strip()

    def render(self, value: object) -> str:
        """The text form of a typed value; ``parse(render(v)) == v``."""
        if self is ConfigType.BOOLEAN:
            return "true" if value else "false"
        if self is ConfigType.LIST:
            return ",".join(value)  # type: ignore[arg-type]
        if self is ConfigType.DOUBLE:
            return repr(float(value))  # type: ignore[arg-type]
        return str(value)

    def _parse_integer(self, value: object) -> int:
        low, high, width = (
            (INT32_MIN, INT32_MAX, "32-bit int")
            if self is ConfigType.INT
            else (INT64_MIN, INT64_MAX, "64-bit long")
        )
        if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
            number = int(value.strip())
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            raise ValueError(f"not a whole number (a {width})")
        if not low <= number <= high:
            raise ValueError(f"out of range of a {width} [{low}, {high}]")
        return number


def _parse_double(value: object) -> float:
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = float(value.strip())
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    else:
        raise ValueError("not a decimal number")
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def _parse_boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError("not a boolean (true or false)")


def _parse_list(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",")] if value.strip() else []
    elif isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value]
    else:
        raise ValueError("not a comma-separated list")
    if not items:
        raise ValueError("an empty list")
    if "" in items:
        raise ValueError("a list with an empty item")
    return tuple(items)
