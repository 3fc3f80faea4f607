"""The records of ``__consumer_offsets`` in Kafka's own layouts, so Kafka's tools decode them.

A key starts with an int16 version that says what the record is: 0 or 1 an OffsetCommitKey
(group, topic, partition), 2 a GroupMetadataKey (group). Values start with their own version.
odradek writes OffsetCommitKey v1 with OffsetCommitValue v3 and GroupMetadataKey v2 with
GroupMetadataValue v3; it reads every version of Kafka 4.4 (values 0-4: Kafka 4.4 writes
OffsetCommitValue v4, flexible, so odradek loads a ``__consumer_offsets`` Kafka wrote). A null
value is a tombstone: the key's offset, or the whole group, is gone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.errors import CorruptRecordError
from odradek.protocol.binary_fields import INT16, INT32, INT64, BinaryReader, BinaryWriter

OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1
FLEXIBLE_VALUE_VERSION = 4
"""The first flexible version of OffsetCommitValue and GroupMetadataValue (Kafka 4.x)."""


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def to_bytes(self) -> bytes:
        writer = BinaryWriter().int16(OFFSET_COMMIT_KEY_VERSION)
        return writer.string(self.group).string(self.topic).int32(self.partition).to_bytes()


@dataclass(frozen=True)
class OffsetCommitValue:
    """A committed offset (OffsetCommitValue v3: no expire timestamp, a leader epoch)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1

    def to_bytes(self) -> bytes:
        writer = BinaryWriter().int16(OFFSET_COMMIT_VALUE_VERSION).int64(self.offset)
        writer.int32(self.leader_epoch).string(self.metadata).int64(self.commit_timestamp)
        return writer.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> OffsetCommitValue:
        if len(data) >= 16 and data[:2] == b"\x00\x03":  # what odradek and Kafka write: fast
            try:
                offset, leader_epoch, length = _VALUE_V3_HEAD.unpack_from(data, 2)
                if length >= 0 and len(data) == 24 + length:
                    metadata = bytes(data[16 : 16 + length]).decode()
                    (timestamp,) = INT64.unpack_from(data, 16 + length)
                    return cls(offset, leader_epoch, metadata, timestamp)
            except UnicodeDecodeError:
                pass  # the general reader says what is wrong
        reader = BinaryReader(data, "OffsetCommitValue")
        version = reader.int16()
        if not 0 <= version <= FLEXIBLE_VALUE_VERSION:
            raise CorruptRecordError(
                f"OffsetCommitValue version {version} is not 0..{FLEXIBLE_VALUE_VERSION}"
            )
        flexible = version >= FLEXIBLE_VALUE_VERSION
        offset = reader.int64()
        leader_epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
        metadata = (reader.compact_string() if flexible else reader.string()) or ""
        commit_timestamp = reader.int64()
        expire_timestamp = reader.int64() if version == 1 else -1
        if flexible:
            reader.skip_tagged_fields()
        return cls(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str

    def to_bytes(self) -> bytes:
        return BinaryWriter().int16(GROUP_METADATA_KEY_VERSION).string(self.group).to_bytes()


@dataclass(frozen=True)
class MemberMetadataValue:
    """One member as GroupMetadataValue records it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    """A group's generation, chosen protocol, leader and members, written after each rebalance
    (and when a group becomes empty)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...]

    def to_bytes(self) -> bytes:
        writer = BinaryWriter().int16(GROUP_METADATA_VALUE_VERSION)
        writer.string(self.protocol_type).int32(self.generation)
        writer.string(self.protocol).string(self.leader).int64(self.current_state_timestamp)
        writer.int32(len(self.members))
        for member in self.members:
            writer.string(member.member_id).string(member.group_instance_id)
            writer.string(member.client_id).string(member.client_host)
            writer.int32(member.rebalance_timeout).int32(member.session_timeout)
            writer.bytes(member.subscription).bytes(member.assignment)
        return writer.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> GroupMetadataValue:
        reader = BinaryReader(data, "GroupMetadataValue")
        version = reader.int16()
        if not 0 <= version <= FLEXIBLE_VALUE_VERSION:
            raise CorruptRecordError(
                f"GroupMetadataValue version {version} is not 0..{FLEXIBLE_VALUE_VERSION}"
            )
        flexible = version >= FLEXIBLE_VALUE_VERSION
        string = reader.compact_string if flexible else reader.string
        data_bytes = reader.compact_bytes if flexible else reader.bytes
        protocol_type = string() or ""
        generation = reader.int32()
        protocol = string()
        leader = string()
        timestamp = reader.int64() if version >= 2 else -1
        count = reader.unsigned_varint() - 1 if flexible else reader.int32()
        if count < 0 or count > reader.remaining:
            raise CorruptRecordError(f"GroupMetadataValue declares {count} members")
        members = []
        for _ in range(count):
            member_id = string() or ""
            instance_id = string() if version >= 3 else None
            client_id = string() or ""
            client_host = string() or ""
            session_timeout = reader.int32()
            rebalance_timeout = session_timeout
            if version >= 1:
                rebalance_timeout, session_timeout = session_timeout, reader.int32()
            subscription = data_bytes() or b""
            assignment = data_bytes() or b""
            if flexible:
                reader.skip_tagged_fields()
            members.append(
                MemberMetadataValue(
                    member_id,
                    instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout,
                    session_timeout,
                    subscription,
                    assignment,
                )
            )
        if flexible:
            reader.skip_tagged_fields()
        return cls(protocol_type, generation, protocol, leader, timestamp, tuple(members))


CoordinatorKey = OffsetCommitKey | GroupMetadataKey
_VALUE_V3_HEAD = struct.Struct(">qih")


def _offset_commit_key(data: bytes | memoryview) -> OffsetCommitKey | None:
    """An OffsetCommitKey v0/v1 read without a BinaryReader (start-up reads millions of
    them); None when the bytes are anything else, for the general reader to judge."""
    try:
        if data[:2] not in (b"\x00\x00", b"\x00\x01"):
            return None
        (group_length,) = INT16.unpack_from(data, 2)
        topic_at = 4 + group_length
        (topic_length,) = INT16.unpack_from(data, topic_at)
        partition_at = topic_at + 2 + topic_length
        if group_length < 0 or topic_length < 0 or len(data) != partition_at + 4:
            return None
        (partition,) = INT32.unpack_from(data, partition_at)
        group = bytes(data[4:topic_at]).decode()
        topic = bytes(data[topic_at + 2 : partition_at]).decode()
    except (struct.error, UnicodeDecodeError):
        return None
    return OffsetCommitKey(group, topic, partition)


def parse_key(data: bytes | memoryview) -> CoordinatorKey:
    """The key of a ``__consumer_offsets`` record; CorruptRecordError for an unknown version."""
    fast = _offset_commit_key(data)
    if fast is not None:
        return fast
    reader = BinaryReader(data, "__consumer_offsets key")
    version = reader.int16()
    if version in (0, 1):
        group, topic, partition = reader.string(), reader.string(), reader.int32()
        return OffsetCommitKey(group or "", topic or "", partition)
    if version == 2:
        return GroupMetadataKey(reader.string() or "")
    raise CorruptRecordError(f"__consumer_offsets key version {version} is not 0..2")
