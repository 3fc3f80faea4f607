"""Metadata, topics, configs, offsets and record deletion through a real broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from server_helpers import RunningBroker, batch, running_broker

from odradek.client import Admin, NewTopic
from odradek.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.configs import ConfigSource
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.topic_partition import TopicPartition


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    with running_broker(tmp_path_factory.mktemp("admin"), {"num.partitions": "2"}) as running:
        yield running


@pytest.fixture
def admin(broker: RunningBroker) -> Admin:
    with Admin(bootstrap_servers=broker.bootstrap) as client:
        yield client


def produce(broker: RunningBroker, topic: str, records: bytes, partition: int = 0) -> int:
    with broker.connect() as client:
        request = ProduceRequest((ProducePartitionData(topic, partition, records),), Acks.LEADER)
        response = client.call(request).partitions[0]
        assert response.error == 0, response
        return response.base_offset


def test_create_describe_and_delete_a_topic(broker: RunningBroker, admin: Admin) -> None:
    admin.create_topics([NewTopic("lifecycle", 3, {"retention.ms": "60000"})])
    metadata = admin.metadata(["lifecycle"])
    assert metadata.broker.port == broker.port and metadata.cluster_id
    assert [p.leader for p in metadata.topics[0].partitions] == [0, 0, 0]
    (description,) = admin.describe_topics(["lifecycle"])
    assert [p.partition for p in description.partitions] == [0, 1, 2]
    assert all(Path(p.log_dir) == broker.data_dir for p in description.partitions)
    configs = {c.name: c for c in description.configs}
    assert configs["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("lifecycle", 1)])
    admin.delete_topics(["lifecycle"])
    assert "lifecycle" not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["lifecycle"])


def test_recreated_topic_starts_empty(broker: RunningBroker, admin: Admin) -> None:
    admin.create_topics([NewTopic("again", 1)])
    produce(broker, "again", batch(5))
    admin.delete_topics(["again"])
    admin.create_topics([NewTopic("again", 1)])
    assert produce(broker, "again", batch(1)) == 0


def test_validate_only_creates_nothing(admin: Admin) -> None:
    admin.create_topics([NewTopic("dry-run", 2)], validate_only=True)
    assert "dry-run" not in admin.list_topics()
    with pytest.raises(InvalidPartitionsError):
        admin.create_topics([NewTopic("dry-run", 0)], validate_only=True)
    with pytest.raises(InvalidConfigError):
        admin.create_topics([NewTopic("dry-run", 1, {"retention.ms": "soon"})], validate_only=True)


def test_metadata_auto_creates_with_num_partitions_only_when_allowed(admin: Admin) -> None:
    response = admin.metadata(["auto"], allow_auto_topic_creation=False)
    assert response.topics[0].error == UnknownTopicOrPartitionError.code
    response = admin.metadata(["auto"], allow_auto_topic_creation=True)
    assert response.topics[0].error == 0 and len(response.topics[0].partitions) == 2


def test_alter_configs_is_incremental(admin: Admin) -> None:
    admin.create_topics([NewTopic("tuned", 1, {"retention.ms": "60000", "segment.ms": "70000"})])
    admin.alter_configs({"tuned": {"retention.ms": None, "cleanup.policy": "compact"}})
    configs = admin.describe_configs(["tuned"])["tuned"]
    assert configs["retention.ms"].source is not ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert (configs["segment.ms"].value, configs["cleanup.policy"].value) == ("70000", "compact")
    with pytest.raises(InvalidConfigError):
        admin.alter_configs({"tuned": {"segment.ms": "-5"}})
    admin.alter_configs({"tuned": {"segment.ms": "80000"}}, validate_only=True)
    assert admin.describe_configs(["tuned"])["tuned"]["segment.ms"].value == "70000"
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.alter_configs({"missing": {"segment.ms": "80000"}})


def test_list_offsets_and_delete_records(broker: RunningBroker, admin: Admin) -> None:
    admin.create_topics([NewTopic("offsets", 1)])
    tp = TopicPartition("offsets", 0)
    produce(broker, "offsets", batch(3))
    time.sleep(0.01)
    boundary = int(time.time() * 1000)
    produce(broker, "offsets", batch(2))
    found = admin.list_offsets({tp: EARLIEST_TIMESTAMP})[tp]
    assert found.offset == 0
    assert admin.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset == 5
    assert admin.list_offsets({tp: boundary})[tp].offset == 3
    assert admin.list_offsets({tp: boundary + 60_000})[tp].offset == -1
    assert admin.delete_records({tp: 2}) == {tp: 2}
    assert admin.list_offsets({tp: EARLIEST_TIMESTAMP})[tp].offset == 2
    with pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({tp: 9})
    assert admin.delete_records({tp: -1}) == {tp: 5}


def test_delete_records_on_a_compacted_topic_is_a_policy_violation(
    broker: RunningBroker, admin: Admin
) -> None:
    """As on Kafka, a topic whose cleanup.policy lacks delete refuses DeleteRecords with
    POLICY_VIOLATION, whatever the offset (found by tests/test_kafka_reference_model.py,
    seeds 109, 117, 120, 123)."""
    admin.create_topics([NewTopic("compacted", 1, {"cleanup.policy": "compact"})])
    tp = TopicPartition("compacted", 0)
    produce(broker, "compacted", batch(3))
    for offset in (1, 9, -1):
        with pytest.raises(PolicyViolationError, match="cleanup.policy"):
            admin.delete_records({tp: offset})
    assert admin.list_offsets({tp: EARLIEST_TIMESTAMP})[tp].offset == 0
    admin.alter_configs({"compacted": {"cleanup.policy": "compact,delete"}})
    assert admin.delete_records({tp: 1}) == {tp: 1}


def test_topic_deletion_and_auto_creation_can_be_disabled(tmp_path: Path) -> None:
    settings = {"delete.topic.enable": "false", "auto.create.topics.enable": "false"}
    with running_broker(tmp_path, settings) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("kept", 1)])
            with pytest.raises(PolicyViolationError, match="delete.topic.enable"):
                admin.delete_topics(["kept"])
            response = admin.metadata(["other"], allow_auto_topic_creation=True)
            assert response.topics[0].error == UnknownTopicOrPartitionError.code
            assert "auto.create.topics.enable" in response.topics[0].message
