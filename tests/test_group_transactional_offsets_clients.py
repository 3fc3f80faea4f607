"""A transaction's offsets with real transactional clients on odradek: librdkafka
(confluent-kafka's ``send_offsets_to_transaction``, transaction version 1: AddOffsetsToTxn,
then TxnOffsetCommit v3) and Kafka's Java client 4.x (transaction version 2: TxnOffsetCommit v5
adds the group's ``__consumer_offsets`` partition itself). An aborted transaction's offsets
never show; a committed one's do once its COMMIT marker is written; a consumer of the group
reads them back (librdkafka asks with ``require_stable``) and resumes there, also after a
broker restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_reference import JavaClient, ProducedRecord, ProducerRun, harness_classpath
from server_helpers import RunningBroker, running_broker
from test_group_transactional_offsets import offset_fetch

from odradek.server.kafka.groups import KafkaGroupApis

confluent_kafka = pytest.importorskip("confluent_kafka")

SETTINGS = {"transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "3"}
SOURCE, SINK = "eos-source", "eos-sink"


def _create_topics(broker: RunningBroker) -> None:
    for name in (SOURCE, SINK):
        broker.loop_thread.call(broker.broker.topic_admin.create_topic, name, 2, {})


def _committed(broker: RunningBroker, group: str) -> list[tuple[int, int]]:
    """What librdkafka's consumer finds committed for the group (read_committed: it asks
    OffsetFetch with require_stable)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        found = consumer.committed(
            [confluent_kafka.TopicPartition(SOURCE, p) for p in (0, 1)], timeout=30
        )
    finally:
        consumer.close()
    return [(tp.partition, tp.offset) for tp in found]


def test_librdkafka_sends_offsets_to_its_transactions(tmp_path: Path) -> None:
    group = "eos-librdkafka"
    with running_broker(tmp_path, SETTINGS) as broker:
        _create_topics(broker)
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "eos-librdkafka"}
        )
        producer.init_transactions(30)
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group}
        )  # not subscribed: a group outside membership (generation -1)
        metadata = consumer.consumer_group_metadata()
        for offsets, commit in (({0: 5, 1: 7}, True), ({0: 50, 1: 70}, False), ({1: 9}, True)):
            producer.begin_transaction()
            producer.produce(SINK, b"value", b"key")
            producer.send_offsets_to_transaction(
                [confluent_kafka.TopicPartition(SOURCE, p, o) for p, o in offsets.items()],
                metadata,
                30,
            )
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        producer.flush(10)
        consumer.close()
        assert _committed(broker, group) == [(0, 5), (1, 9)]
        assert offset_fetch(broker, group, {SOURCE: [0, 1]}, stable=True) == {
            (SOURCE, 0): (5, 0),
            (SOURCE, 1): (9, 0),
        }
    with running_broker(tmp_path, SETTINGS) as broker:
        assert _committed(broker, group) == [(0, 5), (1, 9)]


def test_the_java_client_commits_offsets_with_transaction_version_2(tmp_path: Path) -> None:
    group = "eos-java"
    with running_broker(tmp_path, SETTINGS) as broker:
        _create_topics(broker)
        record = ProducedRecord(b"k", b"v")
        JavaClient(harness_classpath(), broker.bootstrap).produce(
            ProducerRun(
                SINK,
                [[record], [record], [record]],
                {"transactional.id": "eos-java"},
                ("commit", "abort", "commit"),
                (
                    (group, {(SOURCE, 0): 3, (SOURCE, 1): 4}),
                    (group, {(SOURCE, 0): 30}),
                    (group, {(SOURCE, 1): 6}),
                ),
            )
        )
        assert _committed(broker, group) == [(0, 3), (1, 6)]
    with running_broker(tmp_path, SETTINGS) as broker:
        assert offset_fetch(broker, group, {SOURCE: [0, 1]}, stable=True) == {
            (SOURCE, 0): (3, 0),
            (SOURCE, 1): (6, 0),
        }


def test_the_java_client_commits_offsets_by_topic_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's Java client 4.4 names the topics of its offsets by id (TxnOffsetCommit v6)
    when its metadata has the ids of them all: here it produces to the topic whose offsets
    it commits. The offsets land on the topics the ids name."""
    group = "eos-java-ids"
    by_id: list[list[str | None]] = []
    named_topics = KafkaGroupApis._named_topics

    async def recording(self: KafkaGroupApis, topics: list[dict]) -> list[dict]:
        named = await named_topics(self, topics)
        by_id.append([t["name"] for t in named])
        return named

    monkeypatch.setattr(KafkaGroupApis, "_named_topics", recording)
    with running_broker(tmp_path, SETTINGS) as broker:
        _create_topics(broker)
        record = ProducedRecord(b"k", b"v")
        JavaClient(harness_classpath(), broker.bootstrap).produce(
            ProducerRun(
                SOURCE,
                [[record], [record], [record]],
                {"transactional.id": "eos-java-ids"},
                ("commit", "abort", "commit"),
                (
                    (group, {(SOURCE, 0): 3, (SOURCE, 1): 4}),
                    (group, {(SOURCE, 0): 30}),
                    (group, {(SOURCE, 1): 6}),
                ),
            )
        )
        # Every TxnOffsetCommit was v6 (one may be retried: CONCURRENT_TRANSACTIONS while the
        # transaction before it ends).
        assert len(by_id) >= 3 and all(names == [SOURCE] for names in by_id), by_id
        assert _committed(broker, group) == [(0, 3), (1, 6)]
