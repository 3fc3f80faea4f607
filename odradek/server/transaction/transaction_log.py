"""The records of ``__transaction_state`` in Kafka's own layouts, so Kafka's tools decode them.

A record's key is an int16 type (0: a transaction log record) and the transactional id; its value
an int16 version and Kafka's TransactionLogValue: version 0 for clients on transaction version
1, version 1 (flexible, with tagged fields: the previous and next producer id and the client's
transaction version) for transaction version 2, as Kafka 4 writes them. A null value is a
tombstone: the transactional id expired. Kafka's ``DumpLogSegments --transaction-log-decoder``
reads what is written here, and this reads what Kafka writes (tests/test_kafka_reference_files.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.errors import CorruptRecordError, InvalidRequestError
from odradek.protocol.kafka.message_codec import EntitySpec, FieldSpec, decode, encode_parts
from odradek.record.record_batch import NO_PRODUCER_ID
from odradek.server.transaction.transaction_state import TransactionState
from odradek.topic_partition import TopicPartition

TRANSACTION_LOG_KEY_TYPE = 0


def _field(
    name: str,
    kafka_type: str | None,
    *,
    array: bool = False,
    nullable: bool = False,
    tag: int | None = None,
    entity: EntitySpec | None = None,
    default: object = dataclasses.MISSING,
) -> FieldSpec:
    return FieldSpec(name, kafka_type, array, nullable, tag, entity, default)


_KEY = EntitySpec("TransactionLogKey", False, (_field("transactional_id", "string"),), {})


def _value_spec(flexible: bool) -> EntitySpec:
    partitions = EntitySpec(
        "PartitionsSchema",
        flexible,
        (_field("topic", "string"), _field("partition_ids", "int32", array=True)),
        {},
    )
    tagged = (
        {
            0: _field("previous_producer_id", "int64", tag=0, default=NO_PRODUCER_ID),
            1: _field("next_producer_id", "int64", tag=1, default=NO_PRODUCER_ID),
            2: _field("client_transaction_version", "int16", tag=2, default=0),
        }
        if flexible
        else {}
    )
    fields = (
        _field("producer_id", "int64"),
        _field("producer_epoch", "int16"),
        _field("transaction_timeout_ms", "int32"),
        _field("transaction_status", "int8"),
        _field("transaction_partitions", None, array=True, nullable=True, entity=partitions),
        _field("transaction_last_update_timestamp_ms", "int64"),
        _field("transaction_start_timestamp_ms", "int64"),
    )
    return EntitySpec("TransactionLogValue", flexible, fields, tagged)


_VALUES = {0: _value_spec(False), 1: _value_spec(True)}
HIGHEST_VALUE_VERSION = max(_VALUES)


@dataclass(frozen=True)
class TransactionLogValue:
    """A transactional id's state as one ``__transaction_state`` record holds it."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def __post_init__(self) -> None:
        if self.state is TransactionState.EMPTY and self.partitions:
            raise ValueError(f"an Empty transaction has no partitions, not {self.partitions}")

    def to_bytes(self, version: int) -> bytes:
        """The record value at ``version`` (0: transaction version 1; 1: version 2)."""
        values = {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "transaction_timeout_ms": self.transaction_timeout_ms,
            "transaction_status": self.state.id,
            "transaction_partitions": None
            if self.state is TransactionState.EMPTY
            else _by_topic(self.partitions),
            "transaction_last_update_timestamp_ms": self.last_update_timestamp_ms,
            "transaction_start_timestamp_ms": self.start_timestamp_ms,
            "previous_producer_id": self.previous_producer_id,
            "next_producer_id": self.next_producer_id,
            "client_transaction_version": self.client_transaction_version,
        }
        return version.to_bytes(2, "big", signed=True) + b"".join(
            bytes(part) for part in encode_parts(_VALUES[version], values)
        )


def _by_topic(partitions: Iterable[TopicPartition]) -> list[dict[str, object]]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": topic, "partition_ids": ids} for topic, ids in topics.items()]


def key_to_bytes(transactional_id: str) -> bytes:
    return TRANSACTION_LOG_KEY_TYPE.to_bytes(2, "big") + b"".join(
        bytes(part) for part in encode_parts(_KEY, {"transactional_id": transactional_id})
    )


def read_key(key: bytes | memoryview) -> str | None:
    """The transactional id of a ``__transaction_state`` key; None for a key of another type
    (a later Kafka's record this broker does not know, skipped as Kafka skips it)."""
    data = memoryview(key)
    if len(data) < 2:
        raise CorruptRecordError(f"a transaction log key of {len(data)} bytes has no type")
    key_type = int.from_bytes(data[:2], "big", signed=True)
    if key_type != TRANSACTION_LOG_KEY_TYPE:
        return None
    return _decode(_KEY, data, "key")["transactional_id"]


def read_value(value: bytes | memoryview | None) -> TransactionLogValue | None:
    """The state a record's value holds; None for a tombstone."""
    if value is None:
        return None
    data = memoryview(value)
    if len(data) < 2:
        raise CorruptRecordError(f"a transaction log value of {len(data)} bytes has no version")
    version = int.from_bytes(data[:2], "big", signed=True)
    spec = _VALUES.get(version)
    if spec is None:
        raise CorruptRecordError(
            f"transaction log value version {version}; this broker reads 0..{HIGHEST_VALUE_VERSION}"
        )
    fields = _decode(spec, data, "value")
    try:
        state = TransactionState.from_id(fields["transaction_status"])
    except ValueError as error:
        raise CorruptRecordError(f"transaction log value: {error}") from None
    partitions = frozenset(
        TopicPartition(entry["topic"], partition)
        for entry in fields["transaction_partitions"] or ()
        for partition in entry["partition_ids"]
    )
    return TransactionLogValue(
        producer_id=fields["producer_id"],
        producer_epoch=fields["producer_epoch"],
        transaction_timeout_ms=fields["transaction_timeout_ms"],
        state=state,
        partitions=frozenset() if state is TransactionState.EMPTY else partitions,
        last_update_timestamp_ms=fields["transaction_last_update_timestamp_ms"],
        start_timestamp_ms=fields["transaction_start_timestamp_ms"],
        # Version 0 has no tagged fields: their defaults.
        previous_producer_id=fields.get("previous_producer_id", NO_PRODUCER_ID),
        next_producer_id=fields.get("next_producer_id", NO_PRODUCER_ID),
        client_transaction_version=fields.get("client_transaction_version", 0),
    )


def _decode(spec: EntitySpec, data: memoryview, what: str) -> dict:
    try:
        fields = decode(spec, data, 2)
    except InvalidRequestError as error:
        raise CorruptRecordError(f"transaction log {what}: {error}") from None
    return fields
