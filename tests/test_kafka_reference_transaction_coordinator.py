"""The transaction coordinator's answers held to Kafka 4.4's: one script of transaction
requests (FindCoordinator v4-6, InitProducerId, AddPartitionsToTxn in both forms, EndTxn,
TxnOffsetCommit v6, DescribeTransactions, ListTransactions) against the reference broker and
against odradek, the same answers expected step by step: which error each state and each
stale producer gets at each version, the epochs handed out, fencing a producer with an open
transaction."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka_helpers import KafkaSocket
from kafka_reference import ReferenceBroker
from server_helpers import running_broker

from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.api_versions import response_header_version
from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec
from odradek.record.record_batch_builder import build_batch

pytestmark = pytest.mark.reference_kafka

TOPIC = "ref-txn"
TID = "ref-txn-app"
CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR = 51, 14, 16
INVALID_TXN_STATE, COORDINATOR_NOT_AVAILABLE, UNSTABLE_OFFSET_COMMIT = 48, 15, 88
Call = Callable[[int, int, dict[str, Any]], dict[str, Any]]


def caller(bootstrap: str) -> Call:
    def call(api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        kafka = KafkaSocket(bootstrap, timeout=30)
        try:
            spec = request_spec(api_key, version)
            payload = b"".join(map(bytes, encode_parts(spec, body)))
            kafka.send(api_key, version, payload, spec.flexible)
            frame = kafka.read_frame()
        finally:
            kafka.close()
        offset = 4 + response_header_version(api_key, version)
        return decode(response_spec(api_key, version), memoryview(frame), offset)

    return call


def until_settled(call: Call, api_key: int, version: int, body: dict[str, Any]) -> dict:
    """The answer once it is not CONCURRENT_TRANSACTIONS (markers being written)."""
    for _ in range(200):
        answer = call(api_key, version, body)
        if answer.get("error_code") != CONCURRENT_TRANSACTIONS:
            return answer
        time.sleep(0.05)
    raise AssertionError(f"still CONCURRENT_TRANSACTIONS: {api_key} v{version}")


def script(call: Call) -> list[tuple[str, Any]]:
    """The steps and what each was answered, with producer ids made relative."""
    seen: list[tuple[str, Any]] = []
    created = call(
        apis.CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": TOPIC,
                    "num_partitions": 2,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 30000,
        },
    )
    assert created["topics"][0]["error_code"] == 0, created
    found = until_found(call)
    seen.append(("find-coordinator", found))
    seen.append(("find-coordinator-versions", coordinator_key_answers(call)))

    def init(timeout: int = 60000, version: int = 5) -> dict:
        body = {
            "transactional_id": TID,
            "transaction_timeout": timeout,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        for _ in range(300):  # Kafka loads the coordinator's partition after creating it
            answer = call(apis.INIT_PRODUCER_ID, version, body)
            if answer["error_code"] not in (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR):
                return answer
            time.sleep(0.1)
        raise AssertionError(f"the coordinator never loaded: {answer}")

    seen.append(("init-timeout-too-long", init(900001)["error_code"]))
    first = init()
    pid = first["producer_id"]
    seen.append(("init", (first["error_code"], first["producer_epoch"])))

    def add(version: int, producer_id: int, epoch: int, *partitions: tuple[str, int]) -> dict:
        topics: dict[str, list[int]] = {}
        for topic, number in partitions:
            topics.setdefault(topic, []).append(number)
        answer = call(
            apis.ADD_PARTITIONS_TO_TXN,
            version,
            {
                "v3_and_below_transactional_id": TID,
                "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in topics.items()],
            },
        )
        return {
            (t["name"], p["partition_index"]): p["partition_error_code"]
            for t in answer["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        }

    def end(version: int, committed: bool, epoch: int, producer_id: int | None = None) -> Any:
        answer = call(
            apis.END_TXN,
            version,
            {
                "transactional_id": TID,
                "producer_id": pid if producer_id is None else producer_id,
                "producer_epoch": epoch,
                "committed": committed,
            },
        )
        return answer["error_code"]

    for version in (1, 3):
        seen.append((f"add-v{version}-unknown-producer", add(version, pid + 1000, 0, (TOPIC, 0))))
        seen.append((f"add-v{version}-stale-epoch", add(version, pid, 5, (TOPIC, 0))))
    for version in (1, 4):
        seen.append((f"end-v{version}-commit-in-empty", end(version, True, 0)))
        seen.append((f"end-v{version}-wrong-producer", end(version, True, 0, pid + 1000)))
    for version in (1, 2):
        seen.append((f"end-v{version}-stale-epoch", end(version, True, 5)))
    for version in (1, 3):
        offsets = call(
            apis.ADD_OFFSETS_TO_TXN,
            version,
            {"transactional_id": TID, "producer_id": pid, "producer_epoch": 5, "group_id": "g"},
        )
        seen.append((f"add-offsets-v{version}-stale-epoch", offsets["error_code"]))
    for version in (3, 4):
        stale = call(
            apis.INIT_PRODUCER_ID,
            version,
            {
                "transactional_id": TID,
                "transaction_timeout": 60000,
                "producer_id": pid + 1000,
                "producer_epoch": 3,
            },
        )
        seen.append((f"init-v{version}-other-producer", stale["error_code"]))
    seen.append(("add-unknown-topic", add(3, pid, 0, (TOPIC, 0), ("no-such-topic", 0))))
    seen.append(("add", add(3, pid, 0, (TOPIC, 0))))
    verified = call(
        apis.ADD_PARTITIONS_TO_TXN,
        5,
        {
            "transactions": [
                {
                    "transactional_id": TID,
                    "producer_id": pid,
                    "producer_epoch": 0,
                    "verify_only": True,
                    "topics": [{"name": TOPIC, "partitions": [0, 1]}],
                }
            ]
        },
    )
    seen.append(
        (
            "verify-only",
            (
                verified["error_code"],
                [
                    (p["partition_index"], p["partition_error_code"])
                    for r in verified["results_by_transaction"]
                    for t in r["topic_results"]
                    for p in t["results_by_partition"]
                ],
            ),
        )
    )
    (described,) = call(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TID]})[
        "transaction_states"
    ]
    seen.append(
        (
            "describe-ongoing",
            (
                described["error_code"],
                described["transaction_state"],
                described["producer_epoch"],
                described["topics"],
                described["transaction_timeout"],
            ),
        )
    )
    listed = call(
        apis.LIST_TRANSACTIONS,
        1,
        {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [], "duration_filter": -1},
    )
    seen.append(
        (
            "list",
            (
                listed["error_code"],
                listed["unknown_state_filters"],
                [
                    (t["transactional_id"], t["transaction_state"])
                    for t in listed["transaction_states"]
                    if t["transactional_id"] == TID
                ],
            ),
        )
    )
    seen.append(("end-v4-commit", end(4, True, 0)))
    seen.append(
        (
            "end-v4-commit-retried",
            until_settled(
                call,
                apis.END_TXN,
                4,
                {
                    "transactional_id": TID,
                    "producer_id": pid,
                    "producer_epoch": 0,
                    "committed": True,
                },
            )["error_code"],
        )
    )
    seen.append(("end-v4-abort-after-commit", end(4, False, 0)))
    again = init()
    seen.append(
        ("init-again", (again["error_code"], again["producer_id"] - pid, again["producer_epoch"]))
    )
    seen.append(("add-again", add(3, pid, 1, (TOPIC, 1))))
    seen.append(("init-fences-open-transaction", init()["error_code"]))
    fenced = until_settled(
        call,
        apis.INIT_PRODUCER_ID,
        5,
        {
            "transactional_id": TID,
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )
    seen.append(
        (
            "init-after-fence",
            (fenced["error_code"], fenced["producer_id"] - pid, fenced["producer_epoch"]),
        )
    )
    seen.append(("add-by-the-zombie", add(3, pid, 1, (TOPIC, 0))))
    seen.append(("end-by-the-zombie", end(4, True, 1)))
    (unknown,) = call(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["never-seen"]})[
        "transaction_states"
    ]
    seen.append(("describe-unknown", unknown["error_code"]))
    seen += version_2_script(call)
    return seen


def version_2_script(call: Call) -> list[tuple[str, Any]]:
    """Transaction version 2 (KIP-890): the partition added by Produce v12, the epoch bumped
    by EndTxn v5 and answered, a commit retried and an abort sent after it (a client that
    never learned its EndTxn's answer), an abort of a transaction never opened, offsets by
    topic id (TxnOffsetCommit v6), the next EndTxn while a commit is still prepared."""
    tid = "ref-txn-v2"
    seen: list[tuple[str, Any]] = []
    first = call(
        apis.INIT_PRODUCER_ID,
        5,
        {
            "transactional_id": tid,
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )
    pid, epoch = first["producer_id"], first["producer_epoch"]
    seen.append(("v2-init", (first["error_code"], epoch)))

    def produce(producer_epoch: int, sequence: int) -> int:
        records = build_batch(
            [(int(time.time() * 1000), None, b"v2", ())],
            producer_id=pid,
            producer_epoch=producer_epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        answer = until_settled(
            call,
            apis.PRODUCE,
            12,
            {
                "transactional_id": tid,
                "acks": -1,
                "timeout": 30000,
                "topic_data": [
                    {"name": TOPIC, "partition_data": [{"index": 1, "records": records}]}
                ],
            },
        )
        return answer["responses"][0]["partition_responses"][0]["error_code"]

    def end(committed: bool, producer_epoch: int) -> tuple[int, int]:
        answer = until_settled(
            call,
            apis.END_TXN,
            5,
            {
                "transactional_id": tid,
                "producer_id": pid,
                "producer_epoch": producer_epoch,
                "committed": committed,
            },
        )
        return answer["error_code"], answer["producer_epoch"]

    seen.append(("v2-produce", produce(epoch, 0)))
    (described,) = call(apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})[
        "transaction_states"
    ]
    seen.append(("v2-describe", (described["transaction_state"], described["topics"])))
    seen.append(("v2-commit", end(True, epoch)))
    seen.append(("v2-commit-retried", end(True, epoch)))
    seen.append(("v2-abort-retried-after-commit", end(False, epoch)))
    seen.append(("v2-abort-never-opened", end(False, epoch + 1)))
    seen.append(("v2-commit-stale", end(True, epoch)))
    seen.append(("v2-produce-next", produce(epoch + 2, 0)))
    seen.append(("v2-produce-stale", produce(epoch, 1)))
    seen.append(("v2-abort", end(False, epoch + 2)))
    seen.append(("v2-offsets-by-topic-id", offsets_by_topic_id(call, tid, pid, epoch + 3)))
    seen.append(("v2-commit-offsets", end(True, epoch + 3)))
    seen.append(("v2-offsets-committed", offset_fetch(call, "ref-txn-v6-group")))
    prepared = end_next_while_prepared(call, produce, pid, epoch + 4)
    seen.append(("v2-end-next-while-prepared", prepared))
    return seen


def offsets_by_topic_id(call: Call, tid: str, pid: int, epoch: int) -> Any:
    """TxnOffsetCommit v6 (Kafka 4.4: topics named by id), one known topic and one unknown
    id: each topic's answer, by the id it echoes."""
    (topic,) = call(apis.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}]})["topics"]
    unknown_id = uuid.UUID(int=12345)
    answer = call(
        apis.TXN_OFFSET_COMMIT,
        6,
        {
            "transactional_id": tid,
            "group_id": "ref-txn-v6-group",
            "producer_id": pid,
            "producer_epoch": epoch,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {
                            "partition_index": 1,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "m",
                        }
                    ],
                }
                for topic_id in (topic["topic_id"], unknown_id)
            ],
        },
    )
    # Each topic's answer by the id it echoes (Kafka answers unknown ids first).
    label = {topic["topic_id"]: "known", unknown_id: "unknown"}
    return sorted(
        (
            label.get(t["topic_id"], "other"),
            [(p["partition_index"], p["error_code"]) for p in t["partitions"]],
        )
        for t in answer["topics"]
    )


def offset_fetch(call: Call, group: str) -> Any:
    """The group's committed offset, once no transaction holds it (UNSTABLE_OFFSET_COMMIT
    while the commit's markers are written, which clients retry)."""
    body = {
        "groups": [{"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [1]}]}],
        "require_stable": True,
    }
    for _ in range(200):
        answer = call(apis.OFFSET_FETCH, 8, body)
        found = [
            (p["committed_offset"], p["error_code"])
            for g in answer["groups"]
            for t in g["topics"]
            for p in t["partitions"]
        ]
        if all(code != UNSTABLE_OFFSET_COMMIT for _, code in found):
            return found
        time.sleep(0.05)
    raise AssertionError(f"still UNSTABLE_OFFSET_COMMIT: {found}")


def end_next_while_prepared(
    call: Call, produce: Callable[[int, int], int], pid: int, epoch: int
) -> Any:
    """What the Java client's race meets: a commit, then at once the next EndTxn at the
    epoch the commit handed out, before any Produce of the next transaction, answered while
    the markers are still being written (CONCURRENT_TRANSACTIONS in Kafka 4.4). Tried anew
    until the second EndTxn finds the commit still prepared: after its completion it is
    INVALID_TXN_STATE on both (no partition in the transaction)."""
    for _ in range(30):
        assert produce(epoch, 0) == 0

        def end(producer_epoch: int) -> int:
            body = {
                "transactional_id": "ref-txn-v2",
                "producer_id": pid,
                "producer_epoch": producer_epoch,
                "committed": True,
            }
            return call(apis.END_TXN, 5, body)["error_code"]

        assert end(epoch) == 0
        answer = end(epoch + 1)
        if answer != INVALID_TXN_STATE:
            return answer
        epoch += 1
    return "the commit was never found prepared"


def until_found(call: Call) -> tuple[int, ...]:
    """FindCoordinator for the transactional id, once the coordinator is loaded (Kafka
    answers COORDINATOR_NOT_AVAILABLE while it creates __transaction_state)."""
    for _ in range(300):
        (found,) = call(apis.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [TID]})[
            "coordinators"
        ]
        if found["error_code"] == 0:
            return (found["error_code"],)
        time.sleep(0.1)
    raise AssertionError(f"no transaction coordinator: {found}")


def coordinator_key_answers(call: Call) -> list[tuple[int, int, list[int]]]:
    """FindCoordinator v4-6's error codes per key type: transactional ids and groups found,
    share-group state keys (v6+, KIP-932) INVALID_REQUEST before v6 and when malformed, an
    unknown key type INVALID_REQUEST. (A well-formed share key at v6 is not compared: Kafka
    4.4 runs a share coordinator even with share.version disabled; odradek has none and
    answers INVALID_REQUEST, as Kafka does without one.)"""
    share_key = "share-group:AAAAAAAAAAAAAAAAAAAAAA:0"
    keys = {0: ["g-a", "g-b"], 1: [TID, "other-txn"], 2: ["malformed"], 3: ["x"]}
    answers = []
    for version in (4, 5, 6):
        for key_type, coordinator_keys in keys.items():
            if key_type == 2 and version < 6:
                coordinator_keys = [share_key, *coordinator_keys]
            body = {"key_type": key_type, "coordinator_keys": coordinator_keys}
            for _ in range(300):  # the group coordinator's topic is created on first use
                found = call(apis.FIND_COORDINATOR, version, body)["coordinators"]
                codes = [c["error_code"] for c in found]
                if COORDINATOR_NOT_AVAILABLE not in codes:
                    break
                time.sleep(0.1)
            answers.append((version, key_type, codes))
    return answers


@pytest.fixture(scope="module")
def kafka_answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list]:
    kafka = ReferenceBroker.start(
        tmp_path_factory.mktemp("reference-txn"),
        "transaction.state.log.num.partitions=2",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
    )
    try:
        yield script(caller(kafka.bootstrap))
    finally:
        kafka.stop()


def test_the_coordinator_answers_as_kafka_does(kafka_answers: list, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_broker(tmp_path, {"transaction.state.log.num.partitions": "2"}) as odradek:
        ours = script(caller(odradek.bootstrap))
    assert dict(ours) == dict(kafka_answers)
    assert [step for step, _ in ours] == [step for step, _ in kafka_answers]
