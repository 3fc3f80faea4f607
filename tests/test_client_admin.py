"""AsyncAdmin and Admin against the fake broker."""

from __future__ import annotations

import pytest
from fake_broker import FakeBroker, async_test, broker_in_thread, fill

from odradek.client.admin import Admin, AsyncAdmin, NewTopic
from odradek.client.offset_lookup import OffsetAndTimestamp
from odradek.errors import (
    InvalidPartitionsError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.configs import ConfigEntry, ConfigSource
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.values.delete_records import HIGH_WATERMARK_OFFSET
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.topic_partition import TopicPartition


@async_test
async def test_create_list_and_delete_topics() -> None:
    async with FakeBroker(default_partitions=2) as broker:
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            await admin.create_topics([NewTopic("a", 3, {"retention.ms": "10"}), NewTopic("b")])
            assert await admin.list_topics() == ["a", "b"]
            assert [len(broker.topics[n]) for n in ("a", "b")] == [3, 2]
            await admin.delete_topics(["a"])
            assert await admin.list_topics() == ["b"]
            request = broker.requests_of(ApiKey.CREATE_TOPICS)[0]
            assert request.topics[0].configs == {"retention.ms": "10"}


@async_test
async def test_validate_only_creates_nothing() -> None:
    async with FakeBroker() as broker:
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            await admin.create_topics([NewTopic("a", 3)], validate_only=True)
            assert await admin.list_topics() == []


@async_test
async def test_the_first_topic_error_is_raised() -> None:
    async with FakeBroker() as broker:
        broker.create("a")
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            with pytest.raises(TopicAlreadyExistsError, match="'a' already exists"):
                await admin.create_topics([NewTopic("new"), NewTopic("a"), NewTopic("z", 0)])
            assert "new" in broker.topics
            with pytest.raises(InvalidPartitionsError):
                await admin.create_topics([NewTopic("z", 0)])
            with pytest.raises(UnknownTopicOrPartitionError):
                await admin.delete_topics(["missing"])


@async_test
async def test_describe_and_alter_configs() -> None:
    async with FakeBroker() as broker:
        broker.create("a")
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            await admin.alter_configs({"a": {"retention.ms": "5", "segment.bytes": "100"}})
            await admin.alter_configs({"a": {"segment.bytes": None}})
            configs = (await admin.describe_configs(["a"]))["a"]
            assert configs["retention.ms"] == ConfigEntry(
                "retention.ms", "5", ConfigSource.DYNAMIC_TOPIC_CONFIG, False
            )
            assert "segment.bytes" not in configs
            assert configs["cleanup.policy"].is_default
            await admin.alter_configs({"a": {"retention.ms": "9"}}, validate_only=True)
            assert broker.configs["a"] == {"retention.ms": "5"}
            with pytest.raises(UnknownTopicOrPartitionError):
                await admin.describe_configs(["missing"])


@async_test
async def test_describe_topics() -> None:
    async with FakeBroker() as broker:
        fill(broker.create("a", 2)[1], 4)
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            (topic,) = await admin.describe_topics(["a"])
            assert [p.log_end_offset for p in topic.partitions] == [0, 4]
            assert topic.partitions[1].size_bytes > 0
            assert {c.name for c in topic.configs} == {"retention.ms", "cleanup.policy"}
            assert [t.name for t in await admin.describe_topics()] == ["a"]
            with pytest.raises(UnknownTopicOrPartitionError):
                await admin.describe_topics(["a", "missing"])


@async_test
async def test_delete_records_and_list_offsets() -> None:
    async with FakeBroker() as broker:
        fill(broker.create("a")[0], 10)
        tp = TopicPartition("a", 0)
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            assert await admin.delete_records({tp: 4}) == {tp: 4}
            offsets = await admin.list_offsets({tp: EARLIEST_TIMESTAMP})
            assert offsets == {tp: OffsetAndTimestamp(4, -1)}
            assert (await admin.list_offsets({tp: LATEST_TIMESTAMP}))[tp].offset == 10
            assert (await admin.list_offsets({tp: 1006}))[tp] == OffsetAndTimestamp(6, 1006)
            request = broker.requests_of(ApiKey.LIST_OFFSETS)[-1]
            assert request.isolation is IsolationLevel.HIGH_WATERMARK
            assert await admin.delete_records({tp: HIGH_WATERMARK_OFFSET}) == {tp: 10}
            with pytest.raises(UnknownTopicOrPartitionError):
                await admin.list_offsets({TopicPartition("a", 5): EARLIEST_TIMESTAMP})


@async_test
async def test_metadata_does_not_create_topics_by_default() -> None:
    async with FakeBroker() as broker:
        async with AsyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
            metadata = await admin.metadata(["x"])
            assert metadata.cluster_id == "fake-cluster"
            assert metadata.broker.port == broker.port
            assert metadata.topics[0].error == UnknownTopicOrPartitionError.code
            assert "x" not in broker.topics
            await admin.metadata(["x"], allow_auto_topic_creation=True)
            assert "x" in broker.topics


def test_sync_admin() -> None:
    with broker_in_thread() as broker, Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("a", 2)])
        assert admin.list_topics() == ["a"]
        admin.alter_configs({"a": {"retention.ms": "1"}})
        assert admin.describe_configs(["a"])["a"]["retention.ms"].value == "1"
        assert len(admin.describe_topics(["a"])[0].partitions) == 2
        tp = TopicPartition("a", 1)
        assert admin.list_offsets({tp: LATEST_TIMESTAMP}) == {tp: OffsetAndTimestamp(0, -1)}
        assert admin.delete_records({tp: 0}) == {tp: 0}
        assert admin.metadata().topics[0].name == "a"
        admin.delete_topics(["a"])
        assert admin.list_topics() == []
