"""One config assignment as it arrived, remembering where from, for error messages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """``name = value`` from one source.

    ``origin`` says where it was written (``server.properties:12``, ``environment variable
    ODRADEK_PORT``, ``--set``, ``topic config``) so a bad value can be traced back to it.
    """

    name: str
    value: object
    origin: str
