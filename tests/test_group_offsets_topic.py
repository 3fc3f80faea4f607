"""__consumer_offsets: Kafka's record layouts, compaction by odradek's cleaner, expiry, group
deletion, and state rebuilt at start-up."""

from __future__ import annotations

import struct
from pathlib import Path

from click.testing import CliRunner
from group_helpers import commit, create_topic, fetch, group_broker, join, sync
from log_manager_helpers import wait_until
from server_helpers import RunningBroker, batch, read_partition

from odradek.cli.main import cli
from odradek.clock import MockClock
from odradek.errors import InvalidTopicError
from odradek.protocol.delete_groups import DeleteGroupsRequest
from odradek.protocol.list_groups import ListGroupsRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import DeleteTopicsRequest
from odradek.protocol.values.produce import ProducePartitionData
from odradek.record.memory_records import MemoryRecords
from odradek.server.coordinator_topic import partition_for
from odradek.server.group.coordinator_records import (
    GroupMetadataValue,
    OffsetCommitValue,
    parse_key,
)
from odradek.topic_partition import TopicPartition

OFFSETS = "__consumer_offsets"


def kafka_string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_a_commit_is_stored_in_kafkas_offset_commit_layout(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        assert commit(client, "g", {("t", 0): 42}) == {("t", 0): 0}
        records = read_partition(client, OFFSETS, partition_for("g", 3))
    (value,) = records.values()
    # OffsetCommitValue v3: version, offset, leader epoch, metadata, commit timestamp
    version, offset, epoch, metadata_length = struct.unpack(">hqih", value[:16])
    assert (version, offset, epoch, metadata_length) == (3, 42, -1, 0)
    assert len(value) == 16 + 8
    decoded = OffsetCommitValue.from_bytes(value)
    assert decoded.offset == 42


def test_the_group_partition_is_kafkas_hash_of_the_group_id() -> None:
    # as computed by Java 17: (s.hashCode() & 0x7fffffff) % 50; "my-group" hashes negative
    assert partition_for("my-group", 50) == 36
    assert partition_for("console-consumer-1", 50) == 24
    assert partition_for("grüße-✓", 50) == 39
    assert partition_for("", 50) == 0


def test_clients_may_read_the_offsets_topic_but_not_produce_to_it(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        commit(client, "g", {("t", 0): 1})
        response = client.call(ProduceRequest((ProducePartitionData(OFFSETS, 0, batch()),)))
        assert response.partitions[0].error == InvalidTopicError.code
        assert "internal topic" in response.partitions[0].message


def test_state_is_rebuilt_from_the_topic_at_start_up(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 3)
        for offset in range(5):
            commit(client, "g", {("t", 0): offset, ("t", 1): offset * 2})
        commit(client, "h", {("t", 2): 9})
    with group_broker(tmp_path) as broker, broker.connect() as client:
        assert fetch(client, "g") == {("t", 0): 4, ("t", 1): 8}
        assert fetch(client, "h") == {("t", 2): 9}
        groups = client.call(ListGroupsRequest()).groups
        assert {g.group_id for g in groups} == {"g", "h"}
        assert broker.metrics()["odradek_startup_group_offsets"] == 3


def test_the_cleaner_keeps_the_latest_commit_of_every_key(tmp_path: Path) -> None:
    settings = {
        "offsets.topic.segment.bytes": str(1024 * 1024),  # segment.bytes' floor
        "log.cleaner.backoff.ms": "50",
        "log.cleaner.min.cleanable.ratio": "0.01",
    }
    metadata = "m" * 3500  # commits of ~7 KB, so 300 of them fill two segments
    with group_broker(tmp_path, settings) as broker, broker.connect() as client:
        create_topic(client, "t", 2)
        for offset in range(300):
            commit(client, "g", {("t", 0): offset, ("t", 1): 1000 + offset}, metadata=metadata)
        tp = TopicPartition(OFFSETS, partition_for("g", 3))
        log = broker.broker.log_manager.get_log(tp)
        assert log.log_end_offset == 600  # 300 commits of two partitions, in several segments
        assert log.number_of_segments >= 3
        active_base = log.active_segment.base_offset
        cleaned = broker.broker.log_cleaner.await_cleaned(tp, active_base, timeout_s=90)
        assert cleaned, f"{tp} not cleaned up to {active_base}"
        keys = [parse_key(key) for key in _keys(broker, tp)]
    assert 0 < len(keys) == len(set(keys)) <= 2, keys  # one record per key below the active one
    with group_broker(tmp_path, settings) as broker, broker.connect() as client:
        assert fetch(client, "g") == {("t", 0): 299, ("t", 1): 1299}


def _keys(broker: RunningBroker, tp: TopicPartition) -> list[bytes]:
    """The keys of the records of ``tp`` below its active segment."""
    log = broker.broker.log_manager.get_log(tp)
    keys = []
    for segment in log.segments.values():
        if segment.base_offset == log.active_segment.base_offset:
            break
        data = segment.log.read(0, segment.size)
        keys += [record.key for record in MemoryRecords(data).records()]
    return keys


def test_offsets_of_an_empty_group_expire_with_tombstones(tmp_path: Path) -> None:
    clock = MockClock()
    settings = {"offsets.retention.minutes": "1"}
    with group_broker(tmp_path, settings, clock) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        commit(client, "old", {("t", 0): 5})
        clock.sleep(30_000)
        commit(client, "new", {("t", 0): 6})
        clock.sleep(31_000)
        coordinator = broker.broker.group_coordinator
        expired = broker.loop_thread.run(coordinator.expire_offsets())
        assert expired == 1
        assert fetch(client, "old") == {}
        assert fetch(client, "new") == {("t", 0): 6}
        values = read_partition(client, OFFSETS, partition_for("old", 3)).values()
        assert None in values  # the offset's tombstone, and the group's
    with group_broker(tmp_path, settings, clock) as broker, broker.connect() as client:
        assert fetch(client, "old") == {}
        assert fetch(client, "new") == {("t", 0): 6}
        assert [g.group_id for g in client.call(ListGroupsRequest()).groups] == ["new"]


def test_deleting_a_group_writes_tombstones_that_outlive_a_restart(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        commit(client, "g", {("t", 0): 5})
        results = client.call(DeleteGroupsRequest(("g", "missing"))).results
        assert [(r.group_id, r.error) for r in results] == [("g", 0), ("missing", 69)]
        assert fetch(client, "g") == {}
    with group_broker(tmp_path) as broker, broker.connect() as client:
        assert fetch(client, "g") == {}
        assert client.call(ListGroupsRequest()).groups == ()


def test_group_metadata_is_stored_in_kafkas_layout(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        joined = join(client, "g")
        sync(client, "g", joined, {joined.member_id: b"mine"})
        records = read_partition(client, OFFSETS, partition_for("g", 3))
    (value,) = records.values()
    decoded = GroupMetadataValue.from_bytes(value)
    assert value[:2] == b"\x00\x03"
    assert value[2:].startswith(kafka_string("consumer") + struct.pack(">i", 1))
    assert decoded.leader == joined.member_id
    assert decoded.protocol == "range"
    assert decoded.members[0].assignment == b"mine"
    assert decoded.members[0].session_timeout == 10000


def test_dump_log_decodes_the_offsets_topic(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        commit(client, "g", {("t", 0): 42})
        joined = join(client, "g2")
        sync(client, "g2", joined, {joined.member_id: b"x"})
        directories = sorted((tmp_path / "data").glob("__consumer_offsets-*"))
        segments = [str(path) for d in directories for path in d.glob("*.log")]
    result = CliRunner().invoke(cli, ["dump-log", "--offsets-decoder", *segments])
    assert result.exit_code == 0, result.output
    assert "key: offset_commit::group=g,topic=t,partition=0 value: offset=42,leaderEpoch=-1," in (
        result.output
    )
    assert "key: group_metadata::group=g2 value: protocolType=consumer,generation=1," in (
        result.output
    )
    assert f"leader={joined.member_id}" in result.output


def test_deleting_a_topic_drops_the_offsets_committed_on_it(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        create_topic(client, "u", 1)
        commit(client, "g", {("t", 0): 5, ("u", 0): 6})
        assert client.call(DeleteTopicsRequest(("t",))).topics[0].error == 0
        wait_until(lambda: fetch(client, "g") == {("u", 0): 6})  # dropped in the background
    with group_broker(tmp_path) as broker, broker.connect() as client:
        assert fetch(client, "g") == {("u", 0): 6}
