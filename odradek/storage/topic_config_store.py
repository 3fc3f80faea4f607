"""TopicConfigStore: per-topic config overrides that survive restarts.

Kafka keeps a topic's overrides in its metadata store (the ZooKeeper node ``/config/topics/<t>``
or the KRaft metadata log); a single broker keeps them in its log directories instead. Every
online log directory holds the same file, ``topic-configs.json``, in the shape of Kafka's
ZooKeeper config nodes, values as text as they arrive in CreateTopics and AlterConfigs::

    {"version": 1, "topics": {"orders": {"retention.ms": "3600000", "cleanup.policy": "compact"}}}

Only overrides are stored; a topic without overrides has no entry and takes the broker defaults.
Each change rewrites the file in every online directory atomically (see
:mod:`odradek.storage.atomic_file`), so losing one directory loses no config. At start-up the
most recently written copy wins (a directory that was offline during a change holds an older
copy, or a malformed one, which is logged and ignored) and is written back where copies differ.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.errors import InvalidTopicError, KafkaStorageError
from odradek.storage.atomic_file import write_atomically
from odradek.storage.log_dir_failure_channel import LogDirFailureChannel
from odradek.topic_partition import validate_topic_name

logger = logging.getLogger(__name__)

TOPIC_CONFIGS_FILE_NAME = "topic-configs.json"
CURRENT_VERSION = 1

TopicOverrides = dict[str, dict[str, str]]


class TopicConfigStore:
    """The overrides of every topic, kept in memory and in every online log directory."""

    def __init__(self, log_dirs: Sequence[Path], failure_channel: LogDirFailureChannel) -> None:
        self._log_dirs = tuple(log_dirs)
        self._failure_channel = failure_channel
        self._topics: TopicOverrides = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read the newest copy among the online directories; rewrite the copies that differ."""
        copies = {log_dir: self._read(log_dir) for log_dir in self._online_dirs()}
        readable = [(written, topics) for written, topics in copies.values() if topics is not None]
        newest = max(readable, key=lambda copy: copy[0], default=(0, {}))[1]
        with self._lock:
            self._topics = newest
            stale = [log_dir for log_dir, (_, topics) in copies.items() if topics != newest]
            if stale and readable:
                self._write(newest, stale)

    def overrides(self, topic: str) -> dict[str, str]:
        """The overrides of ``topic`` (empty when it has none)."""
        return dict(self._topics.get(topic, {}))

    @property
    def topics(self) -> frozenset[str]:
        """The topics that have overrides."""
        return frozenset(self._topics)

    def set(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Make ``overrides`` the whole override set of ``topic`` and persist it.

        Raises KafkaStorageError, changing nothing, when no online log directory recorded it.
        """
        with self._lock:
            topics = {name: dict(values) for name, values in self._topics.items()}
            if overrides:
                topics[topic] = {key: str(value) for key, value in overrides.items()}
            else:
                topics.pop(topic, None)
            if topics == self._topics:
                return
            if not self._write(topics, self._online_dirs()):
                raise KafkaStorageError(
                    f"cannot record the configs of topic {topic}: no online log directory"
                )
            self._topics = topics

    def remove(self, topic: str) -> None:
        """Forget the overrides of a deleted topic."""
        self.set(topic, {})

    def _online_dirs(self) -> list[Path]:
        return [d for d in self._log_dirs if not self._failure_channel.is_offline(d)]

    def _write(self, topics: TopicOverrides, log_dirs: Sequence[Path]) -> int:
        """Write ``topics`` to each of ``log_dirs``; return how many succeeded (a failure
        takes its directory offline)."""
        data = json.dumps({"version": CURRENT_VERSION, "topics": topics}, indent=1, sort_keys=True)
        written = 0
        for log_dir in log_dirs:
            try:
                write_atomically(log_dir / TOPIC_CONFIGS_FILE_NAME, data.encode("utf-8"))
                written += 1
            except OSError as error:
                self._failure_channel.maybe_add_offline_log_dir(
                    log_dir, f"cannot write {TOPIC_CONFIGS_FILE_NAME}: {error}", error
                )
        return written

    def _read(self, log_dir: Path) -> tuple[int, TopicOverrides | None]:
        """(modification time in ns, topics) of a directory's copy; topics None when there is
        no usable copy."""
        path = log_dir / TOPIC_CONFIGS_FILE_NAME
        try:
            written = path.stat().st_mtime_ns
            return written, parse_topic_configs(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return 0, None
        except (OSError, UnicodeDecodeError, ValueError) as error:
            logger.warning("ignoring unusable topic config file %s: %s", path, error)
            return 0, None


def parse_topic_configs(text: str) -> TopicOverrides:
    """The overrides in ``text``; ValueError saying what is wrong when malformed."""
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("version") != CURRENT_VERSION:
        raise ValueError(f"not a version {CURRENT_VERSION} topic config document")
    topics = document.get("topics")
    if not isinstance(topics, dict):
        raise ValueError("'topics' is not an object")
    for topic, overrides in topics.items():
        try:
            validate_topic_name(topic)
        except InvalidTopicError as error:
            raise ValueError(error.message) from None
        if not isinstance(overrides, dict) or not all(
            isinstance(value, str) for value in overrides.values()
        ):
            raise ValueError(f"the overrides of topic {topic!r} are not an object of strings")
    return topics
