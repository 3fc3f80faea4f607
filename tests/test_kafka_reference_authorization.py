"""What a principal without the ACLs Kafka requires gets, from Apache Kafka (StandardAuthorizer,
SASL/PLAIN on loopback) and from odradek, compared answer by answer: OffsetForLeaderEpoch of a
topic it may not describe, Metadata and DeleteTopics by a topic id it may not describe and by
an unknown id, InitProducerId under a PREFIXED DENY, the authorized operations of
DescribeGroups, Metadata and DescribeCluster, CreateTopics without DescribeConfigs, DeleteTopics
by name, and a follower's Fetch without ClusterAction; and (the same bullet of the issue) topic
names that collide once '.' and '_' are one.

The same raw Kafka requests go to both brokers (security_helpers.kafka_request), as the
administrator (a super user) to set up, then as alice. Topic ids differ between the brokers, so
an answer's id is compared as "the id asked about" or "the topic's own id".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka_reference import ReferenceBroker
from security_helpers import (
    ADMIN,
    ADMIN_PASSWORD,
    PASSWORD,
    USER,
    address,
    kafka_request,
    secure_broker,
)

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

ADMIN_TOKEN, ALICE_TOKEN = f"\0{ADMIN}\0{ADMIN_PASSWORD}", f"\0{USER}\0{PASSWORD}"
TOPIC, READABLE, GROUP = "hidden", "readable", "described-group"
TOPIC_RESOURCE, GROUP_RESOURCE = 2, 3
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE = 3, 4, 5, 8
DENY, ALLOW = 2, 3
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="{ADMIN}" password="{ADMIN_PASSWORD}" '
    f'user_{ADMIN}="{ADMIN_PASSWORD}" user_{USER}="{PASSWORD}";'
)
KAFKA_SECURITY = (
    # The listener named PLAINTEXT speaks SASL_PLAINTEXT (the tool waits on that port).
    "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "sasl.enabled.mechanisms=PLAIN",
    "sasl.mechanism.inter.broker.protocol=PLAIN",
    f"listener.name.plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    f"super.users=User:{ADMIN};User:ANONYMOUS",  # ANONYMOUS: the controller listener
)
ODRADEK_SECURITY = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:{ADMIN}",
}


@dataclass(frozen=True)
class Target:
    name: str
    address: str

    def call(self, api_key: int, version: int, body: dict[str, Any], token: str) -> dict:
        return kafka_request(self.address, api_key, version, body, token)

    def admin(self, api_key: int, version: int, body: dict[str, Any]) -> dict:
        return self.call(api_key, version, body, ADMIN_TOKEN)

    def alice(self, api_key: int, version: int, body: dict[str, Any]) -> dict:
        return self.call(api_key, version, body, ALICE_TOKEN)


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, Target]]:
    kafka = ReferenceBroker.start(tmp_path_factory.mktemp("reference-kafka"), *KAFKA_SECURITY)
    try:
        with secure_broker(tmp_path_factory.mktemp("odradek"), ODRADEK_SECURITY) as running:
            pair = (
                Target("kafka", kafka.bootstrap),
                Target("odradek", address(running[0], "SASL_PLAINTEXT")),
            )
            for target in pair:
                _set_up(target)
            yield pair
    finally:
        kafka.stop()


def _set_up(target: Target) -> None:
    """A topic with one record, a group alice may only describe, and alice's ACLs: Describe
    on the group, and Write on PREFIXED ``orders-`` that a PREFIXED DENY ``ord`` dominates."""
    created = target.admin(
        19,
        7,
        {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}
                    for name in (TOPIC, READABLE)],
         "timeout": 30000},
    )  # fmt: skip
    assert [t["error_code"] for t in created["topics"]] == [0, 0], created
    _wait_for_leader(target, TOPIC)
    _wait_for_leader(target, READABLE)
    acls = [
        (GROUP_RESOURCE, GROUP, LITERAL, DESCRIBE, ALLOW),
        (TOPIC_RESOURCE, "orders-", PREFIXED, WRITE, ALLOW),
        (TOPIC_RESOURCE, "ord", PREFIXED, WRITE, DENY),
        (TOPIC_RESOURCE, "made-", PREFIXED, CREATE, ALLOW),
        (TOPIC_RESOURCE, "seen-", PREFIXED, DESCRIBE, ALLOW),
        (TOPIC_RESOURCE, READABLE, LITERAL, READ, ALLOW),
    ]
    answer = target.admin(
        30,
        3,
        {
            "creations": [
                {"resource_type": kind, "resource_name": name, "resource_pattern_type": pattern,
                 "principal": f"User:{USER}", "host": "*", "operation": op,
                 "permission_type": permission}
                for kind, name, pattern, op, permission in acls
            ]
        },
    )  # fmt: skip
    assert [r["error_code"] for r in answer["results"]] == [0] * len(acls), answer
    deadline = time.monotonic() + 60
    while True:  # Kafka's coordinator loads the offsets topic a while after it is created
        target.admin(10, 4, {"key_type": 0, "coordinator_keys": [GROUP]})
        commit = target.admin(
            8,
            9,
            {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
             "topics": [{"name": TOPIC, "partitions": [
                 {"partition_index": 0, "committed_offset": 0}]}]},
        )  # fmt: skip
        if commit["topics"][0]["partitions"][0]["error_code"] == 0:
            break
        assert time.monotonic() < deadline, commit
        time.sleep(0.5)
    _wait_for_acls(target, len(acls))


def _wait_for_acls(target: Target, count: int) -> None:
    """Until DescribeAcls lists ``count`` ACLs of alice: Kafka's authorizer learns them from
    its metadata log a moment after CreateAcls is answered (longer on a loaded machine)."""
    any_filter = {"resource_type_filter": 1, "resource_name_filter": None,
                  "pattern_type_filter": 1, "principal_filter": f"User:{USER}",
                  "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        described = target.admin(29, 3, any_filter)
        listed = sum(len(resource["acls"]) for resource in described["resources"])
        if described["error_code"] == 0 and listed >= count:
            return
        assert time.monotonic() < deadline, described
        time.sleep(0.2)


def _wait_for_leader(target: Target, topic: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        metadata = _metadata(target.admin, [{"name": topic}])
        partitions = metadata["topics"][0]["partitions"]
        if partitions and partitions[0]["leader_id"] >= 0:
            return
        assert time.monotonic() < deadline, metadata
        time.sleep(0.2)


def _metadata(call: Callable[..., dict], topics: list[dict] | None, **fields: Any) -> dict:
    body = {"topics": topics, "allow_auto_topic_creation": False, **fields}
    return call(3, 12, body)


def _topic_id(target: Target) -> uuid.UUID:
    return _metadata(target.admin, [{"name": TOPIC}])["topics"][0]["topic_id"]


def _epoch_end(partition: dict[str, Any]) -> tuple[int, int, int]:
    return partition["partition"], partition["error_code"], partition["end_offset"]


def _both(targets: tuple[Target, Target], ask: Callable[[Target], Any]) -> None:
    kafka, odradek = (ask(target) for target in targets)
    assert odradek == kafka


def test_offset_for_leader_epoch_of_a_topic_alice_may_not_describe(
    targets: tuple[Target, Target],
) -> None:
    def ask(target: Target) -> Any:
        body = {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}  # fmt: skip
        topics = target.alice(23, 4, body)["topics"]
        return [(t["topic"], [_epoch_end(p) for p in t["partitions"]]) for t in topics]

    _both(targets, ask)


def test_metadata_and_delete_topics_by_id(targets: tuple[Target, Target]) -> None:
    stranger = uuid.uuid4()

    def ask(target: Target) -> Any:
        own = _topic_id(target)

        def seen(topic_id: uuid.UUID) -> str:
            return {own: "own", stranger: "asked", uuid.UUID(int=0): "zero"}.get(topic_id, "?")

        answers = []
        for topic_id in (own, stranger):
            metadata = _metadata(target.alice, [{"topic_id": topic_id, "name": None}])
            answers += [
                (t["error_code"], t["name"], seen(t["topic_id"])) for t in metadata["topics"]
            ]
            deleted = target.alice(
                20, 6, {"topics": [{"name": None, "topic_id": topic_id}], "timeout": 30000}
            )
            answers += [
                (t["error_code"], t["name"], seen(t["topic_id"])) for t in deleted["responses"]
            ]
        by_name = _metadata(target.alice, [{"name": TOPIC}])
        answers += [(t["error_code"], t["name"], seen(t["topic_id"])) for t in by_name["topics"]]
        return answers

    _both(targets, ask)


def test_init_producer_id_under_a_prefixed_deny(targets: tuple[Target, Target]) -> None:
    def ask(target: Target) -> int:
        body = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                "producer_epoch": -1}  # fmt: skip
        return target.alice(22, 4, body)["error_code"]

    _both(targets, ask)


def test_authorized_operations(targets: tuple[Target, Target]) -> None:
    def ask(target: Target) -> Any:
        groups = target.alice(
            15, 5, {"groups": [GROUP, "other-group"], "include_authorized_operations": True}
        )
        cluster = target.alice(
            60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}
        )
        everything = _metadata(target.admin, None, include_topic_authorized_operations=True)
        return (
            sorted(
                (g["group_id"], g["error_code"], g["authorized_operations"])
                for g in groups["groups"]
            ),
            (cluster["error_code"], cluster["cluster_authorized_operations"]),
            [
                (t["name"], t["topic_authorized_operations"])
                for t in everything["topics"]
                if t["name"] == TOPIC
            ],
        )

    _both(targets, ask)


def test_a_topic_created_without_describe_configs(targets: tuple[Target, Target]) -> None:
    """Created, but its configs (and partition count) withheld: topic_config_error_code 29."""

    def ask(target: Target) -> Any:
        body = {"topics": [{"name": "made-here", "num_partitions": 2, "replication_factor": -1}],
                "timeout": 30000}  # fmt: skip
        (topic,) = target.alice(19, 7, body)["topics"]
        return (
            topic["error_code"],
            topic["topic_config_error_code"],
            topic["configs"],
            topic["num_partitions"],
            topic["replication_factor"],
        )

    _both(targets, ask)


def test_delete_topics_by_name(targets: tuple[Target, Target]) -> None:
    """A missing topic alice may describe, and an existing one she may not."""

    def ask(target: Target) -> Any:
        body = {"topics": [{"name": n, "topic_id": None} for n in ("seen-missing", TOPIC)],
                "timeout": 30000}  # fmt: skip
        return sorted((t["name"], t["error_code"]) for t in target.alice(20, 6, body)["responses"])

    _both(targets, ask)


def test_a_follower_fetch_with_read_but_not_cluster_action(
    targets: tuple[Target, Target],
) -> None:
    def ask(target: Target) -> Any:
        answers = []
        for replica_id in (1, -1):
            body = {"replica_id": replica_id, "max_wait": 0, "min_bytes": 0,
                    "max_bytes": 1 << 20, "session_epoch": -1,
                    "topics": [{"topic": READABLE, "partitions": [
                        {"partition": 0, "fetch_offset": 0,
                         "partition_max_bytes": 1 << 20}]}]}  # fmt: skip
            (topic,) = target.alice(1, 12, body)["responses"]
            answers.append([p["error_code"] for p in topic["partitions"]])
        return answers

    _both(targets, ask)


def test_topic_names_colliding_once_dots_are_underscores(targets: tuple[Target, Target]) -> None:
    """Not an ACL, but in the same place of the issue: orders.x, then orders_x."""

    def ask(target: Target) -> Any:
        answers = []
        for name in ("orders.x", "orders_x"):
            body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}],
                    "timeout": 30000}  # fmt: skip
            (topic,) = target.admin(19, 7, body)["topics"]
            answers.append((topic["error_code"], topic["error_message"]))
        return answers

    _both(targets, ask)
