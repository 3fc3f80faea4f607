"""ReplicaManager keeps its partitions while the LogManager serves their logs, and only then."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from log_helpers import batch

from odradek.config.broker_config import BrokerConfig
from odradek.errors import KafkaStorageError, UnknownTopicOrPartitionError
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.values.produce import Acks
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.server.replica_manager import ReplicaManager
from odradek.storage.log_manager import LogManager


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LogManager, TopicAdmin, ReplicaManager]]:
    manager = LogManager(BrokerConfig(log_dirs=(str(tmp_path / "a"), str(tmp_path / "b"))))
    manager.startup()
    executor = ThreadPoolExecutor(1)
    try:
        yield (
            manager,
            TopicAdmin(manager, manager.config),
            ReplicaManager(manager, executor, executor, executor),
        )
    finally:
        manager.shutdown()
        executor.shutdown()


def test_a_partition_is_kept_while_its_log_is_served(served) -> None:
    manager, admin, replicas = served
    admin.create_topic("kept", 2)
    first = replicas.partition("kept", 0)
    assert replicas.partition("kept", 0) is first
    admin.create_topic("other", 1)  # the served logs change, not this one's
    assert replicas.partition("kept", 0) is first
    assert first.log is manager.get_log(first.topic_partition)


def test_a_topic_deleted_and_created_again_is_appended_to_in_its_new_log(served) -> None:
    """Even when nothing tells the ReplicaManager of the deletion (forget_topic)."""
    manager, admin, replicas = served
    admin.create_topic("again", 1)
    old = replicas.partition("again", 0)
    assert replicas.append_at_once("again", 0, batch(5), Acks.LEADER) is not None
    admin.delete_topic("again")
    with pytest.raises(UnknownTopicOrPartitionError):
        replicas.partition("again", 0)
    assert replicas.append_at_once("again", 0, batch(1), Acks.LEADER) is None
    admin.create_topic("again", 1)
    info = replicas.append_at_once("again", 0, batch(1), Acks.LEADER)
    assert info is not None and info.first_offset == 0
    new = replicas.partition("again", 0)
    assert new is not old and new.log is manager.get_log(new.topic_partition)
    assert replicas.nothing_new("again", 0, 1, IsolationLevel.HIGH_WATERMARK) == (1, 0)


def test_a_partition_whose_log_directory_failed_is_refused(served) -> None:
    manager, admin, replicas = served
    admin.create_topic("spread", 2)
    partitions = [replicas.partition("spread", number) for number in (0, 1)]
    failed = partitions[0].log.log_dir
    assert partitions[1].log.log_dir != failed  # one partition in each directory
    manager.failure_channel.maybe_add_offline_log_dir(failed, "test: disk gone")
    with pytest.raises(KafkaStorageError):
        replicas.partition("spread", 0)
    assert replicas.append_at_once("spread", 0, batch(1), Acks.LEADER) is None
    assert replicas.nothing_new("spread", 0, 0, IsolationLevel.HIGH_WATERMARK) is None
    assert replicas.partition("spread", 1) is partitions[1]
