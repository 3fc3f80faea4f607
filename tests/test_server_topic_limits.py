"""Topic creation limits through a real broker: partitions per CreateTopics request, topics
auto-created per Metadata request and per second, each answered with Kafka's error code and a
message naming the limit; a creation outliving the request's timeout_ms is answered
REQUEST_TIMED_OUT and completes, whole; CreatePartitions grows a topic within the same limit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from server_helpers import running_broker

from odradek.client import Admin, NewTopic
from odradek.errors import (
    InvalidPartitionsError,
    PolicyViolationError,
    RequestTimedOutError,
    ThrottlingQuotaExceededError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.topic_partition import TopicPartition


def test_a_request_for_more_partitions_than_the_limit_creates_nothing(tmp_path: Path) -> None:
    settings = {"create.topics.max.partitions.per.request": "100"}
    with running_broker(tmp_path, settings) as broker, broker.connect() as client:
        request = CreateTopicsRequest((CreatableTopic("a", 60), CreatableTopic("b", 60)))
        results = client.call(request).topics
        assert {result.error for result in results} == {PolicyViolationError.code}
        assert "create.topics.max.partitions.per.request is 100" in results[0].message
        assert "120 partitions" in results[0].message
        assert broker.broker.log_manager.topics() == []
        results = client.call(CreateTopicsRequest((CreatableTopic("a", 100),))).topics
        assert results[0].error == 0 and results[0].num_partitions == 100


def test_metadata_auto_creates_at_most_the_per_request_limit(tmp_path: Path) -> None:
    settings = {"auto.create.topics.max.per.request": "3"}
    with running_broker(tmp_path, settings) as broker, broker.connect() as client:
        names = tuple(f"auto-{n}" for n in range(5))
        response = client.call(MetadataRequest(names, allow_auto_topic_creation=True))
        errors = [topic.error for topic in response.topics]
        assert errors == [0, 0, 0] + [ThrottlingQuotaExceededError.code] * 2
        assert "auto.create.topics.max.per.request=3" in response.topics[4].message
        assert broker.broker.log_manager.topics() == ["auto-0", "auto-1", "auto-2"]
        response = client.call(MetadataRequest(names, allow_auto_topic_creation=True))
        assert [topic.error for topic in response.topics] == [0] * 5


def test_metadata_auto_creates_no_more_partitions_than_a_create_request_may(
    tmp_path: Path,
) -> None:
    settings = {"num.partitions": "40", "create.topics.max.partitions.per.request": "100"}
    with running_broker(tmp_path, settings) as broker, broker.connect() as client:
        names = ("wide-0", "wide-1", "wide-2")
        response = client.call(MetadataRequest(names, allow_auto_topic_creation=True))
        errors = [topic.error for topic in response.topics]
        assert errors == [0, 0, ThrottlingQuotaExceededError.code]
        assert "create.topics.max.partitions.per.request=100" in response.topics[2].message
        assert broker.broker.log_manager.topics() == ["wide-0", "wide-1"]


def test_metadata_auto_creates_at_most_the_per_second_limit(tmp_path: Path) -> None:
    settings = {"auto.create.topics.max.per.second": "0.1"}  # one topic, then one per 10 s
    with running_broker(tmp_path, settings) as broker, broker.connect() as client:
        first = client.call(MetadataRequest(("first",), allow_auto_topic_creation=True))
        assert first.topics[0].error == 0
        second = client.call(MetadataRequest(("second",), allow_auto_topic_creation=True))
        assert second.topics[0].error == ThrottlingQuotaExceededError.code
        assert "auto.create.topics.max.per.second=0.1" in second.topics[0].message
        assert broker.broker.log_manager.topics() == ["first"]
        explicit = client.call(CreateTopicsRequest((CreatableTopic("explicit", 1),)))
        assert explicit.topics[0].error == 0  # the limit is on auto-creation only


def test_a_creation_outliving_its_timeout_is_answered_and_completes_whole(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker, broker.connect() as client:
        request = CreateTopicsRequest(
            (CreatableTopic("slow", 2000), CreatableTopic("later", 1)), timeout_ms=200
        )
        slow, later = client.call(request).topics
        assert slow.error == RequestTimedOutError.code
        assert "timeout_ms=200" in slow.message and "all together or not at all" in slow.message
        # The deadline came before "later" started, or (on a slow machine) while it ran.
        later_goes_on = "all together or not at all" in later.message
        assert later.error == RequestTimedOutError.code
        assert later_goes_on or "nothing created" in later.message, later.message
        deadline = time.monotonic() + 60
        while True:
            metadata = client.call(MetadataRequest(("slow",), allow_auto_topic_creation=False))
            partitions = metadata.topics[0].partitions
            assert len(partitions) in (0, 2000)  # never a part of the topic
            if partitions:
                break
            assert time.monotonic() < deadline, "the creation did not complete"
            time.sleep(0.01)
        expected = ["later", "slow"] if later_goes_on else ["slow"]
        while sorted(broker.broker.log_manager.topics()) != expected:
            assert time.monotonic() < deadline, broker.broker.log_manager.topics()
            time.sleep(0.01)


def test_partitions_are_added_to_a_topic_within_the_limit(tmp_path: Path) -> None:
    settings = {"create.topics.max.partitions.per.request": "50"}
    with running_broker(tmp_path, settings) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("grown", 2, {"retention.ms": "60000"})])
            admin.create_partitions({"grown": 10}, validate_only=True)
            assert len(admin.metadata(["grown"]).topics[0].partitions) == 2
            admin.create_partitions({"grown": 10})
            (topic,) = admin.metadata(["grown"]).topics
            assert [p.partition for p in topic.partitions] == list(range(10))
            with pytest.raises(InvalidPartitionsError, match="has 10 partitions"):
                admin.create_partitions({"grown": 10})
            with pytest.raises(PolicyViolationError, match="per.request is 50"):
                admin.create_partitions({"grown": 61})
            with pytest.raises(UnknownTopicOrPartitionError):
                admin.create_partitions({"absent": 3})
        log = broker.broker.log_manager.get_log(TopicPartition("grown", 9))
        assert log.config.retention_ms == 60000
