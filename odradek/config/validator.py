"""Constraints on a config value: ranges, choices, patterns (Kafka's ``ConfigDef`` validators)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Validator:
    """What a key's typed value may be; ``describe`` is the one wording used in errors and docs.

    Numbers are checked against ``low``/``high`` (``low`` excluded when ``low_inclusive`` is
    false); strings, and each item of a list, against ``choices`` and ``pattern``.
    """

    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    choices: tuple[str, ...] = ()
    pattern: str | None = None

    @classmethod
    def at_least(cls, low: float) -> Validator:
        return cls(low=low)

    @classmethod
    def between(cls, low: float, high: float) -> Validator:
        return cls(low=low, high=high)

    @classmethod
    def above(cls, low: float, high: float | None = None) -> Validator:
        """Strictly greater than ``low`` (and at most ``high`` when given)."""
        return cls(low=low, high=high, low_inclusive=False)

    @classmethod
    def one_of(cls, *choices: str) -> Validator:
        return cls(choices=choices)

    @classmethod
    def matching(cls, pattern: str) -> Validator:
        return cls(pattern=pattern)

    def is_valid(self, value: object) -> bool:
        """True when ``value`` (already of the key's type) meets every constraint."""
        if isinstance(value, tuple):
            return all(self.is_valid(item) for item in value)
        if isinstance(value, str):
            return (not self.choices or value in self.choices) and (
                self.pattern is None or re.fullmatch(self.pattern, value) is not None
            )
        return self._in_range(value)  # type: ignore[arg-type]

    def describe(self) -> str:
        """The allowed values in words, e.g. ``at least 14`` or ``one of: delete, compact``."""
        if self.choices:
            return "one of: " + ", ".join(self.choices)
        if self.pattern is not None:
            return f"matching {self.pattern}"
        lower = (
            None
            if self.low is None
            else f"{'at least' if self.low_inclusive else 'greater than'} {_number(self.low)}"
        )
        upper = None if self.high is None else f"at most {_number(self.high)}"
        return " and ".join(part for part in (lower, upper) if part)

    def _in_range(self, value: float) -> bool:
        below = self.low is not None and (
            value < self.low or (value == self.low and not self.low_inclusive)
        )
        above = self.high is not None and value > self.high
        return not (below or above)


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)
