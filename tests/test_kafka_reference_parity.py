"""Divergences from Apache Kafka found by hand (issue 36), each pinned against the reference
Kafka: the same request from the same client to Kafka 4.4 and to odradek gets the same answer.

ApiVersions v5 (KIP-1242's cluster and node check), DescribeConfigs of a group, topic names
that collide once '.' and '_' are folded, DescribeLogDirs and ElectLeaders (Kafka's own tools
and Admin client). One Kafka broker for the module and one odradek broker in the test process.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_helpers import KafkaSocket
from kafka_reference import JavaClient, ReferenceBroker, harness_classpath
from server_helpers import running_broker

from odradek.client.admin import Admin
from odradek.client.admin import NewTopic as OdradekNewTopic
from odradek.errors import InvalidTopicError
from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

API_VERSIONS = 18


@dataclass
class Target:
    """One broker under test: where it listens, its cluster id and node id."""

    name: str
    bootstrap: str
    cluster_id: str
    node_id: int


def _target(name: str, bootstrap: str) -> Target:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster = admin.describe_cluster().result(30)
    return Target(name, bootstrap, cluster.cluster_id, cluster.nodes[0].id)


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Target]]:
    kafka = ReferenceBroker.start(tmp_path_factory.mktemp("reference-kafka"))
    try:
        with running_broker(tmp_path_factory.mktemp("odradek")) as odradek:
            yield {
                "kafka": _target("kafka", kafka.bootstrap),
                "odradek": _target("odradek", odradek.bootstrap),
            }
    finally:
        kafka.stop()


def kafka_call(bootstrap: str, api_key: int, version: int, body: dict) -> dict:
    """One request encoded and its response decoded by odradek's codec (Kafka's schemas)."""
    kafka = KafkaSocket(bootstrap)
    try:
        spec = request_spec(api_key, version)
        kafka.send(api_key, version, b"".join(map(bytes, encode_parts(spec, body))), spec.flexible)
        frame = kafka.read_frame()
    finally:
        kafka.close()
    response = response_spec(api_key, version)
    header = 4 + (1 if response.flexible and api_key != API_VERSIONS else 0)
    return decode(response, memoryview(frame), header)


# --- ApiVersions v5 --------------------------------------------------------------------------


def _api_versions_v5(target: Target) -> dict[str, tuple[int, bool]]:
    """ApiVersions v5 naming no node, the broker itself, another node of its cluster, another
    cluster, or only one of the two: (error code, whether the API list came)."""
    cases = {
        "neither": (None, -1),
        "itself": (target.cluster_id, target.node_id),
        "another node": (target.cluster_id, target.node_id + 1),
        "another cluster": ("another-cluster", target.node_id),
        "cluster only": (target.cluster_id, -1),
        "node only": (None, target.node_id),
    }
    answers = {}
    for case, (cluster_id, node_id) in cases.items():
        body = {
            "client_software_name": "parity",
            "client_software_version": "1",
            "cluster_id": cluster_id,
            "node_id": node_id,
        }
        response = kafka_call(target.bootstrap, API_VERSIONS, 5, body)
        listed = {entry["api_key"]: entry for entry in response["api_keys"]}
        assert not listed or listed[API_VERSIONS]["max_version"] == 5, (target.name, listed)
        answers[case] = (response["error_code"], bool(listed))
    return answers


def test_api_versions_v5_is_served_and_checks_the_cluster_and_node_as_kafka_does(
    targets: dict[str, Target],
) -> None:
    kafka, odradek = (_api_versions_v5(targets[name]) for name in ("kafka", "odradek"))
    assert kafka["itself"] == (0, True)  # the scenario asks what it means to
    assert odradek == kafka


def test_the_java_clients_api_versions_v5_is_served_without_a_log_line(
    targets: dict[str, Target], caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka 4.4's Java client opens every connection with ApiVersions v5: served, not
    refused and retried at v4 with a log line a connection."""
    java = JavaClient(harness_classpath(), targets["odradek"].bootstrap)
    with caplog.at_level(logging.DEBUG, logger="odradek"):
        assert java.admin(["list-topics"])[0]["step"] == "list-topics"
    said = [r.getMessage() for r in caplog.records if "ApiVersions" in r.getMessage()]
    assert said == []


# --- topic names that collide once '.' and '_' are folded ------------------------------------


def _create(bootstrap: str, name: str, validate_only: bool = False) -> tuple[int, str | None]:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1}
    body = {"topics": [topic], "timeout": 30_000, "validate_only": validate_only}
    answer = kafka_call(bootstrap, 19, 7, body)["topics"][0]
    return answer["error_code"], answer["error_message"]


def _auto_create(bootstrap: str, name: str) -> int:
    body = {"topics": [{"name": name}], "allow_auto_topic_creation": True}
    return kafka_call(bootstrap, 3, 12, body)["topics"][0]["error_code"]


def _colliding_names(target: Target, base: str) -> dict[str, object]:
    dotted, underscored = f"{base}.x", f"{base}_x"
    answers: dict[str, object] = {"first": _create(target.bootstrap, dotted)}
    answers["second"] = _create(target.bootstrap, underscored)
    answers["second, validate only"] = _create(target.bootstrap, underscored, validate_only=True)
    answers["first again"] = _create(target.bootstrap, dotted)
    answers["auto-created by Metadata"] = _auto_create(target.bootstrap, f"{base}_x")
    answers["after the auto-creation"] = _create(target.bootstrap, underscored)
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    refused = admin.create_topics([NewTopic(underscored, 1, 1)])[underscored].exception(30)
    answers["confluent-kafka"] = (refused.args[0].name(), refused.args[0].str())
    return answers


def test_topic_names_colliding_after_folding_are_refused_as_kafka_refuses(
    targets: dict[str, Target],
) -> None:
    base = f"orders-{uuid.uuid4().hex[:6]}"
    kafka, odradek = (_colliding_names(targets[name], base) for name in ("kafka", "odradek"))
    assert kafka["second"] == (17, f"Topic '{base}_x' collides with existing topic: {base}.x")
    assert odradek == kafka


def test_the_msgpack_protocols_create_refuses_a_colliding_name_as_kafkas_does(
    targets: dict[str, Target],
) -> None:
    base = f"orders-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap_servers=targets["odradek"].bootstrap) as admin:
        admin.create_topics([OdradekNewTopic(f"{base}.x", 1)])
        with pytest.raises(InvalidTopicError) as refused:
            admin.create_topics([OdradekNewTopic(f"{base}_x", 1)])
        assert refused.value.message == f"Topic '{base}_x' collides with existing topic: {base}.x"
        assert f"{base}_x" not in admin.list_topics()
