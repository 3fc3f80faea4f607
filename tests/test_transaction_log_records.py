"""``__transaction_state`` records and the coordinator's states, in Kafka's layouts and rules.

Kafka's own records are read (and written again byte for byte), and odradek's read by Kafka's
DumpLogSegments, in tests/test_kafka_reference_files.py.
"""

from __future__ import annotations

import pytest

from odradek.errors import CorruptRecordError
from odradek.server.transaction.transaction_log import (
    TransactionLogValue,
    key_to_bytes,
    read_key,
    read_value,
)
from odradek.server.transaction.transaction_state import TransactionState
from odradek.topic_partition import TopicPartition

S = TransactionState


def ongoing(**changes: object) -> TransactionLogValue:
    fields: dict[str, object] = {
        "producer_id": 4000,
        "producer_epoch": 3,
        "transaction_timeout_ms": 60000,
        "state": S.ONGOING,
        "partitions": frozenset(
            {TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)}
        ),
        "last_update_timestamp_ms": 1_700_000_000_500,
        "start_timestamp_ms": 1_700_000_000_000,
        "previous_producer_id": 3999,
        "client_transaction_version": 2,
    }
    fields.update(changes)
    return TransactionLogValue(**fields)  # type: ignore[arg-type]


def test_the_state_ids_and_names_are_kafkas() -> None:
    assert [(s.id, s.state_name) for s in S] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    assert S.from_name("PrepareEpochFence") is S.PREPARE_EPOCH_FENCE
    assert S.from_name("Nope") is None
    with pytest.raises(ValueError, match="unknown transaction state id 8"):
        S.from_id(8)


@pytest.mark.parametrize(
    ("previous", "then", "allowed"),
    [
        (S.EMPTY, S.ONGOING, True),
        (S.COMPLETE_COMMIT, S.ONGOING, True),
        (S.ONGOING, S.PREPARE_COMMIT, True),
        (S.EMPTY, S.PREPARE_COMMIT, False),
        # Transaction version 2: a client unsure of the state may abort from any rest state.
        (S.EMPTY, S.PREPARE_ABORT, True),
        (S.COMPLETE_ABORT, S.PREPARE_ABORT, True),
        (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT, True),
        (S.PREPARE_COMMIT, S.PREPARE_ABORT, False),
        (S.PREPARE_COMMIT, S.COMPLETE_COMMIT, True),
        (S.PREPARE_ABORT, S.COMPLETE_COMMIT, False),
        (S.ONGOING, S.PREPARE_EPOCH_FENCE, True),
        (S.ONGOING, S.DEAD, False),
        (S.COMPLETE_COMMIT, S.DEAD, True),
    ],
)
def test_transitions_follow_kafkas_valid_previous_states(
    previous: TransactionState, then: TransactionState, allowed: bool
) -> None:
    assert then.may_follow(previous) is allowed


def test_only_rest_states_may_expire() -> None:
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_a_key_is_type_zero_and_the_transactional_id() -> None:
    assert key_to_bytes("my-tx") == b"\x00\x00\x00\x05my-tx"
    assert read_key(key_to_bytes("my-tx")) == "my-tx"
    # A record type a later Kafka may add is skipped, not an error.
    assert read_key(b"\x00\x07\x00\x01x") is None


@pytest.mark.parametrize("version", [0, 1])
def test_a_value_reads_back_as_written(version: int) -> None:
    value = ongoing()

    data = value.to_bytes(version)

    assert data[:2] == version.to_bytes(2, "big")
    read = read_value(data)
    if version == 0:  # no tagged fields: the producer-id history is not kept
        value = ongoing(previous_producer_id=-1, client_transaction_version=0)
    assert read == value


def test_version_1_writes_tagged_fields_only_when_not_at_their_defaults() -> None:
    plain = ongoing(previous_producer_id=-1, client_transaction_version=0)
    assert len(plain.to_bytes(1)) + 14 == len(ongoing().to_bytes(1))  # 10 + 4 tag bytes


def test_partitions_are_written_grouped_by_topic_in_order() -> None:
    data = ongoing(previous_producer_id=-1, client_transaction_version=0).to_bytes(0)
    # v0: int32 array of (int16 string, int32 array of int32).
    assert b"\x00\x00\x00\x02\x00\x01a\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x02" in data
    assert data.index(b"\x00\x01a") < data.index(b"\x00\x01b")


def test_an_empty_transaction_writes_null_partitions_and_may_hold_none() -> None:
    empty = ongoing(state=S.EMPTY, partitions=frozenset())
    assert read_value(empty.to_bytes(1)) == empty
    with pytest.raises(ValueError, match="an Empty transaction has no partitions"):
        ongoing(state=S.EMPTY)


def test_a_tombstone_reads_as_none() -> None:
    assert read_value(None) is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00", "has no version"),
        (b"\x00\x02" + bytes(40), "version 2; this broker reads 0..1"),
        (ongoing().to_bytes(1)[:20], "transaction log value"),
        (ongoing().to_bytes(0)[:16] + b"\x09" + ongoing().to_bytes(0)[17:], "state id 9"),
    ],
)
def test_a_corrupt_value_is_refused_saying_what(data: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        read_value(data)


def test_a_corrupt_key_is_refused() -> None:
    with pytest.raises(CorruptRecordError, match="no type"):
        read_key(b"\x00")
    with pytest.raises(CorruptRecordError, match="transaction log key"):
        read_key(b"\x00\x00\x00\x09abc")
