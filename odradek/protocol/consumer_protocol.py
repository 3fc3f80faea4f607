"""Kafka's consumer protocol: the Subscription and Assignment bytes consumers exchange through
JoinGroup and SyncGroup (``ConsumerProtocolSubscription``/``Assignment``).

The broker relays these bytes untouched; odradek's consumer writes version 0 of both (the
eager protocol) and reads every version, ignoring the fields it does not use, so it can share
a group with Kafka's clients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from odradek.protocol.binary_fields import BinaryReader, BinaryWriter

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 0
ASSIGNMENT_VERSION = 0


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None

    def to_bytes(self) -> bytes:
        writer = BinaryWriter().int16(SUBSCRIPTION_VERSION).int32(len(self.topics))
        for topic in self.topics:
            writer.string(topic)
        return writer.bytes(self.user_data).to_bytes()


@dataclass(frozen=True)
class Assignment:
    partitions: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    user_data: bytes | None = None

    def to_bytes(self) -> bytes:
        writer = BinaryWriter().int16(ASSIGNMENT_VERSION).int32(len(self.partitions))
        for topic, numbers in self.partitions.items():
            writer.string(topic).int32(len(numbers))
            for number in numbers:
                writer.int32(number)
        return writer.bytes(self.user_data).to_bytes()


def _count(reader: BinaryReader) -> int:
    count = reader.int32()
    return max(count, 0)


def parse_subscription(data: bytes | memoryview) -> Subscription:
    """The topics and user data of a Subscription of any version; CorruptRecordError when the
    bytes do not parse."""
    reader = BinaryReader(data, "consumer protocol subscription")
    reader.int16()
    topics = tuple(reader.string() or "" for _ in range(_count(reader)))
    user_data = reader.bytes() if reader.remaining else None
    return Subscription(topics, user_data)


def parse_assignment(data: bytes | memoryview) -> Assignment:
    """The partitions of an Assignment of any version; empty bytes are no assignment."""
    if not data:
        return Assignment()
    reader = BinaryReader(data, "consumer protocol assignment")
    reader.int16()
    partitions: dict[str, tuple[int, ...]] = {}
    for _ in range(_count(reader)):
        topic = reader.string() or ""
        partitions[topic] = tuple(reader.int32() for _ in range(_count(reader)))
    user_data = reader.bytes() if reader.remaining else None
    return Assignment(partitions, user_data)


def assignment_of(partitions: Sequence[tuple[str, int]]) -> Assignment:
    """An Assignment of (topic, partition) pairs, topics and partitions in order."""
    by_topic: dict[str, list[int]] = {}
    for topic, number in sorted(partitions):
        by_topic.setdefault(topic, []).append(number)
    return Assignment({topic: tuple(numbers) for topic, numbers in by_topic.items()})
