"""Spark hands every option over as a string; these read the typed values out of them."""

from __future__ import annotations


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
