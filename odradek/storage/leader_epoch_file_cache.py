"""LeaderEpochFileCache: where each leader epoch of a partition starts, kept in the partition's
``leader-epoch-checkpoint`` (Kafka's ``LeaderEpochFileCache`` and its checkpoint file).

File format, as Kafka's: line 1 the version ``0``, line 2 the number of entries, then one
``epoch startOffset`` line per epoch, ascending. Written atomically (temp file, fsync, rename).
A missing file is an empty cache; an unreadable one is logged and rebuilt from the next append
(it only says where epochs start, and odradek's single broker has one epoch: see
docs/kafka-compatibility.md).

Durability: an epoch assigned by an append is written in the background, and in any case
before a recovery-point checkpoint passes its start offset
(``LogLeaderEpochs.recovery_point_to_checkpoint`` writes the cache while it is ``unflushed``);
after an unclean shutdown the log's recovery truncates the cache to its log end and assigns the
epochs of the batches above the checkpointed recovery point again, as Kafka's recovery does.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import NamedTuple

from odradek.storage.atomic_file import write_atomically

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def encode_checkpoint(entries: list[EpochEntry]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{entry.epoch} {entry.start_offset}" for entry in entries]
    return ("\n".join(lines) + "\n").encode()


def decode_checkpoint(text: str) -> list[EpochEntry]:
    """The entries of a checkpoint's text; ValueError naming what is wrong."""
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError("not a version 0 leader-epoch-checkpoint")
    count = int(lines[1])
    if count < 0 or len(lines) != count + 2:
        raise ValueError(f"{count} entries expected, {len(lines) - 2} found")
    entries = []
    for line in lines[2:]:
        epoch, start_offset = line.split()
        entries.append(EpochEntry(int(epoch), int(start_offset)))
    return entries


class LeaderEpochFileCache:
    """The start offset of each leader epoch of one partition."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = directory / LEADER_EPOCH_CHECKPOINT_FILE
        self._name = name
        self._write_lock = threading.Lock()
        self._changes = 0  # assignments so far; ``_written`` is the count the file holds
        self._written = 0
        self.entries: list[EpochEntry] = self._read()
        self.latest_epoch = self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH
        """The newest epoch (a plain attribute: every append compares against it)."""

    def _read(self) -> list[EpochEntry]:
        try:
            return decode_checkpoint(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError, UnicodeDecodeError) as error:
            logger.warning(
                "[%s] %s is unreadable (%s): starting with no leader epochs",
                self._name,
                self.path.name,
                error,
            )
            return []

    def _write(self) -> None:
        # One writer at a time (the background flush and a truncation share the temp file);
        # the entries are read under the lock, so the last write is the newest state.
        with self._write_lock:
            changes = self._changes  # before the entries: an assignment moves both
            entries = self.entries  # replaced, never mutated: a consistent list
            self.latest_epoch = entries[-1].epoch if entries else UNDEFINED_EPOCH
            write_atomically(self.path, encode_checkpoint(entries))
            self._written = max(self._written, changes)

    @property
    def unflushed(self) -> bool:
        """Whether an assigned epoch may not be in the file yet."""
        return self._written < self._changes

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (a newer epoch only); the caller
        writes the file with :meth:`flush`, off the append path. True when it changed."""
        if epoch <= self.latest_epoch:
            return False
        self.entries = [*self.entries, EpochEntry(epoch, start_offset)]
        self.latest_epoch = epoch
        self._changes += 1
        return True

    def flush(self) -> None:
        """Write the entries as they are now (atomically, durably)."""
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or above ``end_offset`` (the log was cut there)."""
        kept = [entry for entry in self.entries if entry.start_offset < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly below it and move the
        start of the one holding it there."""
        below = [entry for entry in self.entries if entry.start_offset <= start_offset]
        if not below or (len(below) == 1 and below[0].start_offset == start_offset):
            return
        holding = EpochEntry(below[-1].epoch, start_offset)
        self.entries = [holding] + [e for e in self.entries if e.start_offset > start_offset]
        self._write()

    def clear(self) -> None:
        """The log restarted empty: no epoch starts anywhere yet."""
        if self.entries or self.path.exists():
            self.entries = []
            self._write()

    def end_offset_for(
        self, requested_epoch: int, current_epoch: int, log_end_offset: int
    ) -> EpochEntry:
        """Kafka's ``endOffsetFor``: the largest epoch <= ``requested_epoch`` and the offset
        where the next epoch starts (the log end for the current epoch)."""
        if requested_epoch == UNDEFINED_EPOCH:
            return EpochEntry(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == current_epoch and requested_epoch >= self.latest_epoch:
            return EpochEntry(requested_epoch, log_end_offset)
        if requested_epoch == self.latest_epoch:
            return EpochEntry(requested_epoch, log_end_offset)
        higher = next((e for e in self.entries if e.epoch > requested_epoch), None)
        if higher is None:
            return EpochEntry(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        floor = [e for e in self.entries if e.epoch <= requested_epoch]
        if not floor:
            return EpochEntry(requested_epoch, higher.start_offset)
        return EpochEntry(floor[-1].epoch, higher.start_offset)
