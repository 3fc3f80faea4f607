"""Issue 31: Kafka's Java transactional producer (kafka-clients 4.4) and read_committed
consumer, on the reference Kafka and on odradek, with Kafka's answers as the expectations:
commit, abort, the fencing of a zombie and the coordinator's abort of a timed-out transaction.
Each scenario is one JVM running named producers step by step (TransactionScript.java), with
plain records interleaved, and the last stable offset read (endOffsets under read_committed)
while a transaction is open and after it ends; then the records as a read_committed and a
read_uncommitted consumer see them (offsets and values).
"""

from __future__ import annotations

import pytest
from kafka_reference import JavaClient, TopicSpec, harness_classpath
from transaction_targets import Target, end_offsets, errors, module_target, script  # noqa: F401

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]


def read(target: Target, topic: str, isolation: str) -> dict[int, list[tuple[int, bytes]]]:
    """partition -> [(offset, value)] as Kafka's consumer returns them, up to the end offsets
    of ``isolation`` (read_committed: the last stable offset)."""
    java = JavaClient(harness_classpath(), target.bootstrap)
    records = java.consume(topic, isolation_level=isolation)[topic]
    found: dict[int, list[tuple[int, bytes]]] = {}
    for record in records:
        found.setdefault(record.partition, []).append((record.offset, record.value))
    return found


def create(target: Target, topic: str, partitions: int = 2) -> None:
    JavaClient(harness_classpath(), target.bootstrap).create_topics(TopicSpec(topic, partitions))


def open_transaction_steps(topic: str, transactional_id: str) -> list[tuple[str, ...]]:
    """A plain record, a transaction's first two records on both partitions, a plain record
    inside it, the LSO read while it is open, and its third record."""
    return [
        ("open", "txn", f"transactional.id={transactional_id}"),
        ("open", "plain"),
        ("send", "plain", topic, "0", "plain-0"),
        ("begin", "txn"),
        ("send", "txn", topic, "0", "txn-0"),
        ("send", "txn", topic, "1", "txn-1"),
        ("send", "plain", topic, "0", "plain-1"),
        ("end-offsets", topic, "read_committed"),
        ("end-offsets", topic, "read_uncommitted"),
        ("send", "txn", topic, "0", "txn-2"),
    ]


def test_a_committed_transaction_is_read_committed_whole_after_its_marker(target: Target) -> None:
    topic = "java-commit"
    create(target, topic)
    answers = script(
        target.bootstrap,
        [*open_transaction_steps(topic, "java-commit"), ("commit", "txn"),
         ("end-offsets", topic, "read_committed")],
    )  # fmt: skip

    assert all(error is None for _, _, error in errors(answers)), answers
    sent = [(a["partition"], a["offset"]) for a in answers if a["step"] == "send"]
    assert sent == [(0, 0), (0, 1), (1, 0), (0, 2), (0, 3)]
    open_lso, open_hw, committed_lso = end_offsets(answers)
    assert open_lso == {0: 1, 1: 0}, "the open transaction's first offset pins the LSO"
    assert open_hw == {0: 3, 1: 1}
    assert committed_lso == {0: 5, 1: 2}, "past the COMMIT markers (offsets 4 and 1)"
    expected = {0: [(0, b"plain-0"), (1, b"txn-0"), (2, b"plain-1"), (3, b"txn-2")],
                1: [(0, b"txn-1")]}  # fmt: skip
    assert read(target, topic, "read_committed") == expected
    assert read(target, topic, "read_uncommitted") == expected, "markers are never returned"


def test_an_aborted_transaction_is_seen_by_read_uncommitted_only(target: Target) -> None:
    topic = "java-abort"
    create(target, topic)
    answers = script(
        target.bootstrap,
        [*open_transaction_steps(topic, "java-abort"), ("abort", "txn"),
         ("end-offsets", topic, "read_committed"),
         ("begin", "txn"), ("send", "txn", topic, "1", "after"), ("commit", "txn"),
         ("end-offsets", topic, "read_committed")],
    )  # fmt: skip

    assert all(error is None for _, _, error in errors(answers)), answers
    assert end_offsets(answers)[2:] == [{0: 5, 1: 2}, {0: 5, 1: 4}]
    assert read(target, topic, "read_committed") == {
        0: [(0, b"plain-0"), (2, b"plain-1")],
        1: [(2, b"after")],
    }
    assert read(target, topic, "read_uncommitted") == {
        0: [(0, b"plain-0"), (1, b"txn-0"), (2, b"plain-1"), (3, b"txn-2")],
        1: [(0, b"txn-1"), (2, b"after")],
    }


def test_a_second_instance_fences_the_zombie_and_aborts_its_transaction(target: Target) -> None:
    topic = "java-zombie"
    create(target, topic, partitions=1)
    answers = script(
        target.bootstrap,
        [("open", "zombie", "transactional.id=java-zombie"),
         ("begin", "zombie"),
         ("send", "zombie", topic, "0", "zombie-0"),
         ("open", "successor", "transactional.id=java-zombie"),
         ("end-offsets", topic, "read_committed"),
         ("commit", "zombie"),
         ("send", "zombie", topic, "0", "zombie-1"),
         ("begin", "successor"),
         ("send", "successor", topic, "0", "successor-0"),
         ("commit", "successor"),
         ("end-offsets", topic, "read_committed")],
    )  # fmt: skip

    # Kafka 4.4's answers, step by step.
    assert errors(answers) == [
        ("open", "zombie", None),
        ("begin", "zombie", None),
        ("send", "zombie", None),
        ("open", "successor", None),
        ("commit", "zombie", "ProducerFencedException"),
        ("send", "zombie", "ProducerFencedException"),
        ("begin", "successor", None),
        ("send", "successor", None),
        ("commit", "successor", None),
    ], answers
    assert end_offsets(answers) == [{0: 2}, {0: 4}], "the zombie's transaction aborted (marker 1)"
    assert read(target, topic, "read_committed") == {0: [(2, b"successor-0")]}
    assert read(target, topic, "read_uncommitted") == {0: [(0, b"zombie-0"), (2, b"successor-0")]}


def test_the_coordinator_aborts_a_transaction_past_its_timeout(target: Target) -> None:
    topic = "java-timeout"
    create(target, topic, partitions=1)
    answers = script(
        target.bootstrap,
        [("open", "slow", "transactional.id=java-timeout", "transaction.timeout.ms=2000"),
         ("begin", "slow"),
         ("send", "slow", topic, "0", "late-0"),
         ("end-offsets", topic, "read_committed"),
         # The timeout (2 s), then the coordinator's check (every second) aborts it.
         ("await-stable", topic, "60000"),
         ("commit", "slow"),
         ("open", "next", "transactional.id=java-timeout"),
         ("begin", "next"),
         ("send", "next", topic, "0", "next-0"),
         ("commit", "next"),
         ("end-offsets", topic, "read_committed")],
    )  # fmt: skip

    assert errors(answers) == [
        ("open", "slow", None),
        ("begin", "slow", None),
        ("send", "slow", None),
        ("commit", "slow", "InvalidTxnStateException"),  # Kafka 4.4's answer (TV2)
        ("open", "next", None),
        ("begin", "next", None),
        ("send", "next", None),
        ("commit", "next", None),
    ], answers
    assert end_offsets(answers) == [{0: 0}, {0: 2}, {0: 4}], "aborted by the coordinator"
    assert read(target, topic, "read_committed") == {0: [(2, b"next-0")]}
    assert read(target, topic, "read_uncommitted") == {0: [(0, b"late-0"), (2, b"next-0")]}


def test_pipelined_transactions_commit_every_record(target: Target) -> None:
    """30 transactions of 10 records sent without waiting (linger.ms=0: up to five Produce
    requests in flight, each transaction's first batch racing the previous one's markers)."""
    topic = "java-pipelined"
    create(target, topic, partitions=1)
    steps: list[tuple[str, ...]] = [
        ("open", "txn", "transactional.id=java-pipelined", "linger.ms=0")
    ]
    for number in range(30):
        steps.append(("begin", "txn"))
        steps += [("send-async", "txn", topic, "0", f"{number}-{n}") for n in range(10)]
        steps.append(("commit", "txn"))
    steps.append(("end-offsets", topic, "read_committed"))
    answers = script(target.bootstrap, steps)

    failed = [answer for answer in answers if answer.get("error")]
    assert not failed, failed[:3]
    assert end_offsets(answers) == [{0: 330}], "300 records and 30 COMMIT markers"
    values = [value for _, value in read(target, topic, "read_committed")[0]]
    assert values == [f"{t}-{n}".encode() for t in range(30) for n in range(10)]
