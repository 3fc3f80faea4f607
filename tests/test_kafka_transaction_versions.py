"""The transaction APIs of Kafka's protocol at every advertised version, request by request
over a socket: ApiVersions' finalized ``transaction.version``, InitProducerId with a
transactional id, AddPartitionsToTxn (the clients' form and the brokers' batched form with
verify_only), AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, and the check
of a transactional Produce (verified under transaction version 1, added under 2)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest
from kafka_helpers import KafkaSocket
from server_helpers import RunningBroker, running_broker

from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.api_versions import ADVERTISED, response_header_version
from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec
from odradek.record.record_batch_builder import build_batch

TOPIC = "txn-versions"
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT = 3, 48, 50
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, OPERATION_NOT_ATTEMPTED = 53, 55
TRANSACTIONAL_ID_NOT_FOUND, TRANSACTION_ABORTABLE = 105, 120
_ids = itertools.count()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    settings = {
        "transaction.state.log.num.partitions": "2",
        "offsets.topic.num.partitions": "2",
        "transaction.max.timeout.ms": "120000",
    }
    with running_broker(tmp_path_factory.mktemp("txn-versions"), settings) as running:
        running.loop_thread.call(running.broker.topic_admin.create_topic, TOPIC, 2, {})
        yield running


def call(broker: RunningBroker, api_key: int, version: int, body: dict[str, Any]) -> dict:
    kafka = KafkaSocket(broker)
    try:
        spec = request_spec(api_key, version)
        kafka.send(api_key, version, b"".join(map(bytes, encode_parts(spec, body))), spec.flexible)
        frame = kafka.read_frame()
    finally:
        kafka.close()
    offset = 4 + response_header_version(api_key, version)
    return decode(response_spec(api_key, version), memoryview(frame), offset)


def versions(api_key: int) -> range:
    found = ADVERTISED[api_key]
    return range(found.min_version, found.max_version + 1)


def init(broker: RunningBroker, transactional_id: str, version: int = 5) -> tuple[int, int]:
    answer = call(
        broker,
        apis.INIT_PRODUCER_ID,
        version,
        {
            "transactional_id": transactional_id,
            "transaction_timeout": 60000,
            "producer_id": -1,
            "producer_epoch": -1,
        },
    )
    assert answer["error_code"] == 0, answer
    return answer["producer_id"], answer["producer_epoch"]


def add_v3(broker: RunningBroker, tid: str, producer: tuple[int, int], *partitions: int, version=3):  # type: ignore[no-untyped-def]
    answer = call(
        broker,
        apis.ADD_PARTITIONS_TO_TXN,
        version,
        {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": producer[0],
            "v3_and_below_producer_epoch": producer[1],
            "v3_and_below_topics": [{"name": TOPIC, "partitions": list(partitions)}],
        },
    )
    return {
        (t["name"], p["partition_index"]): p["partition_error_code"]
        for t in answer["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    }


def describe(broker: RunningBroker, tid: str) -> dict:
    (state,) = call(broker, apis.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})[
        "transaction_states"
    ]
    return state


def produce(
    broker: RunningBroker, version: int, tid: str | None, producer, partition: int, acks: int = -1
):  # type: ignore[no-untyped-def]
    records = build_batch(
        [(int(time.time() * 1000), None, b"in a transaction", ())],
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=0,
        is_transactional=True,
    )
    answer = call(
        broker,
        apis.PRODUCE,
        version,
        {
            "transactional_id": tid,
            "acks": acks,
            "timeout": 5000,
            "topic_data": [
                {"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}
            ],
        },
    )
    (topic,) = answer["responses"]
    (entry,) = topic["partition_responses"]
    return entry["error_code"]


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_finalizes_transaction_version_2(broker: RunningBroker, version: int) -> None:
    answer = call(
        broker,
        apis.API_VERSIONS,
        version,
        {"client_software_name": "t", "client_software_version": "1"},
    )
    assert answer["finalized_features_epoch"] >= 0
    assert [
        (f["name"], f["min_version_level"], f["max_version_level"])
        for f in answer["finalized_features"]
    ] == [("transaction.version", 2, 2)]
    assert [
        (f["name"], f["min_version"], f["max_version"]) for f in answer["supported_features"]
    ] == [("transaction.version", 0, 2)]


@pytest.mark.parametrize("version", versions(apis.INIT_PRODUCER_ID))
def test_init_producer_id_with_a_transactional_id(broker: RunningBroker, version: int) -> None:
    tid = f"init-v{version}"
    body = {"transactional_id": tid, "transaction_timeout": 60000}
    if version >= 3:
        body.update(producer_id=-1, producer_epoch=-1)
    first = call(broker, apis.INIT_PRODUCER_ID, version, body)
    again = call(broker, apis.INIT_PRODUCER_ID, version, body)
    assert (first["error_code"], first["producer_epoch"]) == (0, 0)
    assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (
        0,
        first["producer_id"],
        1,
    )
    too_long = call(broker, apis.INIT_PRODUCER_ID, version, {**body, "transaction_timeout": 120001})
    assert too_long["error_code"] == INVALID_TRANSACTION_TIMEOUT


@pytest.mark.parametrize(
    ("add_version", "end_version"),
    [(v, min(v + 1, 4)) for v in range(4)],
)
def test_a_transaction_through_add_partitions_and_end_txn(
    broker: RunningBroker, add_version: int, end_version: int
) -> None:
    tid = f"flow-{add_version}-{end_version}"
    producer = init(broker, tid)
    assert add_v3(broker, tid, producer, 0, 1, version=add_version) == {
        (TOPIC, 0): 0,
        (TOPIC, 1): 0,
    }
    unknown = call(
        broker,
        apis.ADD_PARTITIONS_TO_TXN,
        add_version,
        {
            "v3_and_below_transactional_id": tid,
            "v3_and_below_producer_id": producer[0],
            "v3_and_below_producer_epoch": producer[1],
            "v3_and_below_topics": [
                {"name": TOPIC, "partitions": [0]},
                {"name": "no-such-topic", "partitions": [0]},
            ],
        },
    )
    codes = {
        (t["name"], p["partition_index"]): p["partition_error_code"]
        for t in unknown["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    }
    assert codes == {
        (TOPIC, 0): OPERATION_NOT_ATTEMPTED,
        ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    described = describe(broker, tid)
    assert (described["error_code"], described["transaction_state"]) == (0, "Ongoing")
    assert described["topics"] == [{"topic": TOPIC, "partitions": [0, 1]}]
    ended = call(
        broker,
        apis.END_TXN,
        end_version,
        {
            "transactional_id": tid,
            "producer_id": producer[0],
            "producer_epoch": producer[1],
            "committed": True,
        },
    )
    assert ended["error_code"] == 0, ended


@pytest.mark.parametrize("version", versions(apis.ADD_OFFSETS_TO_TXN))
def test_add_offsets_adds_the_groups_offsets_partition(broker: RunningBroker, version: int) -> None:
    tid = f"offsets-v{version}"
    producer = init(broker, tid)
    answer = call(
        broker,
        apis.ADD_OFFSETS_TO_TXN,
        version,
        {
            "transactional_id": tid,
            "producer_id": producer[0],
            "producer_epoch": producer[1],
            "group_id": "a-group",
        },
    )
    assert answer["error_code"] == 0, answer
    partition = broker.broker.group_coordinator_log.topic.partition_for("a-group")
    assert describe(broker, tid)["topics"] == [
        {"topic": "__consumer_offsets", "partitions": [partition]}
    ]


@pytest.mark.parametrize("version", [4, 5])
def test_the_brokers_batched_add_partitions_verifies_and_adds(
    broker: RunningBroker, version: int
) -> None:
    tid = f"batched-v{version}"
    producer = init(broker, tid)
    assert add_v3(broker, tid, producer, 0) == {(TOPIC, 0): 0}

    def batched(verify_only: bool) -> dict:
        answer = call(
            broker,
            apis.ADD_PARTITIONS_TO_TXN,
            version,
            {
                "transactions": [
                    {
                        "transactional_id": tid,
                        "producer_id": producer[0],
                        "producer_epoch": producer[1],
                        "verify_only": verify_only,
                        "topics": [{"name": TOPIC, "partitions": [0, 1]}],
                    }
                ]
            },
        )
        assert answer["error_code"] == 0, answer
        (result,) = answer["results_by_transaction"]
        return {
            p["partition_index"]: p["partition_error_code"]
            for t in result["topic_results"]
            for p in t["results_by_partition"]
        }

    assert batched(verify_only=True) == {0: 0, 1: TRANSACTION_ABORTABLE}
    assert batched(verify_only=False) == {0: 0, 1: 0}
    assert batched(verify_only=True) == {0: 0, 1: 0}


@pytest.mark.parametrize("version", versions(apis.LIST_TRANSACTIONS))
def test_list_and_describe_transactions(broker: RunningBroker, version: int) -> None:
    tid = f"listed-v{version}-{next(_ids)}"
    producer = init(broker, tid)
    add_v3(broker, tid, producer, 1)
    body: dict[str, Any] = {
        "state_filters": ["Ongoing", "NoSuchState"],
        "producer_id_filters": [producer[0]],
    }
    if version >= 1:
        body["duration_filter"] = -1
    if version >= 2:
        body["transactional_id_pattern"] = "listed-.*"
    answer = call(broker, apis.LIST_TRANSACTIONS, version, body)
    assert answer["error_code"] == 0
    assert answer["unknown_state_filters"] == ["NoSuchState"]
    assert [
        (t["transactional_id"], t["producer_id"], t["transaction_state"])
        for t in answer["transaction_states"]
    ] == [(tid, producer[0], "Ongoing")]
    described = describe(broker, tid)
    assert (
        described["producer_id"],
        described["producer_epoch"],
        described["transaction_timeout"],
    ) == (producer[0], producer[1], 60000)
    assert describe(broker, "never-seen")["error_code"] == TRANSACTIONAL_ID_NOT_FOUND


@pytest.mark.parametrize("version", [9, 10, 11, 12])
def test_a_transactional_produce_is_checked_against_its_transaction(
    broker: RunningBroker, version: int
) -> None:
    tid = f"produce-v{version}"
    producer = init(broker, tid)
    assert produce(broker, version, None, producer, 0) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # (acks=1, one partition: the shape answered at once, which leaves transactional batches
    # to this check.)
    assert produce(broker, version, None, producer, 0, acks=1) == (
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    if version >= 12:  # transaction version 2: the produce adds the partition (KIP-890)
        assert produce(broker, version, tid, producer, 0) == 0
        described = describe(broker, tid)
        assert (described["transaction_state"], described["topics"]) == (
            "Ongoing",
            [{"topic": TOPIC, "partitions": [0]}],
        )
        return
    not_added = INVALID_TXN_STATE if version < 11 else TRANSACTION_ABORTABLE
    assert produce(broker, version, tid, producer, 0) == not_added
    assert add_v3(broker, tid, producer, 0) == {(TOPIC, 0): 0}
    assert produce(broker, version, tid, producer, 0) == 0


@pytest.mark.parametrize("version", [3, 5, 6])
def test_txn_offset_commit_joins_the_transaction(broker: RunningBroker, version: int) -> None:
    """TxnOffsetCommit's ``__consumer_offsets`` partition is checked against the producer's
    transaction after AddOffsetsToTxn (v3), or added to it by the commit itself (v5, KIP-890;
    v6 names the topic by id)."""
    tid = f"txn-offsets-v{version}"
    group = f"txn-offsets-group-v{version}"
    producer = init(broker, tid)
    if version < 5:
        added = call(
            broker,
            apis.ADD_OFFSETS_TO_TXN,
            3,
            {
                "transactional_id": tid,
                "producer_id": producer[0],
                "producer_epoch": producer[1],
                "group_id": group,
            },
        )
        assert added["error_code"] == 0, added
    topic: dict[str, Any] = {"name": TOPIC}
    if version >= 6:
        (described_topic,) = call(
            broker, apis.METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}]}
        )["topics"]
        topic = {"topic_id": described_topic["topic_id"]}
    answer = call(
        broker,
        apis.TXN_OFFSET_COMMIT,
        version,
        {
            "transactional_id": tid,
            "group_id": group,
            "producer_id": producer[0],
            "producer_epoch": producer[1],
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    **topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                    ],
                }
            ],
        },
    )
    assert [p["error_code"] for t in answer["topics"] for p in t["partitions"]] == [0], answer
    assert [{k: t[k] for k in topic} for t in answer["topics"]] == [topic]
    partition = broker.broker.group_coordinator_log.topic.partition_for(group)
    assert describe(broker, tid)["topics"] == [
        {"topic": "__consumer_offsets", "partitions": [partition]}
    ]


def test_without_partition_verification_a_version_1_produce_is_not_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """transaction.partition.verification.enable=false: Kafka before 3.6's behaviour for
    transaction version 1 (the partition need not be added first); version 2 still adds."""
    settings = {
        "transaction.state.log.num.partitions": "1",
        "transaction.partition.verification.enable": "false",
    }
    with running_broker(tmp_path, settings) as unverified:
        unverified.loop_thread.call(unverified.broker.topic_admin.create_topic, TOPIC, 2, {})
        producer = init(unverified, "unverified")
        assert produce(unverified, 10, "unverified", producer, 0) == 0
        assert produce(unverified, 12, "unverified", producer, 1) == 0
        assert describe(unverified, "unverified")["topics"] == [{"topic": TOPIC, "partitions": [1]}]


def test_adding_the_next_transactions_partition_waits_for_the_last_one_to_end(
    broker: RunningBroker,
) -> None:
    """AddPartitionsToTxn for the next transaction, sent the moment the commit is answered,
    finds the markers still being written (held back here 50 ms): it is answered once the
    transaction has completed, not CONCURRENT_TRANSACTIONS (which cost every transaction of
    a version-1 client its retry backoff: 100 ms for odradek's client and librdkafka)."""
    replica_manager = broker.broker.replica_manager
    write_markers = replica_manager.write_transaction_markers

    async def slow_markers(markers):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.05)
        return await write_markers(markers)

    tid = f"next-{next(_ids)}"
    producer = init(broker, tid)
    assert add_v3(broker, tid, producer, 0) == {(TOPIC, 0): 0}
    replica_manager.write_transaction_markers = slow_markers  # type: ignore[method-assign]
    try:
        ended = call(
            broker,
            apis.END_TXN,
            4,
            {
                "transactional_id": tid,
                "producer_id": producer[0],
                "producer_epoch": producer[1],
                "committed": True,
            },
        )
        assert ended["error_code"] == 0, ended
        assert add_v3(broker, tid, producer, 1) == {(TOPIC, 1): 0}
    finally:
        replica_manager.write_transaction_markers = write_markers  # type: ignore[method-assign]
    assert describe(broker, tid)["transaction_state"] == "Ongoing"
