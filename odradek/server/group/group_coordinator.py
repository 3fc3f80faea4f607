"""GroupCoordinator: what the group request handlers call (Kafka's ``GroupCoordinatorService``
and ``GroupCoordinatorShard`` in one, as this broker coordinates every group).

It validates group ids, as Kafka's service does, and hands each request to the manager that
owns it, as Kafka 4 splits them: membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
ListGroups, DescribeGroups) to the GroupMetadataManager, whose ClassicGroupRebalancer runs
the rebalances; committed offsets (OffsetCommit, OffsetFetch, OffsetDelete, retention) to
the OffsetMetadataManager; DeleteGroups takes both. TxnOffsetCommit writes a transaction's
offsets, which the transaction coordinator settles through :meth:`handle_transaction_completion`
once its marker is written. At start-up it replays the records and transaction markers of
``__consumer_offsets`` (read through the CoordinatorLog) into the two managers. Methods
take plain arguments under Kafka's field names and return the values of
:mod:`coordinator_results`, so any wire protocol can call them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    GroupIdNotFoundError,
    InvalidGroupIdError,
    KafkaError,
    NonEmptyGroupError,
)
from odradek.protocol.binary_fields import STRING_MAX_BYTES
from odradek.server.coordinator_topic import coordinator_error
from odradek.server.group.classic_group_rebalancer import ClassicGroupRebalancer
from odradek.server.group.coordinator_log import (
    GROUP_METADATA_TOPIC_NAME,
    CoordinatorLog,
    LoadedMarker,
    LoadedRecord,
)
from odradek.server.group.coordinator_records import (
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from odradek.server.group.coordinator_results import (
    NO_ERROR,
    DescribedGroup,
    ErrorInfo,
    GroupDeletionResult,
    GroupListing,
    JoinGroupResult,
    LeaveGroupResult,
    MemberIdentity,
    OffsetCommitEntry,
    OffsetFetchGroupResult,
    PartitionResult,
    SyncGroupResult,
)
from odradek.server.group.coordinator_tasks import CoordinatorTasks
from odradek.server.group.group_coordinator_metrics import GroupCoordinatorMetrics
from odradek.server.group.group_metadata import GroupMetadata
from odradek.server.group.group_metadata_manager import GroupMetadataManager
from odradek.server.group.group_state import GroupState
from odradek.server.group.member_metadata import Protocols
from odradek.server.group.offset_metadata_manager import OffsetMetadataManager
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

TransactionVerifier = Callable[
    [str, int, int, Sequence[TopicPartition], bool],
    Awaitable[Mapping[TopicPartition, KafkaError | None]],
]
"""The transaction coordinator's check that a partition is part of a producer's ongoing
transaction, adding it when asked (KIP-890): ``(transactional_id, producer_id,
producer_epoch, partitions, implicit_add)`` to an error or None per partition (the
``TransactionCoordinator.verify_or_add_partitions`` of the transaction coordinator)."""


def check_group_id(group_id: str, allow_empty: bool) -> None:
    """Kafka refuses an empty group id for membership APIs; odradek also refuses ids whose
    UTF-8 form does not fit a ``__consumer_offsets`` key (32767 bytes)."""
    if not group_id and not allow_empty:
        raise InvalidGroupIdError("the group id must not be empty")
    if len(group_id.encode()) > STRING_MAX_BYTES:
        raise InvalidGroupIdError(
            f"the group id is {len(group_id.encode())} bytes; at most {STRING_MAX_BYTES}"
        )


class GroupCoordinator:
    """Every group of this broker: membership and committed offsets, written to
    ``__consumer_offsets`` through one CoordinatorLog."""

    def __init__(
        self,
        config: BrokerConfig,
        log: CoordinatorLog,
        log_manager: LogManager,
        metrics: GroupCoordinatorMetrics,
        clock: Clock,
        verify_transaction: TransactionVerifier | None = None,
    ) -> None:
        """``verify_transaction``: how a TxnOffsetCommit's ``__consumer_offsets`` partition is
        checked against (or added to) the producer's transaction before its offsets are
        written; None while no transaction coordinator runs (nothing is checked then)."""
        self._log = log
        self.verify_transaction = verify_transaction
        self._metrics = metrics
        self._clock = clock
        self._tasks = CoordinatorTasks()
        rebalancer = ClassicGroupRebalancer(config, log, self._tasks, metrics, clock)
        self._groups = GroupMetadataManager(config, rebalancer, self._tasks, clock)
        self._offsets = OffsetMetadataManager(
            config, self._groups, log, log_manager, self._tasks, metrics, clock
        )
        self._retention_task: asyncio.Task[None] | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the groups and their offsets from ``__consumer_offsets``. Blocking; run
        before :meth:`startup`, on a thread."""
        started = time.monotonic()
        partitions: dict[tuple[str, int], TopicPartition] = {}  # shared: groups share topics
        for record in self._log.load():
            try:
                self._replay(record, partitions)
            except KafkaError as error:  # e.g. a topic name no topic may have
                logger.warning(
                    "skipping the record at offset %d of %s: %s",
                    record.offset,
                    GROUP_METADATA_TOPIC_NAME,
                    error,
                )
        self._groups.drop_unused_after_load(self._offsets.has_open_transactions)
        groups = self._groups.groups()
        offsets = sum(len(group.offsets) for group in groups)
        summary = self._log.load_summary
        seconds = time.monotonic() - started
        self._metrics.loaded(len(groups), offsets, seconds)
        if summary is not None and summary.partitions:
            logger.info(
                "loaded %d groups and %d committed offsets from %d records of %s in %.3f s",
                len(groups),
                offsets,
                summary.records,
                GROUP_METADATA_TOPIC_NAME,
                seconds,
            )

    def _replay(
        self,
        record: LoadedRecord | LoadedMarker,
        partitions: dict[tuple[str, int], TopicPartition],
    ) -> None:
        """One record to the manager that owns its kind (Kafka's shard ``replay``); a
        transaction marker settles the transaction's pending offsets (Kafka's
        ``replayEndTransactionMarker``)."""
        if isinstance(record, LoadedMarker):
            self._offsets.replay_end_transaction_marker(
                record.producer_id, record.committed, record.partition
            )
            return
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self._offsets.replay(key, value, record.offset, partitions, record.producer_id)
        else:
            assert value is None or isinstance(value, GroupMetadataValue)
            self._groups.replay(key, value)

    def startup(self) -> None:
        """Start the session timers of the members loaded and the offsets retention check;
        on the loop."""
        self._groups.startup()
        self._retention_task = asyncio.get_running_loop().create_task(
            self._offsets.run_retention_checks()
        )

    async def shutdown(self) -> None:
        """Stop the timers and answer every parked JoinGroup and SyncGroup with
        NOT_COORDINATOR, so in-flight requests end with the broker; then wait for the
        writes under way."""
        if self._retention_task is not None:
            self._retention_task.cancel()
            await asyncio.gather(self._retention_task, return_exceptions=True)
        self._groups.shutdown()
        await self._tasks.wait_all()

    def groups(self) -> list[GroupMetadata]:
        """The groups known now (for metrics; safe to call from another thread)."""
        return self._groups.groups()

    # --- membership --------------------------------------------------------------------------

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        reason: str | None = None,
    ) -> JoinGroupResult:
        """Join (or rejoin) ``group_id``; waits until the rebalance completes.

        ``rebalance_timeout_ms`` -1 means the session timeout (JoinGroup v0).
        """
        try:
            check_group_id(group_id, allow_empty=False)
        except KafkaError as error:
            return JoinGroupResult(ErrorInfo.of(error), member_id=member_id)
        return await self._groups.join_group(
            group_id,
            member_id,
            group_instance_id,
            require_known_member_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
            reason,
        )

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> SyncGroupResult:
        """Hand out the leader's assignment; a follower waits for it."""
        try:
            check_group_id(group_id, allow_empty=False)
        except KafkaError as error:
            return SyncGroupResult(ErrorInfo.of(error))
        return await self._groups.sync_group(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
        )

    async def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorInfo:
        """A member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""
        try:
            check_group_id(group_id, allow_empty=False)
        except KafkaError as error:
            return ErrorInfo.of(error)
        return self._groups.heartbeat(group_id, member_id, group_instance_id, generation_id)

    async def leave_group(
        self, group_id: str, members: Sequence[MemberIdentity]
    ) -> LeaveGroupResult:
        """Remove the members named (batched leave, v3+): each gets its own outcome."""
        try:
            check_group_id(group_id, allow_empty=False)
        except KafkaError as error:
            return LeaveGroupResult(ErrorInfo.of(error))
        return self._groups.leave_group(group_id, members)

    # --- offsets -----------------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[OffsetCommitEntry],
    ) -> tuple[PartitionResult, ...]:
        """Commit ``offsets`` once they are durable."""
        try:
            check_group_id(group_id, allow_empty=True)
        except KafkaError as error:
            info = ErrorInfo.of(error)
            return tuple(PartitionResult(o.topic, o.partition, info) for o in offsets)
        return await self._offsets.commit_offsets(
            group_id, generation_id, member_id, group_instance_id, offsets
        )

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[tuple[str, int]] | None,
        require_stable: bool = False,
    ) -> OffsetFetchGroupResult:
        """The committed offsets of ``partitions`` (all the group has when None); with
        ``require_stable``, UNSTABLE_OFFSET_COMMIT for those a transaction holds (KIP-447)."""
        try:
            check_group_id(group_id, allow_empty=True)
        except KafkaError as error:
            return OffsetFetchGroupResult(group_id, ErrorInfo.of(error))
        return self._offsets.fetch_offsets(group_id, partitions, require_stable)

    # --- transactions ------------------------------------------------------------------------

    async def commit_transactional_offsets(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Sequence[OffsetCommitEntry],
        implicit_add: bool = False,
    ) -> tuple[PartitionResult, ...]:
        """TxnOffsetCommit: the group's ``__consumer_offsets`` partition must be part of the
        producer's transaction (AddOffsetsToTxn; with ``implicit_add``, TxnOffsetCommit v5+,
        it is added now, KIP-890); then ``offsets`` are written in the producer's
        transactional batch and held pending until the transaction ends."""
        try:
            check_group_id(group_id, allow_empty=False)
            await self._verify_transaction(
                transactional_id, group_id, producer_id, producer_epoch, implicit_add
            )
        except KafkaError as error:
            info = ErrorInfo.of(coordinator_error(error))
            return tuple(PartitionResult(o.topic, o.partition, info) for o in offsets)
        return await self._offsets.commit_transactional_offsets(
            group_id,
            producer_id,
            producer_epoch,
            generation_id,
            member_id,
            group_instance_id,
            offsets,
        )

    async def _verify_transaction(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        implicit_add: bool,
    ) -> None:
        if self.verify_transaction is None:
            return
        await self._log.topic.ensure()
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, self._log.topic.partition_for(group_id))
        errors = await self.verify_transaction(
            transactional_id, producer_id, producer_epoch, (tp,), implicit_add
        )
        error = errors.get(tp)
        if error is not None:
            raise error

    def handle_transaction_completion(
        self, producer_id: int, offsets_partitions: set[int], committed: bool
    ) -> None:
        """The transaction coordinator wrote ``producer_id``'s COMMIT or ABORT marker to
        ``offsets_partitions`` of ``__consumer_offsets``: the transaction's pending offsets
        of the groups there become committed, or are dropped (Kafka's
        ``scheduleHandleTxnCompletion``). On the loop."""
        self._offsets.complete_transaction(producer_id, offsets_partitions, committed)

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorInfo, tuple[PartitionResult, ...]]:
        """OffsetDelete: drop committed offsets of topics the group does not subscribe to."""
        try:
            check_group_id(group_id, allow_empty=False)
        except KafkaError as error:
            return ErrorInfo.of(error), ()
        return await self._offsets.delete_offsets(group_id, partitions)

    def topic_deleted(self, topic: str) -> None:
        """Tombstone every group's offsets of a deleted topic, in the background."""
        self._offsets.topic_deleted(topic)

    async def expire_offsets(self) -> int:
        """One offsets retention check now; the number of offsets expired."""
        return await self._offsets.expire_offsets()

    # --- groups ------------------------------------------------------------------------------

    def list_groups(self, states_filter: Iterable[str] = ()) -> tuple[GroupListing, ...]:
        """Every group (in one of ``states_filter`` when it names any; case-insensitive)."""
        return self._groups.list_groups(states_filter)

    def describe_group(self, group_id: str) -> DescribedGroup:
        """A group's state, protocol and members; an unknown group is described as Dead."""
        try:
            check_group_id(group_id, allow_empty=True)
        except KafkaError as error:
            return DescribedGroup(group_id, ErrorInfo.of(error))
        return self._groups.describe_group(group_id)

    async def delete_groups(self, group_ids: Sequence[str]) -> tuple[GroupDeletionResult, ...]:
        """Delete empty groups: tombstones for their offsets and metadata in one write, then
        the groups are forgotten (Kafka's shard ``deleteGroups``)."""
        results = []
        for group_id in group_ids:
            try:
                check_group_id(group_id, allow_empty=True)
                group = self._groups.get(group_id)
                if group is None or group.is_in(GroupState.DEAD):
                    raise GroupIdNotFoundError(f"group {group_id} does not exist")
                if not group.is_in(GroupState.EMPTY):
                    raise NonEmptyGroupError(
                        f"group {group_id} is {group.state.value} with {len(group.members)} members"
                    )
                group.transition_to(GroupState.DEAD, self._clock.milliseconds())
                # Kafka's deleteAllOffsets: the committed offsets and those transactions
                # hold, one tombstone each, so a later COMMIT brings none of them back.
                pending = self._offsets.pending_partitions(group_id) - set(group.offsets)
                gone = list(group.offsets) + sorted(pending)
                try:
                    await self._offsets.remove_offsets(group, gone, group_too=True)
                except KafkaError:
                    group.state = GroupState.EMPTY
                    raise
                self._groups.remove(group_id)
                logger.info("group %s deleted", group_id)
                results.append(GroupDeletionResult(group_id, NO_ERROR))
            except KafkaError as error:
                results.append(
                    GroupDeletionResult(group_id, ErrorInfo.of(coordinator_error(error)))
                )
        return tuple(results)
