"""OffsetMetadataManager: the groups' committed offsets (Kafka's ``OffsetMetadataManager``).

OffsetCommit, OffsetFetch and OffsetDelete, the offsets of deleted topics, and the offsets
retention check (``offsets.retention.minutes``). A commit is answered once its records are
fsync'ed in ``__consumer_offsets``, and the offsets served change only then. Whether a
member may commit is the membership side's call (the GroupMetadataManager), as Kafka's
classic group validates an offset commit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    KafkaError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.binary_fields import STRING_MAX_BYTES
from odradek.server.group.coordinator_log import (
    GROUP_METADATA_TOPIC_NAME,
    CoordinatorLog,
    coordinator_error,
)
from odradek.server.group.coordinator_records import OffsetCommitKey, OffsetCommitValue
from odradek.server.group.coordinator_results import (
    NO_ERROR,
    ErrorInfo,
    OffsetCommitEntry,
    OffsetFetchGroupResult,
    OffsetFetchPartition,
    PartitionResult,
)
from odradek.server.group.coordinator_tasks import CoordinatorTasks
from odradek.server.group.group_coordinator_metrics import GroupCoordinatorMetrics
from odradek.server.group.group_metadata import GroupMetadata
from odradek.server.group.group_metadata_manager import GroupMetadataManager
from odradek.server.group.group_state import GroupState
from odradek.server.group.offset_and_metadata import OffsetAndMetadata
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class OffsetMetadataManager:
    """Committed offsets of every group; the groups themselves are the GroupMetadataManager's."""

    def __init__(
        self,
        config: BrokerConfig,
        groups: GroupMetadataManager,
        log: CoordinatorLog,
        log_manager: LogManager,
        tasks: CoordinatorTasks,
        metrics: GroupCoordinatorMetrics,
        clock: Clock,
    ) -> None:
        self._config = config
        self._groups = groups
        self._log = log
        self._log_manager = log_manager
        self._tasks = tasks
        self._metrics = metrics
        self._clock = clock

    def replay(
        self,
        key: OffsetCommitKey,
        value: OffsetCommitValue | None,
        record_offset: int,
        partitions: dict[tuple[str, int], TopicPartition],
    ) -> None:
        """Apply one offset record read back at start-up (None: its tombstone).
        ``partitions`` shares one TopicPartition per partition across groups."""
        group = self._groups.get_or_create(key.group)
        tp = partitions.get((key.topic, key.partition))
        if tp is None:
            tp = partitions[(key.topic, key.partition)] = TopicPartition(key.topic, key.partition)
        if value is None:
            group.offsets.pop(tp, None)
            return
        group.offsets[tp] = OffsetAndMetadata(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, record_offset
        )

    # --- OffsetCommit ------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[OffsetCommitEntry],
    ) -> tuple[PartitionResult, ...]:
        """Commit ``offsets`` once they are durable. Generation -1 with no member id is a
        commit from a consumer outside group management, accepted while the group is empty."""
        started = time.monotonic()
        try:
            group = self._groups.get(group_id)
            if group is None:
                if generation_id >= 0:
                    raise IllegalGenerationError(
                        f"group {group_id} does not exist, so generation {generation_id} is over"
                    )
                group = self._groups.get_or_create(group_id)
            self._groups.validate_offset_commit(group, generation_id, member_id, group_instance_id)
        except KafkaError as error:
            info = ErrorInfo.of(error)
            return tuple(PartitionResult(o.topic, o.partition, info) for o in offsets)
        results: dict[int, ErrorInfo] = {}
        accepted: list[tuple[int, OffsetCommitEntry]] = []
        for index, entry in enumerate(offsets):
            try:
                self._validate_entry(entry)
            except KafkaError as error:
                results[index] = ErrorInfo.of(error)
                continue
            accepted.append((index, entry))
        if accepted:
            now = self._clock.milliseconds()
            pairs = [
                (
                    TopicPartition(entry.topic, entry.partition),
                    OffsetAndMetadata(
                        entry.committed_offset,
                        entry.committed_leader_epoch,
                        entry.committed_metadata or "",
                        now,
                    ),
                )
                for _, entry in accepted
            ]
            group.commits_in_flight += 1
            try:
                await asyncio.shield(self._tasks.spawn(group_id, self._store(group, pairs)))
            except KafkaError as error:
                info = ErrorInfo.of(coordinator_error(error))
                for index, _ in accepted:
                    results[index] = info
            else:
                for index, _ in accepted:
                    results[index] = NO_ERROR
                self._metrics.committed(time.monotonic() - started)
        self._groups.forget_if_unused(group_id)
        return tuple(
            PartitionResult(entry.topic, entry.partition, results[index])
            for index, entry in enumerate(offsets)
        )

    async def _store(
        self, group: GroupMetadata, offsets: list[tuple[TopicPartition, OffsetAndMetadata]]
    ) -> None:
        """Append the commit records, then (once durable) make the offsets visible. Of two
        values of one key the later record wins, whatever order the fsyncs answer in."""
        try:
            record_offsets = await self._log.append_offset_commits(group.group_id, offsets)
            for (tp, value), record_offset in zip(offsets, record_offsets, strict=True):
                current = group.offsets.get(tp)
                if current is None or current.record_offset < record_offset:
                    group.offsets[tp] = replace(value, record_offset=record_offset)
        finally:
            group.commits_in_flight -= 1  # counted by the caller, before this task started

    async def remove_offsets(
        self, group: GroupMetadata, partitions: Sequence[TopicPartition], group_too: bool = False
    ) -> None:
        """Tombstones for the group's offsets of ``partitions`` (and for the group itself),
        then forget those offsets, unless a commit newer than its tombstone came meanwhile."""
        record_offsets = await self._log.append_tombstones(group.group_id, partitions, group_too)
        for tp, record_offset in zip(partitions, record_offsets, strict=False):
            current = group.offsets.get(tp)
            if current is not None and current.record_offset < record_offset:
                del group.offsets[tp]

    def _validate_entry(self, entry: OffsetCommitEntry) -> None:
        metadata = entry.committed_metadata or ""
        if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
            raise OffsetMetadataTooLargeError(
                f"the metadata of {entry.topic}-{entry.partition} is over "
                f"offset.metadata.max.bytes={self._config.offset_metadata_max_bytes}"
            )
        if entry.topic == GROUP_METADATA_TOPIC_NAME or not self._partition_exists(
            entry.topic, entry.partition
        ):
            raise UnknownTopicOrPartitionError(f"{entry.topic}-{entry.partition} does not exist")

    def _partition_exists(self, topic: str, partition: int) -> bool:
        return (
            partition >= 0
            and len(topic.encode()) <= STRING_MAX_BYTES
            and TopicPartition(topic, partition) in set(self._log_manager.partitions(topic))
        )

    # --- OffsetFetch -------------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> OffsetFetchGroupResult:
        """The committed offsets of ``partitions`` (all the group has when None); -1 for a
        partition without one."""
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_in(GroupState.DEAD) else {}
        if partitions is None:
            wanted = sorted(offsets)
        else:
            wanted = [TopicPartition(topic, number) for topic, number in partitions]
        entries = []
        for tp in wanted:
            found = offsets.get(tp)
            if found is None:
                entries.append(OffsetFetchPartition(tp.topic, tp.partition))
            else:
                entries.append(
                    OffsetFetchPartition(
                        tp.topic, tp.partition, found.offset, found.leader_epoch, found.metadata
                    )
                )
        return OffsetFetchGroupResult(group_id, NO_ERROR, tuple(entries))

    # --- OffsetDelete and deleted topics -----------------------------------------------------

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorInfo, tuple[PartitionResult, ...]]:
        """OffsetDelete: drop committed offsets of topics the group does not subscribe to."""
        group = self._groups.get(group_id)
        try:
            if group is None or group.is_in(GroupState.DEAD):
                raise GroupIdNotFoundError(f"group {group_id} does not exist")
            if not group.is_in(GroupState.EMPTY) and group.protocol_type != "consumer":
                raise NonEmptyGroupError(f"group {group_id} is not empty")
        except KafkaError as error:
            return ErrorInfo.of(error), ()
        subscribed = set() if group.is_in(GroupState.EMPTY) else group.subscribed_topics()
        results: list[PartitionResult] = []
        deleted: list[TopicPartition] = []
        for topic, number in partitions:
            if subscribed is None or topic in subscribed:
                error = GroupSubscribedToTopicError(
                    f"group {group_id} is subscribed to topic {topic}"
                )
                results.append(PartitionResult(topic, number, ErrorInfo.of(error)))
                continue
            results.append(PartitionResult(topic, number, NO_ERROR))
            if TopicPartition(topic, number) in group.offsets:
                deleted.append(TopicPartition(topic, number))
        if deleted:
            try:
                await self.remove_offsets(group, deleted)
            except KafkaError as error:
                return ErrorInfo.of(coordinator_error(error)), ()
        return NO_ERROR, tuple(results)

    def topic_deleted(self, topic: str) -> None:
        """Tombstone every group's offsets of a deleted topic, in the background (Kafka's
        ``onPartitionsDeleted``); a topic created again under the name starts clean."""
        for group in self._groups.groups():
            gone = [tp for tp in list(group.offsets) if tp.topic == topic]
            if gone:
                self._tasks.spawn(group.group_id, self.remove_offsets(group, gone))

    # --- retention ---------------------------------------------------------------------------

    async def run_retention_checks(self) -> None:
        """Expire offsets every ``offsets.retention.check.interval.ms``, until cancelled."""
        interval = self._config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except Exception:
                logger.exception("expiring committed offsets failed")

    async def expire_offsets(self) -> int:
        """Tombstone the offsets of empty groups older than ``offsets.retention.minutes``,
        counted from when the group became empty (or the commit, if later); an empty group
        left without offsets is removed. The number of offsets expired."""
        now = self._clock.milliseconds()
        retention_ms = self._config.offsets_retention_minutes * 60_000
        expired_total = 0
        for group in self._groups.groups():
            if not group.is_in(GroupState.EMPTY):
                continue
            expired = [
                tp
                for tp, offset in group.offsets.items()
                if max(offset.commit_timestamp, group.current_state_timestamp) + retention_ms <= now
            ]
            remove_group = len(expired) == len(group.offsets)
            if not expired and not remove_group:
                continue
            await self.remove_offsets(group, expired, group_too=remove_group)
            expired_total += len(expired)
            if remove_group and group.is_in(GroupState.EMPTY) and not group.offsets:
                group.transition_to(GroupState.DEAD, now)
                self._groups.remove(group.group_id)
            logger.info(
                "group %s: %d committed offsets expired after offsets.retention.minutes=%d",
                group.group_id,
                len(expired),
                self._config.offsets_retention_minutes,
            )
        return expired_total
