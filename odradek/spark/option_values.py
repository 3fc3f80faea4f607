"""Spark hands every option over as a string; these read the typed values out of them."""

from __future__ import annotations

import re

_DURATION = re.compile(r"(\d+)\s*(ms|s|m|min|h|d)?")
_MS_PER_UNIT = {
    None: 1,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def parse_bool(text: str, option: str) -> bool:
    """``true`` or ``false``, in any case."""
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise ValueError(f"option {option} must be true or false, not {text!r}")
    return word == "true"


def parse_int(text: str, option: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"option {option} must be an integer, not {text!r}") from None


def parse_positive_int(text: str, option: str) -> int:
    value = parse_int(text, option)
    if value <= 0:
        raise ValueError(f"option {option} must be > 0, not {value}")
    return value


def parse_duration_ms(text: str, option: str) -> int:
    """A duration as Spark writes one: a number and a unit (ms, s, m or min, h, d), e.g.
    ``15m``; a bare number is milliseconds."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"option {option} must be a duration such as 30s or 15m, not {text!r}")
    return int(match.group(1)) * _MS_PER_UNIT[match.group(2)]
