"""OffsetCheckpointFile: one offset per partition in Kafka's checkpoint text format (design §2).

Used for ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` and ``cleaner-offset-checkpoint``::

    0                 <- version
    2                 <- entry count
    orders 0 1500     <- topic partition offset
    orders 1 1432

Writes are atomic (see :mod:`odradek.storage.atomic_file`). A missing or malformed file reads as
empty (a malformed or unreadable one with a warning): the offsets it held only save work
(recovery then starts from 0), so losing them must never stop the broker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path

from odradek.errors import InvalidTopicError
from odradek.storage.atomic_file import write_atomically
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

CURRENT_VERSION = 0


class OffsetCheckpointFile:
    """The checkpoint file at ``path``; one writer at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file's entries with ``offsets``. Raises OSError (the old file stays)."""
        lines = [str(CURRENT_VERSION), str(len(offsets))]
        lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        with self._lock:
            write_atomically(self.path, data)

    def read(self) -> dict[TopicPartition, int]:
        """The entries; empty (and logged) when the file is missing, unreadable or malformed."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            # A new directory has none yet (LogManager says it is new): not worth a line.
            logger.debug("no checkpoint file %s; starting from empty offsets", self.path)
            return {}
        except (OSError, UnicodeDecodeError) as error:
            logger.warning("cannot read checkpoint file %s (%s); ignoring it", self.path, error)
            return {}
        try:
            return parse_checkpoint(text)
        except ValueError as error:
            logger.warning("ignoring malformed checkpoint file %s: %s", self.path, error)
            return {}


def parse_checkpoint(text: str) -> dict[TopicPartition, int]:
    """The entries of checkpoint ``text``; ValueError saying what is wrong when malformed."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError("missing the version or entry count line")
    if lines[0].strip() != str(CURRENT_VERSION):
        raise ValueError(f"unsupported version {lines[0].strip()!r}")
    count = _non_negative(lines[1], "entry count")
    entries = [line for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise ValueError(f"the count line says {count} entries but {len(entries)} follow")
    offsets = {}
    for number, line in enumerate(entries, start=3):
        fields = line.split()
        if len(fields) != 3:
            raise ValueError(f"line {number} is not 'topic partition offset': {line!r}")
        try:
            tp = TopicPartition(fields[0], _non_negative(fields[1], "partition"))
        except InvalidTopicError as error:
            raise ValueError(f"line {number}: {error.message}") from None
        offsets[tp] = _non_negative(fields[2], "offset")
    return offsets


def _non_negative(field: str, what: str) -> int:
    field = field.strip()
    if not (field.isascii() and field.isdigit()):
        raise ValueError(f"{what} {field!r} is not a non-negative integer")
    return int(field)
