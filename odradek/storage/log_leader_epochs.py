"""LogLeaderEpochs: a partition log's leader epochs kept in step with its records (Kafka's
``UnifiedLog.assignEpochStartOffset`` and the leader-epoch cache's flushes; design §8).

Where each epoch starts is the LeaderEpochFileCache's (the leader-epoch-checkpoint file); this
is when that changes and when the file is written. An epoch an append starts is assigned there
and its checkpoint written in the background (two fsyncs have no place on the append path; an
assignment lost to a crash is made again by recovery, LogLoader's ``recover_leader_epochs``),
and in any case before a recovery-point checkpoint passes its start offset. The epochs follow
the log when its start moves up. A checkpoint that cannot be written is an I/O error of the
partition's LocalLog.
"""

from __future__ import annotations

import logging

from odradek.errors import KafkaStorageError
from odradek.storage.leader_epoch_file_cache import LeaderEpochFileCache
from odradek.storage.local_log import LocalLog
from odradek.storage.log_loader import recover_leader_epochs
from odradek.storage.log_segments import LogSegments
from odradek.storage.scheduler import Scheduler

logger = logging.getLogger(__name__)


class LogLeaderEpochs:
    """When one partition's leader epochs are assigned and their checkpoint written."""

    def __init__(self, cache: LeaderEpochFileCache, local: LocalLog, scheduler: Scheduler) -> None:
        self.cache = cache
        self._local = local
        self._scheduler = scheduler

    def assign(self, epoch: int, start_offset: int) -> None:
        """A new epoch starts at ``start_offset``: the checkpoint is written in the background."""
        if self.cache.assign(epoch, start_offset):
            self._scheduler.schedule(
                f"leader-epoch-checkpoint-{self._local.topic_partition}",
                self._flush_in_background,
            )

    def _flush_in_background(self) -> None:
        if self._local.closed:
            return
        try:
            self.cache.flush()
        except OSError as error:
            logger.warning(
                "[%s] leader-epoch-checkpoint not written: %s", self._local.topic_partition, error
            )

    def write(self) -> None:
        """Write the leader-epoch-checkpoint if an assigned epoch may be missing from it
        (blocking). Moot once the partition directory was renamed for deletion, like the
        directory fsync. Raises KafkaStorageError when it cannot be written."""
        if not self.cache.unflushed:
            return
        try:
            self.cache.flush()
        except FileNotFoundError as error:
            if self._local.dir.exists():
                raise self._local.storage_error("leader-epoch-checkpoint write", error) from error
        except OSError as error:
            raise self._local.storage_error("leader-epoch-checkpoint write", error) from error

    def recovery_point_to_checkpoint(self, log_start_offset: int) -> int:
        """The recovery point for the recovery-point checkpoint, once every leader epoch it
        passed is in the leader-epoch-checkpoint: a start after a crash recovers only above
        it, so it assigns no epoch below it again. Kafka writes the cache before that
        checkpoint too; a flush (acks=all) then waits for one fdatasync, not three more
        fsyncs when an epoch starts. Blocking: the checkpoint writer's thread. Should the
        epochs not be written, ``log_start_offset``: the next start then recovers it all."""
        recovery_point = self._local.recovery_point  # before the write: it covers every epoch below
        try:
            self.write()
        except KafkaStorageError as error:
            logger.warning(
                "[%s] %s: recovery point %d checkpointed as the log start offset",
                self._local.topic_partition,
                error,
                recovery_point,
            )
            return log_start_offset
        return recovery_point

    def start_at(self, log_start_offset: int) -> None:
        """The log now starts at ``log_start_offset``: so do its epochs."""
        try:
            self.cache.truncate_from_start(log_start_offset)
        except OSError as error:
            raise self._local.storage_error("leader epoch checkpoint", error) from error

    def recover(self, segments: LogSegments, end: int, recovery_point: int | None) -> None:
        """At open: the epochs of a log ending at ``end`` (LogLoader's
        ``recover_leader_epochs``; ``recovery_point`` after an unclean shutdown)."""
        try:
            recover_leader_epochs(self.cache, segments, end, recovery_point)
        except OSError as error:
            raise self._local.storage_error("leader epoch recovery", error) from error
