"""TopicPartition and the rules for topic names and partition directory names (design §2)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.errors import InvalidTopicError

MAX_TOPIC_NAME_LENGTH = 249
DELETE_DIR_SUFFIX = "-delete"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(topic: str) -> str:
    """Return ``topic`` if it is a legal name, else raise InvalidTopicError saying why.

    A topic name becomes a directory name, so this is a security boundary: no separators,
    no ``.``/``..``, only ``[a-zA-Z0-9._-]``, 1..249 characters.
    """
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("topic name is empty")
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(topic)} characters long, the maximum is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise InvalidTopicError(
            f"topic name {topic!r} has characters other than ASCII letters, digits, '.', '_', '-'"
        )
    return topic


def collision_key(topic: str) -> str:
    """``topic`` with '.' as '_': two topics with the same key would have the same metric
    names, so Kafka (and odradek) refuses the second (Kafka's ``Topic.unifyCollisionChars``)."""
    return topic.replace(".", "_")


@dataclass(frozen=True, order=True)
class TopicPartition:
    """One partition of one topic; its UnifiedLog lives in the directory ``<topic>-<partition>``."""

    topic: str
    partition: int

    def __post_init__(self) -> None:
        validate_topic_name(self.topic)
        if not isinstance(self.partition, int) or self.partition < 0:
            raise InvalidTopicError(
                f"partition must be a non-negative integer, not {self.partition!r}"
            )

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __str__(self) -> str:
        return self.dir_name

    @classmethod
    def from_dir_name(cls, name: str) -> TopicPartition:
        """Parse ``orders-0`` (or a deleted ``orders-0.<id>-delete``) into a TopicPartition."""
        if name.endswith(DELETE_DIR_SUFFIX):
            name = name[: -len(DELETE_DIR_SUFFIX)].rsplit(".", 1)[0]
        topic, sep, partition = name.rpartition("-")
        if not sep or not partition.isdigit():
            raise InvalidTopicError(
                f"directory name {name!r} is not of the form <topic>-<partition>"
            )
        return cls(topic, int(partition))


def describe_partitions(partitions: Sequence[TopicPartition], shown: int = 5) -> str:
    """``N partitions (a-0, a-1, ... and N-2 more)``: a log line's account of many partitions,
    a count and the first few names, never thousands of them."""
    count = len(partitions)
    if count == 0:
        return "no partitions"
    names = ", ".join(str(tp) for tp in sorted(partitions)[:shown])
    more = f" and {count - shown} more" if count > shown else ""
    return f"{count} partition{'s' if count != 1 else ''} ({names}{more})"
