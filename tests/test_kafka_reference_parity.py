"""Divergences from Apache Kafka found by hand (issue 36), each pinned against the reference
Kafka: the same request from the same client to Kafka 4.4 and to odradek gets the same answer.

ApiVersions v5 (KIP-1242's cluster and node check), DescribeConfigs of a group, topic names
that collide once '.' and '_' are folded, DescribeLogDirs and ElectLeaders (Kafka's own tools
and Admin client). One Kafka broker for the module and one odradek broker in the test process.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import confluent_kafka
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka_helpers import await_leaders, kafka_call
from kafka_reference import TOOL, JavaClient, ReferenceBroker, harness_classpath
from server_helpers import running_broker

from odradek.client.admin import Admin
from odradek.client.admin import NewTopic as OdradekNewTopic
from odradek.errors import InvalidTopicError

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


# --- DescribeLogDirs and ElectLeaders ----------------------------------------------------------


def kafka_tool(main_class: str, *args: str) -> tuple[int, list[str]]:
    """One of Kafka's command-line tools, run by ``kafka-reference run``: its exit status and
    its output lines (stdout, then stderr) without Java's stack frames."""
    done = subprocess.run(
        [str(TOOL), "run", main_class, *args], capture_output=True, text=True, timeout=300
    )
    lines = (done.stdout + done.stderr).splitlines()
    return done.returncode, [line for line in lines if not line.startswith(("\tat ", "\t... "))]


def _log_dirs_topic(target: Target, topic: str) -> None:
    """``topic`` with 2 partitions, partition 0 holding one batch of 10 records.

    Their timestamp (1, the same bytes on both brokers) is decades past the default
    retention.ms: the topic keeps its records forever, or the broker's next retention check
    (every 5 minutes from its start, wherever this test falls between two) deletes them."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    kept = NewTopic(topic, 2, 1, config={"retention.ms": "-1"})
    admin.create_topics([kept])[topic].result(30)
    deadline = time.monotonic() + 120
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": target.bootstrap, "linger.ms": 100, "enable.idempotence": False}
    )
    failed: list[confluent_kafka.KafkaError] = []

    def on_delivery(error: confluent_kafka.KafkaError | None, _: object) -> None:
        if error is not None:
            failed.append(error)

    # Kafka's broker learns of the topic a moment after it is created (seconds on a loaded
    # machine): a batch it refused comes back in its delivery report, which flush() does not
    # raise, so the report decides whether to send it again (a batch sent twice would make
    # partition 0 hold 20 records, not 10: the sizes compared would say so).
    while True:
        failed.clear()
        try:
            for number in range(10):
                producer.produce(
                    topic,
                    b"v" * 100,
                    key=b"%d" % number,
                    partition=0,
                    timestamp=1,
                    on_delivery=on_delivery,
                )
            assert producer.flush(60) == 0
        except confluent_kafka.KafkaException as error:
            failed.append(error.args[0])
        if not failed:
            return
        assert time.monotonic() < deadline, f"{target.name} refused the batch: {failed}"
        time.sleep(0.5)


def _describe_log_dirs(target: Target, topic: str) -> dict[str, object]:
    """DescribeLogDirs v1..v5 raw (all topics, some partitions, none) and LogDirsCommand,
    as seen for ``topic``; the directory's path and free space are each broker's own."""

    def ours(results: list[dict], path: str) -> list[dict]:
        for result in results:
            assert result["log_dir"] == path
            result["log_dir"] = "DIR"
            result["topics"] = sorted(
                (t for t in result["topics"] if t["name"] in (topic, "nope")),
                key=lambda t: t["name"],
            )
            for entry in result["topics"]:
                entry["partitions"].sort(key=lambda p: p["partition_index"])
            if "total_bytes" in result:
                assert 0 < result.pop("usable_bytes") <= result.pop("total_bytes")
        return results

    code, lines = kafka_tool(
        "org.apache.kafka.tools.LogDirsCommand",
        "--bootstrap-server",
        target.bootstrap,
        "--describe",
        "--topic-list",
        topic,
    )
    assert code == 0, lines
    described = json.loads(lines[-1])
    (broker,) = described["brokers"]
    (log_dir,) = broker["logDirs"]
    path = log_dir.pop("logDir")
    log_dir["partitions"].sort(key=lambda p: p["partition"])
    assert broker.pop("broker") == target.node_id
    answers: dict[str, object] = {"LogDirsCommand": described}
    asked = {
        "all": None,
        "some": [{"topic": topic, "partitions": [0, 7]}, {"topic": "nope", "partitions": [0]}],
        "none": [],
    }
    for version in (1, 4, 5):
        for name, topics in asked.items():
            response = kafka_call(target.bootstrap, 35, version, {"topics": topics})
            response["results"] = ours(response["results"], path)
            answers[f"v{version} {name}"] = response
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        (described_by_python,) = admin.describe_log_dirs(topic_partitions={topic: [0, 1]})
    finally:
        admin.close()
    assert described_by_python.pop("broker") == target.node_id
    described_by_python["log_dirs"] = ours(described_by_python["log_dirs"], path)
    answers["kafka-python"] = described_by_python
    return answers


def test_describe_log_dirs_as_kafka_answers_it(targets: dict[str, Target]) -> None:
    topic = f"log-dirs-{uuid.uuid4().hex[:6]}"
    for target in targets.values():
        _log_dirs_topic(target, topic)
    kafka, odradek = (_describe_log_dirs(targets[name], topic) for name in ("kafka", "odradek"))
    assert kafka["v4 some"]["results"][0]["topics"][0]["partitions"][0]["partition_size"] > 0
    assert odradek == kafka


def _leader_elections(target: Target, topic: str) -> dict[str, object]:
    """kafka-leader-election.sh's forms, and ElectLeaders raw, for ``topic`` (2 partitions)."""
    tool = "org.apache.kafka.tools.LeaderElectionCommand"
    server = ("--bootstrap-server", target.bootstrap)
    answers: dict[str, object] = {}
    for election in ("preferred", "unclean"):
        for name, partitions in {
            "all": ("--all-topic-partitions",),
            "one": ("--topic", topic, "--partition", "1"),
            "unknown topic": ("--topic", f"{topic}-nope", "--partition", "0"),
            "unknown partition": ("--topic", topic, "--partition", "9"),
        }.items():
            code, lines = kafka_tool(tool, *server, "--election-type", election, *partitions)
            answers[f"{election} {name}"] = (
                code,
                [line.replace(target.bootstrap, "B") for line in lines],
            )
    asked = [
        {"topic": topic, "partitions": [0, 1, 5]},
        {"topic": f"{topic}-nope", "partitions": [0]},
    ]
    for version in (0, 1, 2):
        for election_type in (0, 1):
            body = {"election_type": election_type, "topic_partitions": asked, "timeout": 30_000}
            answers[f"v{version} {election_type}"] = kafka_call(target.bootstrap, 43, version, body)
        every = kafka_call(target.bootstrap, 43, version, {"topic_partitions": None})
        every["replica_election_results"] = [
            r for r in every["replica_election_results"] if r["topic"] == topic
        ]
        answers[f"v{version} every partition"] = every
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        for election_type in (0, 1):
            response = admin.elect_leaders(election_type, {topic: [0, 1, 5]}, raise_errors=False)
            answers[f"kafka-python {election_type}"] = [
                (
                    r.topic,
                    [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result],
                )
                for r in response.replica_election_results
            ]
    finally:
        admin.close()
    return answers


# Sixteen runs of Kafka's LeaderElectionCommand, a JVM each: 10-30 s a run on two cores that
# run two suites, so more than pytest's 300 s in all.
@pytest.mark.timeout(900)
def test_leader_elections_are_answered_as_kafka_answers_them(targets: dict[str, Target]) -> None:
    topic = f"elections-{uuid.uuid4().hex[:6]}"
    for target in targets.values():
        admin = AdminClient({"bootstrap.servers": target.bootstrap})  # outlives its future
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        await_leaders(target.bootstrap, topic, 2)
    kafka, odradek = (_leader_elections(targets[name], topic) for name in ("kafka", "odradek"))
    assert kafka["preferred one"][1] == [f"Valid replica already elected for partitions {topic}-1"]
    assert odradek == kafka


# --- DescribeConfigs of a group ----------------------------------------------------------------

GROUP_RESOURCE, CLASSIC_GROUP_NAME = 32, "parity-group"


def _group_configs(target: Target) -> dict[str, object]:
    """DescribeConfigs v4 of a group (any name, the empty one), with and without synonyms and
    documentation, some keys only; an alter of an unknown and of a known key (which Kafka
    stores); ``kafka-configs.sh --describe`` of a classic group (its offsets only) and of
    a group that does not exist."""
    topic, group = f"{CLASSIC_GROUP_NAME}-topic", "altered-group"
    admin = AdminClient({"bootstrap.servers": target.bootstrap})  # outlives its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    await_leaders(target.bootstrap, topic, 1)
    offsets = ConsumerGroupTopicPartitions(CLASSIC_GROUP_NAME, [TopicPartition(topic, 0, 0)])
    admin.alter_consumer_group_offsets([offsets])[CLASSIC_GROUP_NAME].result(30)
    answers: dict[str, object] = {}
    cases = {
        "any name": (CLASSIC_GROUP_NAME, None, False, False),
        "empty": ("", None, False, False),
        "synonyms and documentation": (CLASSIC_GROUP_NAME, None, True, True),
        "some keys": (
            CLASSIC_GROUP_NAME,
            ["consumer.session.timeout.ms", "share.isolation.level", "no.such.key"],
            True,
            False,
        ),
    }
    for case, (name, keys, synonyms, documentation) in cases.items():
        resource = {
            "resource_type": GROUP_RESOURCE,
            "resource_name": name,
            "configuration_keys": keys,
        }
        body = {
            "resources": [resource],
            "include_synonyms": synonyms,
            "include_documentation": documentation,
        }
        answers[case] = kafka_call(target.bootstrap, 32, 4, body)["results"]
    for case, key in {
        "alter unknown key": "no.such.key",
        "alter known key": "consumer.session.timeout.ms",
    }.items():
        config = {"name": key, "config_operation": 0, "value": "50000"}
        resource = {"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [config]}
        body = {"resources": [resource], "validate_only": False}
        answers[case] = kafka_call(target.bootstrap, 44, 1, body)["responses"]
    for name, every in (
        (CLASSIC_GROUP_NAME, ()),
        (CLASSIC_GROUP_NAME, ("--all",)),
        ("no-such-group", ()),
    ):
        code, lines = kafka_tool(
            "org.apache.kafka.tools.ConfigCommand",
            *("--bootstrap-server", target.bootstrap, "--describe", *every),
            *("--entity-type", "groups", "--entity-name", name),
        )
        answers[f"kafka-configs.sh {name} {every}"] = (code, lines)
    return answers


def test_a_groups_configs_are_described_as_kafka_describes_them(
    targets: dict[str, Target],
) -> None:
    """Kafka 4.4 describes the configs of any named group (consumer.*, share.*, streams.*,
    errors.deadletterqueue.*: settings of the KIP-848 consumer, share and streams group
    protocols) with the broker's group defaults; odradek answers the same. An alter of a known
    key is where they part: Kafka stores it, odradek refuses it, its groups being classic ones,
    which none of these keys configure; and ``kafka-configs.sh`` on a group that does not exist,
    which Kafka's tool tells by ListConfigResources, an API odradek does not serve (the tool
    then describes the group as any other)."""
    kafka, odradek = (_group_configs(targets[name]) for name in ("kafka", "odradek"))
    (described,) = kafka["any name"]
    assert len(described["configs"]) == 21 and described["error_code"] == 0
    assert kafka["empty"][0]["error_code"] == 42
    assert kafka.pop("alter known key")[0]["error_code"] == 0
    (refused,) = odradek.pop("alter known key")
    assert refused["error_code"] == 42 and "classic" in refused["error_message"], refused
    code, lines = kafka[f"kafka-configs.sh {CLASSIC_GROUP_NAME} ('--all',)"]
    assert code == 0 and "  consumer.session.timeout.ms=45000 sensitive=false synonyms={" in (
        "\n".join(lines)
    ), lines
    absent = "kafka-configs.sh no-such-group ()"  # known by its ListConfigResources (API 74)
    assert kafka.pop(absent) == (
        0,
        ["The group 'no-such-group' doesn't exist and doesn't have dynamic config."],
    )
    assert odradek.pop(absent) == (0, ["Dynamic configs for group no-such-group are:"])
    # The tool asks ListConfigResources (not served here) whether the group exists; Kafka 4.4
    # has listed the classic group in one run and not in another (CI), so its answer for the
    # existing group is either; odradek's is the tool's answer for a group it cannot check.
    existing = f"kafka-configs.sh {CLASSIC_GROUP_NAME} ()"
    assert kafka.pop(existing) in (
        (0, [f"Dynamic configs for group {CLASSIC_GROUP_NAME} are:"]),
        (
            0,
            [f"The group '{CLASSIC_GROUP_NAME}' doesn't exist and doesn't have dynamic config."],
        ),
    )
    assert odradek.pop(existing) == (0, [f"Dynamic configs for group {CLASSIC_GROUP_NAME} are:"])
    assert odradek == kafka


def test_colliding_names_in_one_request_a_known_difference(targets: dict[str, Target]) -> None:
    """Kafka 4.4's controller checks a new name only against the topics that existed before
    the request, so one CreateTopics may create both ``x.y`` and ``x_y``: the very collision
    (of metric names) the check exists to prevent. odradek creates a request's topics one
    after the other and refuses the second, as Kafka refuses it in a later request."""
    base = f"orders-{uuid.uuid4().hex[:6]}"
    topics = [
        {"name": f"{base}.y", "num_partitions": 1, "replication_factor": 1},
        {"name": f"{base}_y", "num_partitions": 1, "replication_factor": 1},
    ]
    body = {"topics": topics, "timeout": 30_000, "validate_only": False}
    answers = {
        name: [t["error_code"] for t in kafka_call(target.bootstrap, 19, 7, body)["topics"]]
        for name, target in targets.items()
    }
    assert answers == {"kafka": [0, 0], "odradek": [0, 17]}


# --- DescribeProducers ---------------------------------------------------------------------------


def _describe_producers_case(target: Target, topic: str) -> dict[str, object]:
    """An idempotent producer's three batches on ``topic``-0, then what Kafka's
    ``kafka-transactions.sh describe-producers`` prints and DescribeProducers v0 answers, the
    producer id and timestamps (each broker's own) left out."""
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": target.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    deadline = time.monotonic() + 60
    sent = 0
    while sent < 3:
        producer.produce(topic, value=b"v%d" % sent, partition=0)
        if producer.flush(30) == 0:
            sent += 1
        assert time.monotonic() < deadline
    code, lines = kafka_tool(
        "org.apache.kafka.tools.TransactionsCommand",
        "--bootstrap-server",
        target.bootstrap,
        "describe-producers",
        "--topic",
        topic,
        "--partition",
        "0",
    )
    assert code == 0, lines
    header, *rows = [line.split() for line in lines if line.strip()]
    tool_rows = [
        {name: value for name, value in zip(header, row, strict=True)
         if name not in ("ProducerId", "LastTimestamp")}
        for row in rows
    ]  # fmt: skip
    body = {"topics": [{"name": topic, "partition_indexes": [0, 3]}]}
    response = kafka_call(target.bootstrap, 61, 0, body)
    for partition in response["topics"][0]["partitions"]:
        for state in partition["active_producers"]:
            assert state.pop("producer_id") >= 0 and state.pop("last_timestamp") > 0
    response.pop("throttle_time", None)
    return {"tool": tool_rows, "v0": response}


def test_describe_producers_answers_as_kafka_does(targets: dict[str, Target]) -> None:
    """Kafka's own tool and the raw API on both brokers: one idempotent producer, its epoch,
    last sequence, no coordinator epoch and no open transaction; a partition that does not
    exist gets its error."""
    kafka, odradek = (
        _describe_producers_case(targets[name], "described-producers")
        for name in ("kafka", "odradek")
    )
    assert len(kafka["tool"]) == 1, kafka
    assert odradek == kafka
