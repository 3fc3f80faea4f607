"""LogManager: log directories, their identity and locks (topics: test_topic_admin.py)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from log_manager_helpers import broker_config, running

from odradek.errors import (
    InconsistentClusterIdError,
    InvalidConfigError,
    LogDirLockedError,
)
from odradek.storage.log_dir_lock import LOCK_FILE_NAME
from odradek.storage.log_manager import (
    LogManager,
)
from odradek.storage.meta_properties import MetaProperties

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
