"""Kafka's DumpLogSegments decodes odradek's ``__consumer_offsets``.

A group of two librdkafka members commits offsets with and without metadata, a consumer
outside group management commits under another group (generation -1) and that group is
deleted (tombstones). Once the broker stopped, Kafka's own DumpLogSegments with
``--offsets-decoder`` reads every segment of the topic: each record decodes with no error, as
the same key and value odradek's own reader finds in the bytes (offset commits with topic,
partition, offset, leader epoch, metadata and timestamp; group metadata with its generation,
protocol, leader and members, their subscriptions and assignments), and the latest commit of
every partition is what the group committed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import confluent_kafka
import pytest
from kafka_helpers import create_topic
from kafka_reference import kafka_classpath, run_java
from server_helpers import running_broker

from odradek.protocol.consumer_protocol import parse_assignment, parse_subscription
from odradek.record.memory_records import MemoryRecords
from odradek.server.group.coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    parse_key,
)

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow, pytest.mark.timeout(300)]

TOPIC, GROUP, SIMPLE_GROUP, PARTITIONS = "decoded", "decoded-group", "decoded-simple", 4
SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "2",
}
_RECORD = re.compile(r"^\| offset: (\d+) .* key: (.*) payload: (.*)$")


def _consume_all(members: list[confluent_kafka.Consumer], expected: int) -> int:
    """Poll the members in turn until they consumed ``expected`` records between them."""
    seen = 0
    for _ in range(600):
        for member in members:
            seen += sum(1 for m in member.consume(50, 0.05) if not m.error())
        if seen >= expected and all(member.assignment() for member in members):
            return seen
    raise AssertionError(f"{seen} of {expected} records consumed")


def _write_group_records(bootstrap: str) -> dict[tuple[str, str, int], tuple[int, str]]:
    """Commits from a two-member group and from a consumer outside group management; the
    latest (offset, metadata) per (group, topic, partition) the broker confirmed."""
    create_topic(bootstrap, TOPIC, PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for index in range(40):
        producer.produce(TOPIC, b"v%d" % index, partition=index % PARTITIONS)
    assert producer.flush(30) == 0
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": GROUP,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
    }
    members = [confluent_kafka.Consumer({**settings, "client.id": f"m{n}"}) for n in (1, 2)]
    for member in members:
        member.subscribe([TOPIC])
    _consume_all(members, 40)
    for round_number in range(3):  # several commits per partition: compaction's future input
        for member in members:
            offsets = [
                confluent_kafka.TopicPartition(
                    TOPIC, tp.partition, 2 + round_number * 3 + tp.partition, f"r{round_number}"
                )
                for tp in member.assignment()
            ]
            member.commit(offsets=offsets, asynchronous=False)
    expected = {}
    for member in members:
        found = member.committed(member.assignment(), timeout=10)
        for tp in found:
            expected[(GROUP, TOPIC, tp.partition)] = (tp.offset, tp.metadata)
    for member in members:
        member.close()  # LeaveGroup: an empty generation is written too

    simple = confluent_kafka.Consumer({**settings, "group.id": SIMPLE_GROUP})
    simple.assign([confluent_kafka.TopicPartition(TOPIC, 0)])
    simple.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 7)], asynchronous=False)
    simple.close()
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups([SIMPLE_GROUP])[SIMPLE_GROUP].result(timeout=10)
    return expected


def _odradeks_reading(segment: Path) -> list[tuple[int, object, object]]:
    """(offset, key, value or None) of every record of a segment, as odradek decodes it."""
    return [
        (
            record.offset,
            parse_key(record.key),
            None if record.value is None else _value(parse_key(record.key), record.value),
        )
        for batch in MemoryRecords(segment.read_bytes()).batches()
        for record in batch.records()
    ]


def _value(key: object, value: bytes) -> object:
    if isinstance(key, OffsetCommitKey):
        return OffsetCommitValue.from_bytes(value)
    return GroupMetadataValue.from_bytes(value)


def _kafkas_reading(segments: list[Path]) -> tuple[list[tuple[int, dict, object]], str]:
    """(offset, key JSON, payload JSON or None) of every record DumpLogSegments printed."""
    done = run_java(
        kafka_classpath(),
        "org.apache.kafka.tools.DumpLogSegments",
        ["--offsets-decoder", "--files", ",".join(map(str, segments))],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rror" not in done.stderr and "xception" not in done.stderr, done.stderr
    records = []
    for line in done.stdout.splitlines():
        if not line.startswith("|"):
            assert line.startswith(("Dumping ", "Log starting offset", "baseOffset: ")), line
            assert "isvalid: true" in line or not line.startswith("baseOffset"), line
            continue
        match = _RECORD.match(line)
        assert match, f"DumpLogSegments printed a record it could not decode: {line}"
        key, payload = json.loads(match[2]), match[3]
        records.append((int(match[1]), key, None if payload == "<DELETE>" else json.loads(payload)))
    return records, done.stdout


def _assert_same_record(offset: int, key: object, value: object, theirs: tuple) -> None:
    their_offset, their_key, their_value = theirs
    assert their_offset == offset
    if isinstance(key, OffsetCommitKey):
        assert their_key == {
            "type": "1",
            "data": {"group": key.group, "topic": key.topic, "partition": key.partition},
        }
        if value is None:
            assert their_value is None
            return
        assert isinstance(value, OffsetCommitValue)
        assert their_value == {
            "version": "3",
            "data": {
                "offset": value.offset,
                "leaderEpoch": value.leader_epoch,
                "metadata": value.metadata,
                "commitTimestamp": value.commit_timestamp,
            },
        }
        return
    assert isinstance(key, GroupMetadataKey)
    assert their_key == {"type": "2", "data": {"group": key.group}}
    if value is None:
        assert their_value is None
        return
    assert isinstance(value, GroupMetadataValue)
    assert their_value["version"] == "3"
    data = their_value["data"]
    assert (
        data["protocolType"],
        data["generation"],
        data["protocol"],
        data["leader"],
        data["currentStateTimestamp"],
    ) == (
        value.protocol_type,
        value.generation,
        value.protocol,
        value.leader,
        value.current_state_timestamp,
    )
    assert len(data["members"]) == len(value.members)
    for decoded, member in zip(data["members"], value.members, strict=True):
        assert (
            decoded["memberId"],
            decoded["groupInstanceId"],
            decoded["clientId"],
            decoded["clientHost"],
            decoded["rebalanceTimeout"],
            decoded["sessionTimeout"],
        ) == (
            member.member_id,
            member.group_instance_id,
            member.client_id,
            member.client_host,
            member.rebalance_timeout,
            member.session_timeout,
        )
        assert decoded["subscription"]["topics"] == list(
            parse_subscription(member.subscription).topics
        )
        if not member.assignment:
            # Stored between a rebalance's join and its sync: no assignment to decode, and
            # Kafka's decoder prints the empty bytes as they are.
            assert not isinstance(decoded["assignment"], dict), decoded
            continue
        assigned = {
            entry["topic"]: tuple(entry["partitions"])
            for entry in decoded["assignment"]["assignedPartitions"]
        }
        assert assigned == dict(parse_assignment(member.assignment).partitions)


def test_kafkas_offsets_decoder_reads_odradeks_consumer_offsets(tmp_path: Path) -> None:
    with running_broker(tmp_path, SETTINGS) as broker:
        expected = _write_group_records(broker.bootstrap)
        data_dir = broker.data_dir
    segments = sorted(data_dir.glob("__consumer_offsets-*/*.log"))
    assert len(segments) == int(SETTINGS["offsets.topic.num.partitions"])

    ours = [record for segment in segments for record in _odradeks_reading(segment)]
    theirs, output = _kafkas_reading(segments)

    assert len(theirs) == len(ours), output
    for (offset, key, value), their_record in zip(ours, theirs, strict=True):
        _assert_same_record(offset, key, value, their_record)
    latest: dict[tuple[str, str, int], tuple[int, str] | None] = {}
    members_seen: set[str] = set()
    for _, key, value in ours:
        if isinstance(key, OffsetCommitKey):
            # confluent-kafka sends a metadata string with its C terminator; the broker
            # keeps the bytes it was sent, the client strips the terminator when reading
            latest[(key.group, key.topic, key.partition)] = (
                None if value is None else (value.offset, value.metadata.rstrip("\0"))
            )
        elif value is not None:
            members_seen |= {member.client_id for member in value.members}
    assert {k: v for k, v in latest.items() if k[0] == GROUP} == expected
    assert len(expected) == PARTITIONS
    assert latest[(SIMPLE_GROUP, TOPIC, 0)] is None, "the deleted group's offset: a tombstone"
    assert members_seen == {"m1", "m2"}
    assert any(value is None for _, key, value in ours if isinstance(key, GroupMetadataKey))
