"""TopicConfigStore: overrides persisted in every online log dir, newest copy wins."""

from __future__ import annotations

import json
import os

import pytest

from odradek.errors import KafkaStorageError
from odradek.storage.log_dir_failure_channel import LogDirFailureChannel
from odradek.storage.topic_config_store import TOPIC_CONFIGS_FILE_NAME, TopicConfigStore


@pytest.fixture
def dirs(tmp_path):
    roots = [tmp_path / "d1", tmp_path / "d2"]
    for root in roots:
        root.mkdir()
    return roots


def reopened(dirs, channel=None):
    store = TopicConfigStore(dirs, channel or LogDirFailureChannel())
    store.load()
    return store


def test_overrides_survive_a_restart(dirs):
    store = reopened(dirs)
    store.set("orders", {"retention.ms": "1000"})
    store.set("events", {"cleanup.policy": "compact"})
    again = reopened(dirs)
    assert again.overrides("orders") == {"retention.ms": "1000"}
    assert again.overrides("events") == {"cleanup.policy": "compact"}
    assert again.overrides("other") == {}


def test_every_online_dir_holds_the_file_in_kafkas_config_node_shape(dirs):
    reopened(dirs).set("orders", {"retention.ms": "1000"})
    for root in dirs:
        document = json.loads((root / TOPIC_CONFIGS_FILE_NAME).read_text())
        assert document == {"version": 1, "topics": {"orders": {"retention.ms": "1000"}}}


def test_empty_overrides_and_remove_drop_the_topic(dirs):
    store = reopened(dirs)
    store.set("orders", {"retention.ms": "1000"})
    store.set("events", {"retention.ms": "5"})
    store.set("orders", {})
    store.remove("events")
    assert reopened(dirs).topics == frozenset()


def test_newest_copy_wins_and_is_written_back(dirs):
    store = reopened(dirs)
    store.set("orders", {"retention.ms": "1"})
    stale = (dirs[0] / TOPIC_CONFIGS_FILE_NAME).read_text()
    store.set("orders", {"retention.ms": "2"})
    (dirs[0] / TOPIC_CONFIGS_FILE_NAME).write_text(stale)
    os.utime(dirs[0] / TOPIC_CONFIGS_FILE_NAME, ns=(1, 1))
    assert reopened(dirs).overrides("orders") == {"retention.ms": "2"}
    assert json.loads((dirs[0] / TOPIC_CONFIGS_FILE_NAME).read_text())["topics"] == {
        "orders": {"retention.ms": "2"}
    }


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"version": 2, "topics": {}}',
        '{"version": 1, "topics": {"../x": {}}}',
        '{"version": 1, "topics": {"t": {"retention.ms": 5}}}',
    ],
)
def test_unusable_copy_is_ignored_and_repaired(dirs, text):
    reopened(dirs).set("orders", {"retention.ms": "7"})
    (dirs[1] / TOPIC_CONFIGS_FILE_NAME).write_text(text)
    assert reopened(dirs).overrides("orders") == {"retention.ms": "7"}
    assert "orders" in (dirs[1] / TOPIC_CONFIGS_FILE_NAME).read_text()


def test_write_failure_takes_the_dir_offline_and_others_keep_the_config(dirs, monkeypatch):
    channel = LogDirFailureChannel()
    store = reopened(dirs, channel)
    real_replace = os.replace

    def replace_failing_in_d1(src, dst):
        if str(dst).startswith(str(dirs[0])):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_failing_in_d1)
    store.set("orders", {"retention.ms": "9"})
    assert channel.offline_log_dirs == {dirs[0]}
    assert store.overrides("orders") == {"retention.ms": "9"}
    monkeypatch.undo()
    assert reopened([dirs[1]]).overrides("orders") == {"retention.ms": "9"}


def test_change_with_no_online_dir_fails_and_changes_nothing(dirs):
    channel = LogDirFailureChannel()
    store = reopened(dirs, channel)
    for root in dirs:
        channel.maybe_add_offline_log_dir(root, "test")
    with pytest.raises(KafkaStorageError, match="no online log directory"):
        store.set("orders", {"retention.ms": "9"})
    assert store.overrides("orders") == {}
