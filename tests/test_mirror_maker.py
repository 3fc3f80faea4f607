"""MirrorMaker 2 both ways between odradek and the reference Apache Kafka: topics, records,
topic configs and consumer-group offsets replicate from odradek to Kafka and from Kafka to
odradek, and a consumer group moved to the other side resumes where it left off, skipping no
record (a few may be read twice: translated offsets never run ahead of the committed ones).

One MirrorMaker 2 (the dedicated driver, ``connect-mirror-maker``'s class) runs both flows with
the IdentityReplicationPolicy, as a migration does: topics keep their names, so consumers move
without changing what they subscribe to. Each flow names its own topics and groups (an identity
flow both ways over the same topic would copy it back and forth for ever)."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka.admin
import pytest

from tests.connect_helpers import (
    MIRROR_MAKER_MAIN,
    JavaProcess,
    committed,
    connect_classpath,
    consume_group,
    end_offsets,
    produce,
    read_partitions,
    topic_configs,
    wait_for,
    write_properties,
)
from tests.kafka_helpers import create_topic
from tests.kafka_reference import ReferenceBroker
from tests.serve_process import ServeProcess

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

PARTITIONS = 2


def mirror_maker_properties(odradek: str, kafka: str) -> dict[str, str]:
    """Both flows, every interval a second (the defaults are minutes), replication factor 1."""
    return {
        "clusters": "odradek, kafka",
        "odradek.bootstrap.servers": odradek,
        "kafka.bootstrap.servers": kafka,
        "odradek->kafka.enabled": "true",
        "odradek->kafka.topics": "orders",
        "odradek->kafka.groups": "billing",
        "kafka->odradek.enabled": "true",
        "kafka->odradek.topics": "events",
        "kafka->odradek.groups": "audit",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.enabled": "false",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "sync.topic.configs.interval.seconds": "1",
        "sync.topic.acls.enabled": "false",
        "offset.lag.max": "0",
        "tasks.max": "1",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        # Offset syncs wait for the source task's offset commits: each second, not each minute.
        "odradek.offset.flush.interval.ms": "1000",
        "kafka.offset.flush.interval.ms": "1000",
    }


def values(first: int, count: int, tag: str) -> list[bytes]:
    return [f"{tag}-{number:05d}".encode() for number in range(first, first + count)]


def move_group(source: str, target: str, group: str, topic: str) -> list[tuple[int, int, bytes]]:
    """``group`` read some records of ``topic`` on ``source`` and committed; on ``target`` it
    reads from its translated offsets to the end: what it read there, (partition, offset,
    value) of each."""
    source_offsets = committed(source, group, topic, PARTITIONS)
    translated = wait_for(
        f"{group}'s offsets translated onto the target",
        lambda: (
            (offsets := committed(target, group, topic, PARTITIONS))
            and min(offsets) >= 0
            and offsets
        ),
        60,
    )
    # Never ahead of where the group was on the source: that would skip records.
    assert all(0 <= t <= s for t, s in zip(translated, source_offsets, strict=True)), (
        translated,
        source_offsets,
    )
    ends = end_offsets(target, topic, PARTITIONS)
    remaining = sum(ends) - sum(translated)
    after = consume_group(target, group, topic, remaining)
    assert len(after) == remaining
    return after


def test_mirror_maker_replicates_both_ways_and_moves_groups(tmp_path: Path) -> None:
    classpath = connect_classpath()
    kafka = ReferenceBroker.start(tmp_path / "kafka")
    odradek = ServeProcess(tmp_path / "odradek")
    mirror_maker = None
    try:
        create_topic(odradek.bootstrap, "orders", PARTITIONS, **{"retention.ms": "604800001"})
        create_topic(kafka.bootstrap, "events", PARTITIONS, **{"retention.ms": "604800002"})
        orders, events = values(0, 400, "order"), values(0, 300, "event")
        produce(odradek.bootstrap, "orders", orders, PARTITIONS)
        produce(kafka.bootstrap, "events", events, PARTITIONS)

        config = write_properties(
            tmp_path / "mm2.properties", mirror_maker_properties(odradek.bootstrap, kafka.bootstrap)
        )
        mirror_maker = JavaProcess(
            classpath, MIRROR_MAKER_MAIN, [str(config)], tmp_path / "mm2", "mm2", "384m"
        )
        wait_replicated(kafka.bootstrap, "orders", len(orders), mirror_maker)
        wait_replicated(odradek.bootstrap, "events", len(events), mirror_maker)
        # The groups' consumers run on their own cluster while the mirror runs, as in a
        # migration: they read what there is and commit.
        billed = consume_group(odradek.bootstrap, "billing", "orders", len(orders))
        audited = consume_group(kafka.bootstrap, "audit", "events", len(events))
        assert (len(billed), len(audited)) == (len(orders), len(events))
        # Online: records sent meanwhile follow; the groups will read them on the other side.
        more_orders, more_events = values(400, 100, "order"), values(300, 100, "event")
        produce(odradek.bootstrap, "orders", more_orders, PARTITIONS)
        produce(kafka.bootstrap, "events", more_events, PARTITIONS)
        orders, events = orders + more_orders, events + more_events
        wait_replicated(kafka.bootstrap, "orders", len(orders), mirror_maker)
        wait_replicated(odradek.bootstrap, "events", len(events), mirror_maker)

        # Records, partition by partition and in order, keys and values as sent.
        assert read_partitions(kafka.bootstrap, "orders", PARTITIONS) == read_partitions(
            odradek.bootstrap, "orders", PARTITIONS
        )
        assert read_partitions(odradek.bootstrap, "events", PARTITIONS) == read_partitions(
            kafka.bootstrap, "events", PARTITIONS
        )
        # Topic configs.
        assert topic_configs(kafka.bootstrap, "orders")["orders"]["retention.ms"] == "604800001"
        assert topic_configs(odradek.bootstrap, "events")["events"]["retention.ms"] == "604800002"

        # The groups move (their offsets are copied only while nobody is in them on the target).
        billed_after = move_group(odradek.bootstrap, kafka.bootstrap, "billing", "orders")
        audited_after = move_group(kafka.bootstrap, odradek.bootstrap, "audit", "events")
    finally:
        if mirror_maker is not None:
            mirror_maker.stop()
        odradek.stop()
        kafka.stop()

    for name, sent, before, after in (
        ("billing", orders, billed, billed_after),
        ("audit", events, audited, audited_after),
    ):
        read = [value for _, _, value in before + after]
        assert set(read) == set(sent), f"{name}: records skipped in the move"
        print(f"{name}: {len(sent)} records, read {len(read)} ({len(read) - len(sent)} twice)")


def wait_replicated(bootstrap: str, topic: str, count: int, mirror_maker: JavaProcess) -> None:
    def replicated() -> bool:
        if mirror_maker.process.poll() is not None:
            raise AssertionError(f"MirrorMaker 2 exited:\n{mirror_maker.log_tail()}")
        try:
            return sum(end_offsets(bootstrap, topic, PARTITIONS)) >= count
        except confluent_kafka.KafkaException:
            return False

    wait_for(f"{count} records of {topic} replicated to {bootstrap}", replicated, 120)
