"""The field types the values of both protocols are declared with, as Kafka's message specs name
them (int16, int32, int64, records), and how a value made on every request is built cheaply.

A type is ``Annotated`` with what a codec needs to check it: an :class:`IntRange` or the
:class:`RecordsMarker`. The msgpack schema (protocol/schema.py) reads these to encode and
validate its messages; Kafka's readers (protocol/kafka/) check the same ranges by hand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sized
from typing import Annotated, Any, TypeVar

from odradek.int_limits import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

OMITTED_AT_DEFAULT = "omitted_at_default"
"""Field metadata key: a field added after its message's first release, left out of the
msgpack map while it has its default (so the message is the same bytes as before)."""

Payload = Sized
"""A piece of a frame payload: bytes, a memoryview, or any object whose ``len()`` is its size."""


@dataclasses.dataclass(frozen=True)
class IntRange:
    """The inclusive range an integer field must fall in, and how to name it in errors."""

    minimum: int
    maximum: int
    name: str


class RecordsMarker:
    """Marks a field whose bytes live in the frame payload (see :data:`Records`)."""


Int16 = Annotated[int, IntRange(INT16_MIN, INT16_MAX, "an int16")]
Int32 = Annotated[int, IntRange(INT32_MIN, INT32_MAX, "an int32")]
Int64 = Annotated[int, IntRange(INT64_MIN, INT64_MAX, "an int64")]
NonNegativeInt32 = Annotated[int, IntRange(0, INT32_MAX, "an int32 >= 0")]
ErrorCode = Int16
Records = Annotated[Payload, RecordsMarker()]

T = TypeVar("T")


def stored_at_once(cls: type[T]) -> type[T]:
    """Give the frozen dataclass ``cls`` an ``__init__`` that stores every field in one step
    (one ``__dict__``, where a frozen dataclass sets each field through ``object.__setattr__``):
    the same signature, defaults and values in about half the time. For the values made on
    every request (envelopes, produce and fetch messages and their entries)."""
    fields = [field for field in dataclasses.fields(cls) if field.init]
    if len(fields) != len(dataclasses.fields(cls)) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: only plain fields can be stored at once")
    namespace: dict[str, Any] = {"_set": object.__setattr__}
    parameters = []
    for field in fields:
        if field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name}: a default factory")
        if field.default is dataclasses.MISSING:
            parameters.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            parameters.append(f"{field.name}=_default_{field.name}")
    stored = ", ".join(f"{field.name!r}: {field.name}" for field in fields)
    exec(  # as dataclasses itself makes __init__
        f"def __init__(self, {', '.join(parameters)}):\n    _set(self, '__dict__', {{{stored}}})\n",
        namespace,
    )
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(cls.__init__.__annotations__)
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls
