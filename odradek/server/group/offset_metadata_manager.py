"""OffsetMetadataManager: the groups' committed offsets (Kafka's ``OffsetMetadataManager``).

OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete, the offsets of deleted topics,
and the offsets retention check (``offsets.retention.minutes``). A transaction's offsets
(TxnOffsetCommit, KIP-98/KIP-447) are written in the producer's transactional batch and held
pending until the transaction's marker settles them (:meth:`complete_transaction`). A commit
is answered once its records are fsync'ed in ``__consumer_offsets``, and the offsets served
change only then. Whether a member may commit is the membership side's call (the
GroupMetadataManager), as Kafka's classic group validates an offset commit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any

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
    UnstableOffsetCommitError,
)
from odradek.protocol.binary_fields import STRING_MAX_BYTES
from odradek.record.record_batch import NO_PRODUCER_ID
from odradek.server.coordinator_topic import coordinator_error
from odradek.server.group.coordinator_log import (
    GROUP_METADATA_TOPIC_NAME,
    CoordinatorLog,
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
from odradek.server.group.pending_transactional_offsets import (
    PendingTransactionalOffsets,
)
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)
OffsetPair = tuple[TopicPartition, OffsetAndMetadata]
"""A partition and the offset committed for it."""


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
        self._pending = PendingTransactionalOffsets()

    def replay(
        self,
        key: OffsetCommitKey,
        value: OffsetCommitValue | None,
        record_offset: int,
        partitions: dict[tuple[str, int], TopicPartition],
        producer_id: int = NO_PRODUCER_ID,
    ) -> None:
        """Apply one offset record read back at start-up (None: its tombstone, which also
        removes the pending transactional offsets before it). ``producer_id``: the
        transaction the record belongs to, whose marker is still to come. ``partitions``
        shares one TopicPartition per partition across groups."""
        group = self._groups.get_or_create(key.group)
        tp = partitions.get((key.topic, key.partition))
        if tp is None:
            tp = partitions[(key.topic, key.partition)] = TopicPartition(key.topic, key.partition)
        if value is None:
            group.offsets.pop(tp, None)
            self._pending.remove(key.group, tp, record_offset)
            return
        offset = OffsetAndMetadata(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, record_offset
        )
        if producer_id == NO_PRODUCER_ID:
            group.offsets[tp] = offset
        else:
            self._pending.put(producer_id, key.group, tp, offset)

    def replay_end_transaction_marker(
        self, producer_id: int, committed: bool, offsets_partition: int
    ) -> None:
        """Apply a COMMIT or ABORT marker read back from ``__consumer_offsets`` partition
        ``offsets_partition``."""
        self.complete_transaction(producer_id, {offsets_partition}, committed)

    def has_open_transactions(self, group_id: str) -> bool:
        """Whether a transaction holds offsets of the group not settled yet."""
        return self._pending.has_open_transactions(group_id)

    def pending_partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions the group has pending transactional offsets for."""
        return self._pending.partitions(group_id)

    def _forget_if_unused(self, group_id: str) -> None:
        """Drop a group a request created for nothing: one an open transaction holds
        offsets of stays."""
        if not self._pending.has_open_transactions(group_id):
            self._groups.forget_if_unused(group_id)

    # --- transactions ------------------------------------------------------------------------

    def complete_transaction(
        self, producer_id: int, offsets_partitions: set[int], committed: bool
    ) -> None:
        """``producer_id``'s transaction ended with a marker in ``offsets_partitions`` of
        ``__consumer_offsets``: its pending offsets of the groups there become committed
        (each unless a later record of the partition's offset is committed already, as
        Kafka keeps the most recent record), or are dropped."""
        completed = self._pending.complete(
            producer_id,
            lambda group_id: self._log.topic.partition_for(group_id) in offsets_partitions,
        )
        for group_id, offsets in completed:
            if committed:
                group = self._groups.get_or_create(group_id)
                for tp, value in offsets.items():
                    current = group.offsets.get(tp)
                    if current is None or current.record_offset < value.record_offset:
                        group.offsets[tp] = value
            else:
                self._forget_if_unused(group_id)
            logger.debug(
                "group %s: transaction of producer %d %s %d offsets",
                group_id,
                producer_id,
                "committed" if committed else "aborted",
                len(offsets),
            )

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[OffsetCommitEntry],
    ) -> tuple[PartitionResult, ...]:
        """TxnOffsetCommit: write ``offsets`` in ``producer_id``'s transactional batch and
        hold them pending until the transaction's marker. A member's generation is checked
        as Kafka checks it for a transaction (KIP-447): no REBALANCE_IN_PROGRESS, and a
        commit naming no member is accepted in any state (older clients name none)."""
        started = time.monotonic()
        try:
            group = self._committing_group(group_id, generation_id)
            group.validate_offset_commit(
                generation_id, member_id, group_instance_id, is_transactional=True
            )
        except KafkaError as error:
            info = ErrorInfo.of(error)
            return tuple(PartitionResult(o.topic, o.partition, info) for o in offsets)
        return await self._stored(
            group,
            offsets,
            started,
            lambda pairs: self._store_transactional(group, producer_id, producer_epoch, pairs),
        )

    async def _store_transactional(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: list[tuple[TopicPartition, OffsetAndMetadata]],
    ) -> None:
        """Append the transaction's commit records; they are pending from the moment they are
        in the log (as Kafka's coordinator replays a record as it writes it), so a marker
        appended after them, whose completion may run before this commit is answered, finds
        them."""

        def pending(record_offsets: list[int]) -> None:
            for (tp, value), record_offset in zip(offsets, record_offsets, strict=True):
                self._pending.put(
                    producer_id, group.group_id, tp, replace(value, record_offset=record_offset)
                )

        try:
            await self._log.append_offset_commits(
                group.group_id, offsets, producer_id, producer_epoch, pending
            )
        finally:
            group.commits_in_flight -= 1  # counted by the caller, before this task started

    def _accepted(
        self, offsets: Sequence[OffsetCommitEntry]
    ) -> tuple[dict[int, ErrorInfo], list[tuple[TopicPartition, OffsetAndMetadata]]]:
        """The entries' own checks: the refused ones' errors by index (the others are
        answered NO_ERROR), and the accepted ones as offsets to write, stamped now."""
        results: dict[int, ErrorInfo] = {}
        now = self._clock.milliseconds()
        pairs = []
        for index, entry in enumerate(offsets):
            try:
                self._validate_entry(entry)
            except KafkaError as error:
                results[index] = ErrorInfo.of(error)
                continue
            results[index] = NO_ERROR
            pairs.append(
                (
                    TopicPartition(entry.topic, entry.partition),
                    OffsetAndMetadata(
                        entry.committed_offset,
                        entry.committed_leader_epoch,
                        entry.committed_metadata or "",
                        now,
                    ),
                )
            )
        return results, pairs

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
            group = self._committing_group(group_id, generation_id)
            self._groups.validate_offset_commit(group, generation_id, member_id, group_instance_id)
        except KafkaError as error:
            info = ErrorInfo.of(error)
            return tuple(PartitionResult(o.topic, o.partition, info) for o in offsets)
        return await self._stored(group, offsets, started, lambda pairs: self._store(group, pairs))

    def _committing_group(self, group_id: str, generation_id: int) -> GroupMetadata:
        """The group a commit goes to, created for a commit from outside group management;
        ILLEGAL_GENERATION for a member's commit to a group that does not exist."""
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise IllegalGenerationError(
                    f"group {group_id} does not exist, so generation {generation_id} is over"
                )
            group = self._groups.get_or_create(group_id)
        return group

    async def _stored(
        self,
        group: GroupMetadata,
        offsets: Sequence[OffsetCommitEntry],
        started: float,
        store: Callable[[list[OffsetPair]], Coroutine[Any, Any, None]],
    ) -> tuple[PartitionResult, ...]:
        """The answer to a commit of ``offsets``: those accepted are written by ``store`` (a
        group task, finished even if the request is cancelled) and answered once durable;
        a failed write is every accepted partition's error, as Kafka maps it."""
        group_id = group.group_id
        results, pairs = self._accepted(offsets)
        if pairs:
            group.commits_in_flight += 1
            try:
                await asyncio.shield(self._tasks.spawn(group_id, store(pairs)))
            except KafkaError as error:
                info = ErrorInfo.of(coordinator_error(error))
                results = {i: info if r is NO_ERROR else r for i, r in results.items()}
            else:
                self._metrics.committed(time.monotonic() - started)
        self._forget_if_unused(group_id)
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
            self._pending.remove(group.group_id, tp, record_offset)

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
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None,
        require_stable: bool = False,
    ) -> OffsetFetchGroupResult:
        """The committed offsets of ``partitions`` (all the group has when None); -1 for a
        partition without one. With ``require_stable`` a partition an open transaction holds
        an offset for is answered UNSTABLE_OFFSET_COMMIT (KIP-447), so the consumer waits for
        the transaction to end."""
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_in(GroupState.DEAD) else {}
        if partitions is None:
            wanted = sorted(offsets)
        else:
            wanted = [TopicPartition(topic, number) for topic, number in partitions]
        entries = []
        for tp in wanted:
            found = offsets.get(tp)
            if require_stable and self._pending.has_pending(group_id, tp):
                unstable = UnstableOffsetCommitError(
                    f"group {group_id} has an offset of {tp} in a transaction not ended yet"
                )
                entries.append(
                    OffsetFetchPartition(tp.topic, tp.partition, error=ErrorInfo.of(unstable))
                )
            elif found is None:
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
            tp = TopicPartition(topic, number)
            if tp in group.offsets or self._pending.has_pending(group_id, tp):
                deleted.append(tp)
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
            held = set(group.offsets) | self._pending.partitions(group.group_id)
            gone = sorted(tp for tp in held if tp.topic == topic)
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
            pending = self._pending.partitions(group.group_id)
            expired = [
                tp
                for tp, offset in group.offsets.items()
                if max(offset.commit_timestamp, group.current_state_timestamp) + retention_ms <= now
                and tp not in pending  # Kafka keeps it while a transaction may replace it
            ]
            remove_group = len(expired) == len(group.offsets) and not pending
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
