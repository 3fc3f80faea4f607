"""TopicAdmin: creating, configuring and deleting topics over a LogManager. Creation is all or
nothing (also across a crash), bounded per request, and costs O(partitions created); partitions
can be added later; shutdown abandons running creations."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import replace

import pytest
from log_helpers import append, batch, read_all
from log_manager_helpers import broker_config, running, topic_admin, wait_until

from odradek.config.config_source import ConfigSource
from odradek.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE_NAME,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    LogManager,
)
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.storage.pending_partition_creation import FILE_PREFIX, PendingPartitionCreation
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def markers(log_dir) -> list[str]:
    return sorted(path.name for path in log_dir.iterdir() if path.name.startswith(FILE_PREFIX))


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


@pytest.mark.parametrize(("first", "second"), [("orders.x", "orders_x"), ("a_b.c", "a.b_c")])
def test_names_that_collide_once_dot_and_underscore_are_folded_are_refused(tmp_path, first, second):
    """As Kafka: INVALID_TOPIC_EXCEPTION naming the existing topic, on creation and its
    validation; auto-creation finds no such topic (tests/test_kafka_reference_parity.py
    compares all of it with Kafka's answers)."""
    with running(broker_config(tmp_path)) as manager:
        admin = topic_admin(manager)
        admin.create_topic(first, 1)
        collision = f"Topic '{second}' collides with existing topic: {first}"
        for attempt in (admin.create_topic, admin.validate_new_topic):
            with pytest.raises(InvalidTopicError) as refused:
                attempt(second, 1)
            assert refused.value.message == collision
        with pytest.raises(
            UnknownTopicOrPartitionError, match=f"collides with existing topic {first}"
        ):
            admin.get_or_create_topic(second)
        with pytest.raises(TopicAlreadyExistsError, match=f"Topic '{first}' already exists"):
            admin.create_topic(first, 1)
        admin.create_topic("orders-x", 1)  # '-' is not folded
        assert manager.topics() == sorted([first, "orders-x"])


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
            "orders", 2, {"retention.ms": "60000", "segment.bytes": "2097152"}
        )
    with running(config) as manager:
        overrides = topic_admin(manager).topic_overrides("orders")
        assert overrides == {"retention.ms": "60000", "segment.bytes": "2097152"}
        for tp in manager.partitions("orders"):
            assert manager.get_log(tp).config.retention_ms == 60000
            assert manager.get_log(tp).config.segment_bytes == 2097152


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


# --- creation at scale, limits, crashes and shutdown ------------------------------------------


def test_log_manager_keeps_logs_and_topic_admin_keeps_topics():
    for method in ("create_topic", "delete_topic", "alter_topic_config", "get_or_create_topic"):
        assert not hasattr(LogManager, method)
        assert hasattr(TopicAdmin, method)


def test_a_new_partition_holds_one_descriptor_and_serves(tmp_path):
    with running(broker_config(tmp_path, dirs=1)) as manager:
        before = open_descriptors()
        topic_admin(manager).create_topic("wide", 200)
        assert open_descriptors() - before <= 200 + 5  # the log files, nothing per index
        log = manager.get_log(TopicPartition("wide", 199))
        append(log, batch(3))
        assert [record.offset for record in read_all(log)] == [0, 1, 2]


def test_creation_leaves_no_marker_and_survives_a_restart(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 6)
        assert all(markers(log_dir) == [] for log_dir in manager.log_dirs)
    with running(config) as manager:
        assert len(manager.partitions("orders")) == 6


def test_more_partitions_than_the_limit_are_refused_naming_it(tmp_path):
    config = broker_config(tmp_path, create_topics_max_partitions_per_request=10)
    with running(config) as manager:
        admin = topic_admin(manager)
        with pytest.raises(PolicyViolationError, match="create.topics.max.partitions.per.request"):
            admin.create_topic("orders", 11)
        admin.create_topic("orders", 10)
        with pytest.raises(PolicyViolationError, match="is 10"):
            admin.create_partitions("orders", 21)
        assert len(manager.partitions("orders")) == 10
        assert not (tmp_path / "d0" / "orders-10").exists()


def test_partitions_are_added_later_with_the_topic_config(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        admin = topic_admin(manager)
        admin.create_topic("orders", 2, {"retention.ms": "60000"})
        append(manager.get_log(TopicPartition("orders", 0)), batch(2))
        added = admin.create_partitions("orders", 5)
        assert added == [TopicPartition("orders", p) for p in (2, 3, 4)]
        assert manager.get_log(TopicPartition("orders", 4)).config.retention_ms == 60000
        assert manager.get_log(TopicPartition("orders", 0)).log_end_offset == 2
        with pytest.raises(InvalidPartitionsError, match="has 5 partitions"):
            admin.create_partitions("orders", 5)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.create_partitions("other", 3)
    with running(config) as manager:
        assert len(manager.partitions("orders")) == 5


def test_a_failed_creation_leaves_nothing(tmp_path, monkeypatch):
    config = broker_config(tmp_path)
    with running(config) as manager:
        admin = topic_admin(manager)
        created = []
        real_create = UnifiedLog.create

        def failing_create(directory, *args, **kwargs):
            if len(created) == 7:
                raise OSError(28, "No space left on device")
            created.append(directory)
            return real_create(directory, *args, **kwargs)

        monkeypatch.setattr(UnifiedLog, "create", failing_create)
        with pytest.raises(KafkaStorageError, match="No space left"):
            admin.create_topic("orders", 20, {"retention.ms": "60000"})
        assert manager.topics() == [] and admin.topic_overrides("orders") == {}
        assert not any(directory.exists() for directory in created)
        (offline,) = manager.offline_log_dirs  # the failing one; its marker stays there
        online = [log_dir for log_dir in manager.log_dirs if log_dir != offline]
        assert all(markers(log_dir) == [] for log_dir in online)
    monkeypatch.undo()
    with running(config) as manager:
        assert manager.topics() == [] and manager.offline_log_dirs == frozenset()
        assert all(markers(log_dir) == [] for log_dir in manager.log_dirs)
        assert not list(tmp_path.glob("d*/orders-*"))


def test_startup_rolls_back_a_creation_a_crash_interrupted(tmp_path):
    """What a crash after 3 of 8 partitions leaves (marker, directories, configs) is undone."""
    config = broker_config(tmp_path)
    with running(config) as manager:
        admin = topic_admin(manager)
        admin.create_topic("kept", 2)
        admin.create_topic("grown", 1)
        manager.topic_configs.set("orders", {"retention.ms": "60000"})
        for log_dir in manager.log_dirs:
            PendingPartitionCreation("orders", 0, 8, new_topic=True, creation_id="a" * 32).write(
                log_dir
            )
            PendingPartitionCreation("grown", 1, 4, new_topic=False, creation_id="b" * 32).write(
                log_dir
            )
    leftovers = [tmp_path / f"d{number % 2}" / f"orders-{number}" for number in range(3)]
    for directory in [*leftovers, tmp_path / "d1" / "grown-1"]:
        UnifiedLog.open(directory, config.log_config(), None).close()
    with running(config) as manager:
        assert manager.topics() == ["grown", "kept"]
        assert len(manager.partitions("kept")) == 2 and len(manager.partitions("grown")) == 1
        assert topic_admin(manager).topic_overrides("orders") == {}
        assert not list(tmp_path.glob("d*/orders-*")) and not list(tmp_path.glob("d*/grown-1"))
        assert all(markers(log_dir) == [] for log_dir in manager.log_dirs)
        topic_admin(manager).create_topic("orders", 2)


def test_a_marker_is_atomic_json_naming_the_partitions(tmp_path):
    creation = PendingPartitionCreation("orders", 4, 3, new_topic=False)
    creation.write(tmp_path)
    (tmp_path / (creation.file_name + ".tmp")).write_bytes(b"{torn")
    document = json.loads((tmp_path / creation.file_name).read_text())
    assert document["first_partition"] == 4 and document["partition_count"] == 3
    assert PendingPartitionCreation.read_all(tmp_path) == [creation]
    assert [p.name for p in tmp_path.iterdir()] == [creation.file_name]
    assert creation.partitions == [TopicPartition("orders", p) for p in (4, 5, 6)]


def test_shutdown_abandons_a_running_creation_and_it_rolls_back(tmp_path, monkeypatch, caplog):
    config = broker_config(tmp_path)
    manager = LogManager(config)
    manager.startup()
    admin = TopicAdmin(manager, config)
    started, release = threading.Event(), threading.Event()
    real_create = UnifiedLog.create

    def slow_create(directory, *args, **kwargs):
        if directory.name == "orders-50":
            started.set()
            release.wait(5)
        return real_create(directory, *args, **kwargs)

    monkeypatch.setattr(UnifiedLog, "create", slow_create)
    outcome: list[BaseException] = []

    def create() -> None:
        try:
            admin.create_topic("orders", 100)
        except KafkaStorageError as error:
            outcome.append(error)

    creator = threading.Thread(target=create)
    creator.start()
    assert started.wait(5)
    stopping = threading.Thread(target=admin.shutdown, args=(0.0, 5.0))
    stopping.start()
    # The creation goes on only once the shutdown has abandoned it (on a loaded machine the
    # shutdown's thread may start after a release here, and the creation would just finish).
    wait_until(lambda: "abandoning the topic operations" in caplog.text, 10)
    release.set()
    stopping.join(10)
    creator.join(10)
    assert outcome and "stopping" in str(outcome[0])
    with pytest.raises(KafkaStorageError, match="stopping"):
        admin.create_topic("later", 1)
    manager.shutdown()
    assert manager.topics() == [] and not list(tmp_path.glob("d*/orders-*"))
    assert all((log_dir / CLEAN_SHUTDOWN_FILE_NAME).exists() for log_dir in manager.log_dirs)


def test_log_manager_shutdown_writes_no_clean_marker_while_a_creation_runs(tmp_path, monkeypatch):
    config = broker_config(tmp_path, dirs=1)
    manager = LogManager(config)
    manager.startup()
    started, release = threading.Event(), threading.Event()
    real_create = UnifiedLog.create

    def stuck_create(directory, *args, **kwargs):
        if directory.name == "orders-5":
            started.set()
            release.wait(10)
        return real_create(directory, *args, **kwargs)

    monkeypatch.setattr(UnifiedLog, "create", stuck_create)
    admin = TopicAdmin(manager, config)
    creator = threading.Thread(
        target=lambda: pytest.raises(KafkaStorageError, admin.create_topic, "orders", 10)
    )
    creator.start()
    assert started.wait(5)
    manager.shutdown(creation_timeout_s=0.2)
    assert not (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE_NAME).exists()
    release.set()
    creator.join(10)
    with running(config) as manager:
        assert manager.topics() == []
        assert not list(tmp_path.glob("d0/orders-*"))


def test_loading_never_written_partitions_holds_one_descriptor_each(tmp_path):
    config = broker_config(tmp_path, dirs=1)
    with running(config) as manager:
        topic_admin(manager).create_topic("wide", 200)
    before = open_descriptors()
    with running(config) as manager:
        assert open_descriptors() - before <= 200 + 10  # the log files, nothing per index
        log = manager.get_log(TopicPartition("wide", 7))
        append(log, batch(2))
        assert [record.offset for record in read_all(log)] == [0, 1]
    with running(config) as manager:
        assert manager.get_log(TopicPartition("wide", 7)).log_end_offset == 2


def test_shutdown_waits_for_a_creation_that_finishes_within_its_bound(tmp_path, monkeypatch):
    with running(broker_config(tmp_path)) as manager:
        admin = topic_admin(manager)
        started, release = threading.Event(), threading.Event()
        real_create = UnifiedLog.create

        def slow_create(directory, *args, **kwargs):
            if directory.name == "orders-20":
                started.set()
                release.wait(5)
            return real_create(directory, *args, **kwargs)

        monkeypatch.setattr(UnifiedLog, "create", slow_create)
        creator = threading.Thread(target=admin.create_topic, args=("orders", 40))
        creator.start()
        assert started.wait(5)
        finished: list[bool] = []
        stopping = threading.Thread(target=lambda: finished.append(admin.shutdown(10.0)))
        stopping.start()
        release.set()
        stopping.join(15)
        creator.join(15)
        assert finished == [True]
        assert len(manager.partitions("orders")) == 40


def test_startup_forgets_the_configs_of_topics_without_partitions(tmp_path):
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic("kept", 1, {"retention.ms": "60000"})
        manager.topic_configs.set("orphan", {"retention.ms": "1000"})  # a crash left it
    with running(config) as manager:
        assert manager.topic_configs.topics == {"kept"}


def test_a_stale_marker_never_removes_partitions_that_hold_records(tmp_path):
    """A finished creation whose marker could not be removed (I/O error) keeps its data."""
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 4)
        append(manager.get_log(TopicPartition("orders", 3)), batch(2))
        for log_dir in manager.log_dirs:
            PendingPartitionCreation("orders", 0, 4, new_topic=True).write(log_dir)
    with running(config) as manager:
        assert len(manager.partitions("orders")) == 4
        assert manager.get_log(TopicPartition("orders", 3)).log_end_offset == 2
        assert all(markers(log_dir) == [] for log_dir in manager.log_dirs)
