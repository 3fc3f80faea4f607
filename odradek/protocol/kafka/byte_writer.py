"""What the hand-written Kafka response writers (Fetch, Produce) share: lengths, strings,
topic names encoded once, and entries grouped by topic as Kafka's responses nest them."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, TypeVar

from odradek.protocol.kafka.message_codec import write_unsigned_varint

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _TopicEntry(Protocol):
    @property
    def topic(self) -> str: ...


EntryT = TypeVar("EntryT", bound=_TopicEntry)


def by_topic(entries: Sequence[EntryT]) -> Sequence[tuple[str, Sequence[EntryT]]]:
    """``entries`` grouped by topic, in request order (one topic's entries are adjacent)."""
    if len(entries) == 1:  # the usual: one partition
        return ((entries[0].topic, entries),)
    topics: list[tuple[str, list[EntryT]]] = []
    for entry in entries:
        if topics and topics[-1][0] == entry.topic:
            topics[-1][1].append(entry)
        else:
            topics.append((entry.topic, [entry]))
    return topics


def write_length(out: bytearray, length: int, flexible: bool) -> None:
    """An array's or bytes' length: compact (length + 1, varint) or int32."""
    if flexible:
        if length < 0x7F:
            out.append(length + 1)
        else:
            write_unsigned_varint(out, length + 1)
    else:
        out += _INT32.pack(length)


def write_string(out: bytearray, value: str | None, flexible: bool) -> None:
    """A (compact, nullable) string."""
    if value is None:
        if flexible:
            out.append(0)
        else:
            out += _INT16.pack(-1)
        return
    encoded = value.encode()
    if flexible:
        write_unsigned_varint(out, len(encoded) + 1)
    else:
        out += _INT16.pack(len(encoded))
    out += encoded


@lru_cache(maxsize=1024)
def encoded_name(name: str, flexible: bool) -> bytes:
    """A topic name as a (compact) string: encoded once for the topics a broker serves (the
    cache is bounded: a client may name any number of topics)."""
    out = bytearray()
    write_string(out, name, flexible)
    return bytes(out)
