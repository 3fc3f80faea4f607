"""PendingPartitionCreation: the marker that makes creating a topic's partitions all or nothing.

Creating a topic (or adding partitions to one) makes one directory per partition, and no set
of directory operations is atomic. So before the first directory is made, a marker naming the
partitions is written (durably) to every online log directory; the new logs are made visible only
once all of them exist and their directory entries are durable, and the marker is removed last.
A marker found at start-up means the creation never finished (nobody was told it did, and no
client could see its partitions): the directories it names are removed before the logs are
loaded, and so are the topic's config overrides when the creation was the topic's.

The marker is ``pending-partition-creation-<32 hex digits>.json`` in the log directory::

    {"version": 1, "topic": "orders", "first_partition": 0, "partition_count": 8,
     "new_topic": true}
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from odradek.errors import InvalidTopicError
from odradek.storage.atomic_file import TMP_SUFFIX, fsync_directory, write_atomically
from odradek.topic_partition import TopicPartition, validate_topic_name

logger = logging.getLogger(__name__)

FILE_PREFIX = "pending-partition-creation-"
FILE_SUFFIX = ".json"
CURRENT_VERSION = 1


@dataclass(frozen=True)
class PendingPartitionCreation:
    """Partitions ``first_partition`` .. ``first_partition + partition_count - 1`` of ``topic``
    being created; ``new_topic`` when the creation is the topic's own (its configs go too)."""

    topic: str
    first_partition: int
    partition_count: int
    new_topic: bool
    creation_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(self.topic, number)
            for number in range(self.first_partition, self.first_partition + self.partition_count)
        ]

    @property
    def file_name(self) -> str:
        return f"{FILE_PREFIX}{self.creation_id}{FILE_SUFFIX}"

    def write(self, log_dir: Path) -> None:
        """Record the creation in ``log_dir`` durably. Raises OSError."""
        document = {
            "version": CURRENT_VERSION,
            "topic": self.topic,
            "first_partition": self.first_partition,
            "partition_count": self.partition_count,
            "new_topic": self.new_topic,
        }
        write_atomically(log_dir / self.file_name, json.dumps(document).encode("utf-8"))

    def remove(self, log_dir: Path) -> None:
        """Forget the creation in ``log_dir`` durably (finished or rolled back). Raises OSError."""
        (log_dir / self.file_name).unlink(missing_ok=True)
        fsync_directory(log_dir)

    @classmethod
    def read_all(cls, log_dir: Path) -> list[PendingPartitionCreation]:
        """The unfinished creations recorded in ``log_dir``. A marker is written atomically, so
        a leftover temporary file means no directory was made after it: it is removed, as is
        an unreadable marker (logged), which can only be damage from outside."""
        for leftover in log_dir.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}{TMP_SUFFIX}"):
            leftover.unlink(missing_ok=True)
        found = []
        for path in sorted(log_dir.glob(f"{FILE_PREFIX}*{FILE_SUFFIX}")):
            creation_id = path.name[len(FILE_PREFIX) : -len(FILE_SUFFIX)]
            try:
                found.append(cls._parse(path.read_text(encoding="utf-8"), creation_id))
            except (OSError, UnicodeDecodeError, ValueError) as error:
                logger.warning("removing unusable creation marker %s: %s", path, error)
                path.unlink(missing_ok=True)
        return found

    @classmethod
    def _parse(cls, text: str, creation_id: str) -> PendingPartitionCreation:
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("version") != CURRENT_VERSION:
            raise ValueError(f"not a version {CURRENT_VERSION} creation marker")
        topic, first, count, new_topic = (
            document.get(key)
            for key in ("topic", "first_partition", "partition_count", "new_topic")
        )
        if not isinstance(topic, str):
            raise ValueError("'topic' is not a string")
        try:
            validate_topic_name(topic)
        except InvalidTopicError as error:
            raise ValueError(error.message) from None
        if not all(isinstance(value, int) and value >= 0 for value in (first, count)):
            raise ValueError("'first_partition' and 'partition_count' are not counts")
        if not isinstance(new_topic, bool):
            raise ValueError("'new_topic' is not a boolean")
        return cls(topic, first, count, new_topic, creation_id)
