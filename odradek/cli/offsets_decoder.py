"""Readable ``__consumer_offsets`` records for ``dump-log --offsets-decoder`` (Kafka's option
of the same name): the key and value decoded from Kafka's layouts instead of raw bytes."""

from __future__ import annotations

from odradek.cli.bytes_display import display_bytes
from odradek.errors import CorruptRecordError
from odradek.record.record import Record
from odradek.server.group.coordinator_records import (
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    parse_key,
)


def decode_offsets_record(record: Record) -> tuple[bytes | None, bytes | None]:
    """The record's key and value, decoded as :func:`offsets_record_text` says, as UTF-8 bytes
    for the dump printer (which shows them as text); other bytes as they are."""
    key, value = offsets_record_text(record)
    return _utf8(key), _utf8(value)


def _utf8(text: str | bytes | None) -> bytes | None:
    return text.encode() if isinstance(text, str) else text


def offsets_record_text(record: Record) -> tuple[str | bytes | None, str | bytes | None]:
    """``(key, value)`` as text: ``offset_commit::group=g,topic=t,partition=0`` with
    ``offset=5,leaderEpoch=-1,metadata=,commitTimestamp=...``, or ``group_metadata::group=g``
    with the generation, protocol, leader and members; a tombstone's value is None. Bytes that
    are not such a record are shown as they are."""
    if record.key is None:
        return None, record.value
    try:
        key = parse_key(record.key)
    except CorruptRecordError:
        return record.key, record.value
    if isinstance(key, OffsetCommitKey):
        key_text = f"offset_commit::group={key.group},topic={key.topic},partition={key.partition}"
    else:
        key_text = f"group_metadata::group={key.group}"
    if record.value is None:
        return key_text, None
    try:
        if isinstance(key, OffsetCommitKey):
            value = OffsetCommitValue.from_bytes(record.value)
            return key_text, (
                f"offset={value.offset},leaderEpoch={value.leader_epoch},"
                f"metadata={value.metadata},commitTimestamp={value.commit_timestamp}"
            )
        group = GroupMetadataValue.from_bytes(record.value)
    except CorruptRecordError as error:
        return key_text, f"undecodable ({error.message}): {display_bytes(record.value)}"
    members = ",".join(
        f"{m.member_id}(instance={m.group_instance_id},client={m.client_id},"
        f"host={m.client_host},session={m.session_timeout},rebalance={m.rebalance_timeout})"
        for m in group.members
    )
    return key_text, (
        f"protocolType={group.protocol_type},generation={group.generation},"
        f"protocol={group.protocol},leader={group.leader},"
        f"currentStateTimestamp={group.current_state_timestamp},members=[{members}]"
    )
