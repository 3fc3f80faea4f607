"""Kafka's Java client (kafka-clients 4.x, tests/java/kafka-harness) against odradek's Kafka
listener: produce with every codec and acks, the stored codec checked with dump-log; consume by
manual assignment from the beginning, the end, a timestamp and an explicit offset; the Admin
client's topic, config, record and cluster calls; records written over odradek's own protocol
read by the Java consumer.

Until odradek serves the idempotent-producer and consumer-group APIs (their own issues), the
producers run with enable.idempotence=false (the Java client's default is true, which needs
InitProducerId) and the consumers are assigned their partitions (assign, no group.id).

Each harness call is one JVM (1-4 s on the shared machine), so the tests batch their work.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka_reference import JavaClient, ProducedRecord, ProducerRun, TopicSpec, harness_classpath
from server_helpers import RunningBroker, running_broker

from odradek.cli.main import cli

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]
NOT_IDEMPOTENT = {"enable.idempotence": "false"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("java-client")) as running:
        yield running


@pytest.fixture(scope="module")
def java(broker: RunningBroker) -> JavaClient:
    return JavaClient(harness_classpath(), broker.bootstrap)


def dump_codecs(directory: Path) -> list[str]:
    result = CliRunner().invoke(
        cli, ["dump-log", "--json", *sorted(map(str, directory.glob("*.log")))]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return [line["compression"] for line in lines if line.get("type") == "batch"]


def test_every_codec_and_acks_is_stored_with_the_codec_sent(
    broker: RunningBroker, java: JavaClient
) -> None:
    cases = [(codec, acks) for codec in CODECS for acks in ACKS]
    java.create_topics(*(TopicSpec(f"java-{codec}-acks-{acks}") for codec, acks in cases))
    values = [b"%s record %d " % (b"x" * 40, n) for n in range(50)]
    runs = [
        ProducerRun(
            f"java-{codec}-acks-{acks}",
            [[ProducedRecord(b"k%d" % n, value, partition=0) for n, value in enumerate(values)]],
            {**NOT_IDEMPOTENT, "acks": acks, "compression.type": codec, "linger.ms": "20"},
        )
        for codec, acks in cases
    ]

    acknowledged = java.produce(*runs)

    for (codec, acks), stored in zip(cases, acknowledged, strict=True):
        offsets = [record.offset for record in stored]
        if acks == "0":
            assert offsets == [-1] * len(values), "acks=0: the client learns no offset"
        else:
            assert offsets == list(range(len(values))), (codec, acks)
    consumed = java.consume(*(run.topic for run in runs))
    for (codec, acks), run in zip(cases, runs, strict=True):
        records = consumed[run.topic]
        assert [(r.offset, r.key, r.value) for r in records] == [
            (n, b"k%d" % n, value) for n, value in enumerate(values)
        ], (codec, acks)
        codecs = dump_codecs(broker.data_dir / f"{run.topic}-0")
        assert codecs and set(codecs) == {codec}, (codec, acks, codecs)


def test_manual_assignment_from_every_kind_of_start(java: JavaClient) -> None:
    topic = "java-starts"
    # Timestamps from 1970: time retention must not delete them while the test runs.
    java.create_topics(TopicSpec(topic, configs={"retention.ms": "-1"}))
    java.produce(
        ProducerRun(
            topic,
            [
                [
                    ProducedRecord(None, b"v%d" % n, timestamp=1_000 * n, partition=0)
                    for n in range(10)
                ]
            ],
            NOT_IDEMPOTENT,
        )
    )

    def start(*args: str) -> tuple[int, list[int]]:
        positions, records = java.consume_positions(topic, start=args)
        return positions[(topic, 0)], [record.offset for record in records[topic]]

    assert start() == (0, list(range(10)))
    assert start("--from", "7") == (7, [7, 8, 9])
    assert start("--from-timestamp", "4500") == (5, [5, 6, 7, 8, 9])
    assert start("--from-timestamp", "99000") == (10, []), "no record that late: the end"
    assert start("--from-end", "true") == (10, [])
    consumed = java.consume(topic, start=("--from-timestamp", "0"))[topic]
    assert [(r.timestamp, r.value) for r in consumed] == [
        (1_000 * n, b"v%d" % n) for n in range(10)
    ]


def test_admin_client(broker: RunningBroker, java: JavaClient) -> None:
    topic = "java-admin"
    answers = java.admin(
        ("create-topic", topic, "2", "retention.ms=3600000", "cleanup.policy=delete"),
        ("create-topic", topic, "2"),
        ("describe-topic", topic),
        ("create-partitions", topic, "3"),
        ("describe-topic", topic),
        ("create-partitions", topic, "2"),
        ("describe-configs", topic),
        ("set-configs", topic, "segment.bytes=1048576", "retention.ms=7200000"),
        ("delete-configs", topic, "cleanup.policy"),
        ("describe-configs", topic),
        ("describe-cluster",),
        ("list-topics",),
    )
    assert [answer.get("error") for answer in answers] == [
        None,
        "TopicExistsException",
        None,
        None,
        None,
        "InvalidPartitionsException",
        None,
        None,
        None,
        None,
        None,
        None,
    ], answers
    assert len(answers[2]["partitions"]) == 2
    assert answers[2]["topicId"] != "AAAAAAAAAAAAAAAAAAAAAA"
    grown = answers[4]
    assert [p["partition"] for p in grown["partitions"]] == [0, 1, 2]
    assert grown["topicId"] == answers[2]["topicId"]
    assert all(p["leader"] is not None for p in grown["partitions"])
    before, after = answers[6]["configs"], answers[9]["configs"]
    assert before["retention.ms"]["value"] == "3600000"
    assert before["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert before["segment.bytes"]["source"] in {"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"}
    assert after["retention.ms"]["value"] == "7200000"
    assert after["segment.bytes"] == {
        "value": "1048576",
        "source": "DYNAMIC_TOPIC_CONFIG",
        "readOnly": False,
        "sensitive": False,
    }
    assert after["cleanup.policy"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    assert answers[10]["nodes"] and answers[10]["nodes"][0]["port"] == broker.port
    assert answers[10]["clusterId"] not in ("", "null")
    assert topic in answers[11]["topics"]

    # A minute old: older timestamps fall out of the topic's two hours of time retention, and
    # the broker's retention check may delete them (rolling the active segment, as Kafka does)
    # between the produce and the lookups.
    base = int(time.time() * 1000) - 60_000
    java.produce(
        ProducerRun(
            topic,
            [
                [
                    ProducedRecord(None, b"v%d" % n, timestamp=base + n, partition=0)
                    for n in range(8)
                ]
            ],
            NOT_IDEMPOTENT,
        )
    )
    offsets = java.admin(
        ("list-offsets", topic, "0", "earliest"),
        ("list-offsets", topic, "0", "latest"),
        ("list-offsets", topic, "0", "max-timestamp"),
        ("list-offsets", topic, "0", str(base + 5)),
        ("list-offsets", topic, "0", str(base + 3_600_000)),
        ("delete-records", topic, "0", "3"),
        ("list-offsets", topic, "0", "earliest"),
        ("delete-records", topic, "0", "99"),
        ("delete-topic", topic),
        ("list-topics",),
        ("describe-topic", topic),
    )
    assert [(a.get("offset"), a.get("timestamp")) for a in offsets[:5]] == [
        (0, -1),
        (8, -1),
        (7, base + 7),
        (5, base + 5),
        (-1, -1),
    ], offsets
    assert offsets[5]["lowWatermark"] == 3
    assert offsets[6]["offset"] == 3
    assert offsets[7]["error"] == "OffsetOutOfRangeException", offsets[7]
    assert "error" not in offsets[8]
    assert topic not in offsets[9]["topics"]
    assert offsets[10]["error"] == "UnknownTopicOrPartitionException"


def test_what_odradek_produce_wrote_the_java_consumer_reads(
    broker: RunningBroker, java: JavaClient
) -> None:
    topic = "java-crossing"
    lines = [f"k{n}\tvalue {n}" for n in range(30)]
    result = CliRunner().invoke(
        cli,
        [
            "produce",
            topic,
            "--partition",
            "0",
            "--key-separator",
            "\t",
            "--compression",
            "lz4",
            "--bootstrap",
            broker.bootstrap,
        ],  # fmt: skip
        input="\n".join(lines) + "\n",
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        cli,
        [
            "consume",
            topic,
            "--from-beginning",
            "--max-messages",
            "30",
            "--format",
            "json",
            "--timeout-ms",
            "10000",
            "--bootstrap",
            broker.bootstrap,
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    ours = [json.loads(line) for line in result.stdout.splitlines()]

    theirs = java.consume(topic)[topic]

    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == [
        (r["offset"], r["timestamp"], r["key"].encode(), r["value"].encode(), ()) for r in ours
    ]
    assert len(theirs) == 30
