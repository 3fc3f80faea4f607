"""LogManager: log directories, placement and the topic lifecycle."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from log_helpers import append, batch, read_all
from log_manager_helpers import broker_config, running, topic_admin, wait_until

from odradek.config.config_source import ConfigSource
from odradek.errors import (
    InconsistentClusterIdError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogDirLockedError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.storage.log_dir_lock import LOCK_FILE_NAME
from odradek.storage.log_manager import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    LogManager,
)
from odradek.storage.meta_properties import MetaProperties
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.topic_partition import TopicPartition

# --- log directories --------------------------------------------------------------------------


def test_startup_creates_each_dir_with_identity_and_lock(tmp_path):
    config = broker_config(tmp_path, broker_id=7)
    with running(config) as manager:
        for log_dir in manager.log_dirs:
            assert (log_dir / LOCK_FILE_NAME).exists()
            assert MetaProperties.read(log_dir) == manager.meta_properties
        assert manager.meta_properties.broker_id == 7


def test_second_broker_on_the_same_dirs_fails_fast_and_locks_are_released_after(tmp_path):
    config = broker_config(tmp_path)
    with running(config):
        with pytest.raises(LogDirLockedError, match=f"pid {os.getpid()}"):
            LogManager(config).startup()
    with running(config) as manager:
        assert manager.offline_log_dirs == frozenset()


def test_cluster_id_is_kept_across_restarts(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        cluster_id = manager.meta_properties.cluster_id
    with running(config) as manager:
        assert manager.meta_properties.cluster_id == cluster_id


def test_dirs_of_another_broker_are_refused_and_left_unlocked(tmp_path):
    with running(broker_config(tmp_path, broker_id=1)):
        pass
    with pytest.raises(InconsistentClusterIdError, match="broker.id=1, but .* broker.id=2"):
        LogManager(broker_config(tmp_path, broker_id=2)).startup()
    with pytest.raises(InconsistentClusterIdError, match="cluster.id=other"):
        LogManager(broker_config(tmp_path, broker_id=1, cluster_id="other")).startup()
    with running(broker_config(tmp_path, broker_id=1)):
        pass


def test_a_dir_listed_twice_is_a_config_error(tmp_path):
    config = replace(broker_config(tmp_path, 1), log_dirs=(str(tmp_path), f"{tmp_path}/."))
    with pytest.raises(InvalidConfigError, match="more than once"):
        LogManager(config)


# --- creating topics --------------------------------------------------------------------------


def test_new_partitions_go_to_the_dir_with_the_fewest(tmp_path):
    with running(broker_config(tmp_path, dirs=3)) as manager:
        topic_admin(manager).create_topic("one", 1)
        topic_admin(manager).create_topic("orders", 5)
        dirs = [manager.get_log(tp).dir.parent.name for tp in manager.partitions("orders")]
        assert dirs == ["d1", "d2", "d0", "d1", "d2"]
        assert (tmp_path / "d1" / "orders-0").is_dir()


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../escape", "a\\b", "é", "x" * 250])
def test_illegal_topic_names_are_refused_and_create_nothing(tmp_path, name):
    with running(broker_config(tmp_path, dirs=1)) as manager:
        with pytest.raises(InvalidTopicError):
            topic_admin(manager).create_topic(name, 1)
        assert manager.topics() == []
        assert not [p for p in tmp_path.rglob("*") if p.is_dir() and p.name != "d0"]


def test_partition_count_below_one_is_refused(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        with pytest.raises(InvalidPartitionsError, match="at least one partition"):
            topic_admin(manager).create_topic("orders", 0)
        assert manager.topics() == []


@pytest.mark.parametrize(
    "overrides", [{"no.such.key": "1"}, {"retention.ms": "soon"}, {"cleanup.policy": "shred"}]
)
def test_invalid_overrides_are_refused_and_create_nothing(tmp_path, overrides):
    with running(broker_config(tmp_path)) as manager:
        with pytest.raises(InvalidConfigError):
            topic_admin(manager).create_topic("orders", 1, overrides)
        assert manager.topics() == [] and topic_admin(manager).topic_overrides("orders") == {}


def test_creating_an_existing_topic_fails(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2)
        with pytest.raises(TopicAlreadyExistsError):
            topic_admin(manager).create_topic("orders", 3)
        assert len(manager.partitions("orders")) == 2


def test_get_or_create_topic_creates_with_num_partitions_once(tmp_path):
    with running(broker_config(tmp_path, num_partitions=3)) as manager:
        created = topic_admin(manager).get_or_create_topic("orders")
        assert created == [TopicPartition("orders", p) for p in range(3)]
        assert topic_admin(manager).get_or_create_topic("orders") == created


def test_get_or_create_topic_without_auto_create_fails(tmp_path):
    with running(broker_config(tmp_path, auto_create_topics_enable=False)) as manager:
        with pytest.raises(UnknownTopicOrPartitionError, match="auto.create.topics.enable"):
            topic_admin(manager).get_or_create_topic("orders")
        assert manager.topics() == []


def test_unknown_partition_is_reported(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 1)
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.get_log(TopicPartition("orders", 1))


def test_topics_are_listed(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("b", 2)
        topic_admin(manager).create_topic("a", 1)
        assert manager.topics() == ["a", "b"]


# --- configs ----------------------------------------------------------------------------------


def test_overrides_apply_to_the_logs_and_survive_a_restart(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic(
            "orders", 2, {"retention.ms": "60000", "segment.bytes": "2048"}
        )
    with running(config) as manager:
        overrides = topic_admin(manager).topic_overrides("orders")
        assert overrides == {"retention.ms": "60000", "segment.bytes": "2048"}
        for tp in manager.partitions("orders"):
            assert manager.get_log(tp).config.retention_ms == 60000
            assert manager.get_log(tp).config.segment_bytes == 2048


def test_alter_config_applies_to_live_logs_and_persists(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 2, {"retention.ms": "60000"})
        topic_admin(manager).alter_topic_config("orders", {"cleanup.policy": "compact"})
        for tp in manager.partitions("orders"):
            log_config = manager.get_log(tp).config
            assert log_config.compact
            assert log_config.retention_ms == config.log_config().retention_ms
    with running(config) as manager:
        assert topic_admin(manager).topic_overrides("orders") == {"cleanup.policy": "compact"}
        assert manager.get_log(TopicPartition("orders", 1)).config.compact


def test_invalid_alter_changes_nothing(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 1, {"retention.ms": "60000"})
        with pytest.raises(InvalidConfigError):
            topic_admin(manager).alter_topic_config("orders", {"retention.ms": "-5"})
        with pytest.raises(UnknownTopicOrPartitionError):
            topic_admin(manager).alter_topic_config("other", {"retention.ms": "1"})
        assert topic_admin(manager).topic_overrides("orders") == {"retention.ms": "60000"}
        assert manager.get_log(TopicPartition("orders", 0)).config.retention_ms == 60000


def test_describe_config_reports_sources(tmp_path):
    config = replace(
        broker_config(tmp_path, log_retention_bytes=1 << 30),
        static_keys=frozenset({"log.retention.bytes"}),
    )
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1, {"retention.ms": "60000"})
        entries = {
            entry.name: entry for entry in topic_admin(manager).describe_topic_config("orders")
        }
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "60000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert entries["retention.bytes"].value == str(1 << 30)
    assert entries["retention.bytes"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert entries["segment.bytes"].source is ConfigSource.DEFAULT_CONFIG


def test_describe_topic_reports_offsets_size_and_dir(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2)
        log = manager.get_log(TopicPartition("orders", 0))
        append(log, batch(3))
        log.append(batch(2))
        described = topic_admin(manager).describe_topic("orders")
    first = described[0]
    assert first.topic_partition == TopicPartition("orders", 0)
    assert (first.log_start_offset, first.high_watermark, first.log_end_offset) == (0, 3, 5)
    assert first.size_in_bytes == log.size_in_bytes > 0
    assert first.number_of_segments == 1 and first.log_dir == tmp_path / "d0"
    assert described[1].log_end_offset == 0 and described[1].log_dir == tmp_path / "d1"
    with pytest.raises(UnknownTopicOrPartitionError):
        topic_admin(manager).describe_topic("other")


# --- deleting topics --------------------------------------------------------------------------


def test_delete_renames_the_dirs_at_once_and_removes_them_after_the_delay(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2, {"file.delete.delay.ms": "300"})
        append(manager.get_log(TopicPartition("orders", 0)), batch(3))
        topic_admin(manager).delete_topic("orders")
        assert manager.topics() == [] and topic_admin(manager).topic_overrides("orders") == {}
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.get_log(TopicPartition("orders", 0))
        renamed = sorted(p.name for p in tmp_path.glob("d*/orders-*"))
        assert len(renamed) == 2
        assert all(name.startswith(("orders-0.", "orders-1.")) for name in renamed)
        assert all(name.endswith("-delete") for name in renamed)
        wait_until(lambda: not list(tmp_path.glob("d*/orders-*")))


def test_delete_drops_the_partitions_from_the_checkpoints(tmp_path):
    with running(broker_config(tmp_path, dirs=1)) as manager:
        topic_admin(manager).create_topic("orders", 1)
        topic_admin(manager).create_topic("keep", 1)
        manager.checkpoint_log_recovery_offsets()
        topic_admin(manager).delete_topic("orders")
        for name in (RECOVERY_POINT_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE):
            entries = OffsetCheckpointFile(tmp_path / "d0" / name).read()
            assert list(entries) == [TopicPartition("keep", 0)]


def test_a_recreated_topic_starts_empty_even_after_a_restart(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(TopicPartition("orders", 0))
        append(log, batch(5))
        log.delete_records(3)
        manager.checkpoint_log_start_offsets()
        topic_admin(manager).delete_topic("orders")
        topic_admin(manager).create_topic("orders", 1)
    with running(config) as manager:
        log = manager.get_log(TopicPartition("orders", 0))
        assert (log.log_start_offset, log.log_end_offset) == (0, 0)
        assert read_all(log) == []


def test_delete_of_a_topic_with_the_longest_name_fits_the_file_name_limit(tmp_path):
    topic = "t" * 249
    with running(broker_config(tmp_path, dirs=1)) as manager:
        topic_admin(manager).create_topic(topic, 1)
        topic_admin(manager).delete_topic(topic)
        names = [p.name for p in (tmp_path / "d0").iterdir() if p.name.endswith("-delete")]
        assert len(names) == 1 and len(names[0]) <= 255
        assert TopicPartition.from_dir_name(names[0]).partition == 0


def test_deleting_an_unknown_topic_fails(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        with pytest.raises(UnknownTopicOrPartitionError):
            topic_admin(manager).delete_topic("orders")
