"""A transaction's offsets as Apache Kafka writes them, read back by odradek's group coordinator.

Kafka's Java producer runs four transactions with sendOffsetsToTransaction on the reference
Kafka: one commits offsets of two partitions, one aborts (its offset must never show), one
commits another group's offset, and the last is left open (the producer's JVM halts, as a
crashed producer). Kafka's OffsetFetch answers are recorded, with and without
``require_stable``; then Kafka stops and its ``__consumer_offsets`` partition (transactional
batches of the producer and the COMMIT/ABORT control batches its group coordinator wrote) is
given to odradek, which must answer the same: committed offsets visible, the aborted one
absent, the open transaction's partition UNSTABLE_OFFSET_COMMIT under require_stable.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from group_helpers import group_broker
from kafka_helpers import HasBootstrap
from kafka_reference import (
    JavaClient,
    ProducedRecord,
    ProducerRun,
    ReferenceBroker,
    TopicSpec,
    harness_classpath,
)
from test_group_transactional_offsets import UNSTABLE_OFFSET_COMMIT, offset_fetch

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow, pytest.mark.timeout(600)]

SOURCE, SINK = "txn-source", "txn-sink"
WANTED = {SOURCE: [0, 1]}
GROUPS = ("txn-group", "txn-other-group")
OFFSETS_DIR = "__consumer_offsets-0"  # the reference broker has one offsets partition


def _answers(target: str | HasBootstrap) -> dict[tuple[str, bool], dict]:
    return {
        (group, stable): offset_fetch(target, group, WANTED, stable)
        for group in GROUPS
        for stable in (False, True)
    }


def test_odradek_reads_kafka_s_transactional_offsets_as_kafka_serves_them(
    tmp_path: Path,
) -> None:
    kafka = ReferenceBroker.start(tmp_path / "kafka")
    try:
        client = JavaClient(harness_classpath(), kafka.bootstrap)
        client.create_topics(TopicSpec(SOURCE, 2), TopicSpec(SINK, 1))
        record = ProducedRecord(b"k", b"v")
        client.produce(
            ProducerRun(
                SINK,
                [[record], [record], [record], [record]],
                {"transactional.id": "txn-offsets", "transaction.timeout.ms": "600000"},
                ("commit", "abort", "commit", "halt"),
                (
                    (GROUPS[0], {(SOURCE, 0): 5, (SOURCE, 1): 6}),
                    (GROUPS[0], {(SOURCE, 1): 8}),
                    (GROUPS[1], {(SOURCE, 0): 3}),
                    (GROUPS[0], {(SOURCE, 0): 11}),
                ),
            )
        )
        on_kafka = _answers(kafka.bootstrap)
    finally:
        kafka.stop()
    # What Kafka answered, spelled out: the commit shows, the abort never does, the open
    # transaction's partition is unstable.
    assert on_kafka[(GROUPS[0], False)] == {(SOURCE, 0): (5, 0), (SOURCE, 1): (6, 0)}
    assert on_kafka[(GROUPS[0], True)] == {
        (SOURCE, 0): (-1, UNSTABLE_OFFSET_COMMIT),
        (SOURCE, 1): (6, 0),
    }
    assert on_kafka[(GROUPS[1], True)] == {(SOURCE, 0): (3, 0), (SOURCE, 1): (-1, 0)}

    odradek = tmp_path / "odradek"
    settings = {"offsets.topic.num.partitions": "1"}
    with group_broker(odradek, settings) as broker:
        data_dir = broker.data_dir
    shutil.rmtree(data_dir / OFFSETS_DIR, ignore_errors=True)
    shutil.copytree(kafka.log_dir / OFFSETS_DIR, data_dir / OFFSETS_DIR)
    with group_broker(odradek, settings) as broker:
        assert _answers(broker) == on_kafka
