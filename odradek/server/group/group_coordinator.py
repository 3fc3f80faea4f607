"""GroupCoordinator: Kafka's classic group protocol and committed offsets on one broker.

Members join (JoinGroup), the leader's assignment is handed out (SyncGroup), members stay
alive with Heartbeat and leave with LeaveGroup; offsets are committed and fetched; groups are
listed, described and deleted. The rules, states and error codes are Kafka's
(``kafka.coordinator.group.GroupCoordinator``). Methods take plain arguments under Kafka's
field names and return the values of :mod:`coordinator_results`, so any wire protocol can
call them. Everything runs on the event loop: a group is changed only between awaits, and a
parked JoinGroup or SyncGroup is a future its request handler awaits.

State is written to ``__consumer_offsets`` through the CoordinatorLog: an offset commit
is answered once its record is fsync'ed, and the in-memory offsets change only then; a
group's membership is written when a rebalance completes. At start-up the state is rebuilt
from the topic.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    KafkaStorageError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    RequestTimedOutError,
    UnknownMemberIdError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.binary_fields import STRING_MAX_BYTES
from odradek.server.group.coordinator_log import (
    GROUP_METADATA_TOPIC_NAME,
    CoordinatorLog,
    LoadedRecord,
)
from odradek.server.group.coordinator_records import (
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from odradek.server.group.coordinator_results import (
    NO_ERROR,
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    ErrorInfo,
    GroupDeletionResult,
    GroupListing,
    JoinGroupMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberIdentity,
    OffsetCommitEntry,
    OffsetFetchGroupResult,
    OffsetFetchPartition,
    PartitionResult,
    SyncGroupResult,
)
from odradek.server.group.group_coordinator_metrics import GroupCoordinatorMetrics
from odradek.server.group.group_metadata import GroupMetadata
from odradek.server.group.group_state import GroupState
from odradek.server.group.member_metadata import MemberMetadata
from odradek.server.group.offset_and_metadata import OffsetAndMetadata
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

Protocols = Sequence[tuple[str, bytes]]
T = TypeVar("T")
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


class GroupCoordinator:
    """Every group of this broker (it coordinates them all: it is the only broker)."""

    def __init__(
        self,
        config: BrokerConfig,
        manager: CoordinatorLog,
        log_manager: LogManager,
        metrics: GroupCoordinatorMetrics,
        clock: Clock,
    ) -> None:
        self._config = config
        self._manager = manager
        self._log_manager = log_manager
        self._metrics = metrics
        self._clock = clock
        self._groups: dict[str, GroupMetadata] = {}
        self._expiry_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- lifecycle ---------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the groups and their offsets from ``__consumer_offsets``. Blocking; run
        before :meth:`startup`, on a thread."""
        started = time.monotonic()
        partitions: dict[tuple[str, int], TopicPartition] = {}  # shared: groups share topics
        for record in self._manager.load():
            try:
                self._apply_loaded(record, partitions)
            except KafkaError as error:  # e.g. a topic name no topic may have
                logger.warning("skipping the record at offset %d: %s", record.offset, error)
        self._groups = {
            group_id: group
            for group_id, group in self._groups.items()
            if group.members or group.offsets or group.generation_id > 0
        }
        offsets = sum(len(group.offsets) for group in self._groups.values())
        summary = self._manager.load_summary
        seconds = time.monotonic() - started
        self._metrics.loaded(len(self._groups), offsets, seconds)
        if summary is not None and summary.partitions:
            logger.info(
                "loaded %d groups and %d committed offsets from %d records of %s in %.3f s",
                len(self._groups),
                offsets,
                summary.records,
                GROUP_METADATA_TOPIC_NAME,
                seconds,
            )

    def _apply_loaded(
        self, record: LoadedRecord, partitions: dict[tuple[str, int], TopicPartition]
    ) -> None:
        key = record.key
        group = self._groups.get(key.group)
        if group is None:
            group = self._groups[key.group] = GroupMetadata(key.group, self._clock.milliseconds())
        if isinstance(key, OffsetCommitKey):
            tp = partitions.get((key.topic, key.partition))
            if tp is None:
                tp = partitions[(key.topic, key.partition)] = TopicPartition(
                    key.topic, key.partition
                )
            if record.value is None:
                group.offsets.pop(tp, None)
            else:
                value = record.value
                assert isinstance(value, OffsetCommitValue)
                group.offsets[tp] = OffsetAndMetadata(
                    value.offset,
                    value.leader_epoch,
                    value.metadata,
                    value.commit_timestamp,
                    record.offset,
                )
            return
        if record.value is None:
            self._groups[key.group] = GroupMetadata(key.group, self._clock.milliseconds())
            self._groups[key.group].offsets = group.offsets
            return
        value = record.value
        assert isinstance(value, GroupMetadataValue)
        restored = GroupMetadata(key.group, self._clock.milliseconds())
        restored.offsets = group.offsets
        restored.generation_id = value.generation
        restored.protocol_type = value.protocol_type or None
        restored.protocol_name = value.protocol
        if value.current_state_timestamp >= 0:
            restored.current_state_timestamp = value.current_state_timestamp
        for member in value.members:
            restored.add(
                MemberMetadata(
                    member.member_id,
                    member.group_instance_id,
                    member.client_id,
                    member.client_host,
                    member.rebalance_timeout,
                    member.session_timeout,
                    value.protocol_type,
                    [(value.protocol or "", member.subscription)],
                    member.assignment,
                )
            )
        restored.leader_id = (
            value.leader if value.leader in restored.members else restored.leader_id
        )
        restored.state = STABLE if restored.members else EMPTY
        self._groups[key.group] = restored

    def startup(self) -> None:
        """Start the session timers of the members loaded and the offset expiry; on the loop."""
        for group in self._groups.values():
            for member in group.members.values():
                self._schedule_heartbeat(group, member)
        self._expiry_task = asyncio.get_running_loop().create_task(self._expire_periodically())

    async def shutdown(self) -> None:
        """Stop the timers and answer every parked JoinGroup and SyncGroup with
        NOT_COORDINATOR (the members will find the coordinator again), so in-flight
        requests end with the broker."""
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            await asyncio.gather(self._expiry_task, return_exceptions=True)
        gone = ErrorInfo.of(NotCoordinatorError("the coordinator is shutting down"))
        for group in self._groups.values():
            self._cancel_timers(group)
            for timer in group.pending_members.values():
                if timer is not None:
                    timer.cancel()
            for member in group.members.values():
                self._cancel_member_timer(member)
                if member.join_future is not None and not member.join_future.done():
                    member.join_future.set_result(JoinGroupResult(gone, member_id=member.member_id))
                if member.sync_future is not None and not member.sync_future.done():
                    member.sync_future.set_result(SyncGroupResult(gone))
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def groups(self) -> list[GroupMetadata]:
        """The groups known now (for metrics; safe to call from another thread)."""
        for _ in range(5):
            try:
                return list(self._groups.values())
            except RuntimeError:  # the loop changed the dict meanwhile
                continue
        return []

    # --- validation --------------------------------------------------------------------------

    def _check_group_id(self, group_id: str, allow_empty: bool) -> None:
        """Kafka refuses an empty group id for membership APIs; odradek also refuses ids
        whose UTF-8 form does not fit a ``__consumer_offsets`` key (32767 bytes)."""
        if not group_id and not allow_empty:
            raise InvalidGroupIdError("the group id must not be empty")
        if len(group_id.encode()) > STRING_MAX_BYTES:
            raise InvalidGroupIdError(
                f"the group id is {len(group_id.encode())} bytes; at most {STRING_MAX_BYTES}"
            )

    def _check_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> MemberMetadata:
        """The member ``member_id``; FENCED_INSTANCE_ID when another member now holds its
        instance id, UNKNOWN_MEMBER_ID when there is no such member."""
        if group_instance_id is not None:
            holder = group.static_member_id(group_instance_id)
            if holder is not None and holder != member_id:
                raise FencedInstanceIdError(
                    f"instance {group_instance_id} of group {group.group_id} is now member "
                    f"{holder}, not {member_id}"
                )
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"group {group.group_id} has no member {member_id!r}")
        if group_instance_id is not None and member.group_instance_id != group_instance_id:
            raise FencedInstanceIdError(
                f"member {member_id} of group {group.group_id} is not instance {group_instance_id}"
            )
        return member

    # --- JoinGroup ---------------------------------------------------------------------------

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
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        try:
            self._check_group_id(group_id, allow_empty=False)
            if not (
                self._config.group_min_session_timeout_ms
                <= session_timeout_ms
                <= self._config.group_max_session_timeout_ms
            ):
                raise InvalidSessionTimeoutError(
                    f"session.timeout.ms {session_timeout_ms} is outside the broker's "
                    f"[{self._config.group_min_session_timeout_ms}, "
                    f"{self._config.group_max_session_timeout_ms}] "
                    "(group.min.session.timeout.ms, group.max.session.timeout.ms)"
                )
            if len({name for name, _ in protocols}) != len(protocols):
                raise InconsistentGroupProtocolError(
                    f"member {member_id!r} of group {group_id} names a protocol twice"
                )
            group = self._groups.get(group_id)
            if member_id == UNKNOWN_MEMBER_ID:
                if group is None:
                    group = self._groups[group_id] = GroupMetadata(
                        group_id, self._clock.milliseconds()
                    )
                future = self._join_new_member(
                    group,
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
            else:
                if group is None:
                    raise UnknownMemberIdError(f"group {group_id} does not exist")
                future = self._join_current_member(
                    group,
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocol_type,
                    protocols,
                    reason,
                )
        except KafkaError as error:
            self._forget_if_unused(group_id)
            return JoinGroupResult(ErrorInfo.of(error), member_id=member_id)
        if isinstance(future, JoinGroupResult):
            return future
        if isinstance(future, asyncio.Task):
            # work of the coordinator's own (a static member's new id being stored): it must
            # finish even if this request is cancelled with its connection
            return await asyncio.shield(future)
        return await future

    def _join_new_member(
        self,
        group: GroupMetadata,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        reason: str | None,
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        if group.is_in(DEAD):
            raise CoordinatorNotAvailableError(f"group {group.group_id} is being deleted")
        if not group.supports_protocols(protocol_type, protocols):
            raise InconsistentGroupProtocolError(
                f"group {group.group_id} uses protocol type {group.protocol_type!r} with "
                f"protocols {sorted(group.candidate_protocols())}; the member offers "
                f"{protocol_type!r} with {[name for name, _ in protocols]}"
            )
        new_member_id = f"{client_id}-{uuid.uuid4()}"
        existing_static = group.static_member_id(group_instance_id)
        if existing_static is None and self._is_full(group):
            raise GroupMaxSizeReachedError(
                f"group {group.group_id} already has group.max.size="
                f"{self._config.group_max_size} members"
            )
        if group_instance_id is not None:
            if existing_static is not None:
                return self._replace_static_member(
                    group,
                    group_instance_id,
                    existing_static,
                    new_member_id,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocols,
                )
        elif require_known_member_id:
            loop = asyncio.get_running_loop()
            group.pending_members[new_member_id] = loop.call_later(
                session_timeout_ms / 1000, self._expire_pending, group, new_member_id
            )
            error = MemberIdRequiredError(
                f"join group {group.group_id} again with member id {new_member_id}"
            )
            return JoinGroupResult(ErrorInfo.of(error), member_id=new_member_id)
        member = MemberMetadata(
            new_member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
            is_new=True,
        )
        return self._add_member_and_rebalance(group, member, reason)

    def _forget_if_unused(self, group_id: str) -> None:
        """Drop a group a refused request created: no members, offsets or history, so bad
        requests under many group ids cost no memory."""
        group = self._groups.get(group_id)
        if (
            group is not None
            and group.is_in(EMPTY)
            and not group.members
            and not group.pending_members
            and not group.offsets
            and not group.commits_in_flight
            and group.generation_id == 0
        ):
            del self._groups[group_id]

    def _is_full(self, group: GroupMetadata) -> bool:
        return len(group.members) + len(group.pending_members) >= self._config.group_max_size

    def _join_current_member(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        reason: str | None,
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        if group.is_in(DEAD):
            raise CoordinatorNotAvailableError(f"group {group.group_id} is being deleted")
        if member_id in group.pending_members:
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            if len(group.members) >= self._config.group_max_size:
                raise GroupMaxSizeReachedError(
                    f"group {group.group_id} already has group.max.size="
                    f"{self._config.group_max_size} members"
                )
            if not group.supports_protocols(protocol_type, protocols):
                raise InconsistentGroupProtocolError(
                    f"group {group.group_id} has no protocol in common with member {member_id}"
                )
            member = MemberMetadata(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
                is_new=True,
            )
            return self._add_member_and_rebalance(group, member, reason)
        member = self._check_member(group, member_id, group_instance_id)
        if not group.supports_protocols(protocol_type, protocols):
            raise InconsistentGroupProtocolError(
                f"group {group.group_id} has no protocol in common with member {member_id}"
            )
        if group.is_in(PREPARING):
            return self._update_member_and_rebalance(
                group, member, rebalance_timeout_ms, session_timeout_ms, protocols, reason
            )
        if group.is_in(COMPLETING):
            if member.matches(protocols):
                return self._current_generation(group, member, include_members=True)
            return self._update_member_and_rebalance(
                group, member, rebalance_timeout_ms, session_timeout_ms, protocols, reason
            )
        if group.is_in(STABLE):
            if member.member_id == group.leader_id or not member.matches(protocols):
                return self._update_member_and_rebalance(
                    group, member, rebalance_timeout_ms, session_timeout_ms, protocols, reason
                )
            return self._current_generation(group, member, include_members=False)
        raise UnknownMemberIdError(f"group {group.group_id} has no member {member_id}")

    def _current_generation(
        self, group: GroupMetadata, member: MemberMetadata, include_members: bool
    ) -> JoinGroupResult:
        self._schedule_heartbeat(group, member)
        is_leader = member.member_id == group.leader_id
        return JoinGroupResult(
            NO_ERROR,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            False,
            member.member_id,
            self._member_list(group) if include_members and is_leader else (),
        )

    def _member_list(self, group: GroupMetadata) -> tuple[JoinGroupMember, ...]:
        protocol = group.protocol_name or ""
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in group.members.values()
        )

    def _replace_static_member(
        self,
        group: GroupMetadata,
        group_instance_id: str,
        old_member_id: str,
        new_member_id: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: Protocols,
    ) -> JoinGroupResult | asyncio.Future[JoinGroupResult]:
        """A static member rejoins with a new member id: the old id is fenced. A Stable group
        whose chosen protocol stays the same does not rebalance: the member gets the current
        generation back and its assignment from SyncGroup."""
        old = group.members[old_member_id]
        fenced = ErrorInfo.of(
            FencedInstanceIdError(
                f"instance {group_instance_id} of group {group.group_id} rejoined as "
                f"{new_member_id}"
            )
        )
        if old.join_future is not None and not old.join_future.done():
            old.join_future.set_result(JoinGroupResult(fenced, member_id=old_member_id))
        if old.sync_future is not None and not old.sync_future.done():
            old.sync_future.set_result(SyncGroupResult(fenced))
        self._cancel_member_timer(old)
        current_leader = group.leader_id
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.protocols = protocols
        member.join_future = None
        member.sync_future = None
        logger.info(
            "group %s: static member %s rejoined as %s (was %s)",
            group.group_id,
            group_instance_id,
            new_member_id,
            old_member_id,
        )
        if group.is_in(STABLE):
            if group.select_protocol() == group.protocol_name:
                self._schedule_heartbeat(group, member)
                answer = JoinGroupResult(
                    NO_ERROR,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    current_leader or "",
                    False,
                    new_member_id,
                    (),
                )
                return self._spawn(self._answer_once_stored(group, answer))
        # Otherwise a rebalance, also when CompletingRebalance: the leader may be assigning
        # partitions to the old member id, which the new one would never get.
        return self._update_member_and_rebalance(
            group, member, rebalance_timeout_ms, session_timeout_ms, protocols, None
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, reason: str | None
    ) -> asyncio.Future[JoinGroupResult]:
        member.join_future = asyncio.get_running_loop().create_future()
        group.add(member)
        if group.is_in(PREPARING) and group.in_initial_delay:
            group.new_member_added = True
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(
            group, f"member {member.member_id} joined" + (f" ({reason})" if reason else "")
        )
        future = member.join_future
        self._maybe_complete_join(group)
        return future

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: Protocols,
        reason: str | None,
    ) -> asyncio.Future[JoinGroupResult]:
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.protocols = protocols
        if member.join_future is not None and not member.join_future.done():
            # A second JoinGroup of one member: the first gets nothing more (Kafka answers it
            # with UNKNOWN_MEMBER_ID); the new one waits in its place.
            member.join_future.set_result(
                JoinGroupResult(
                    ErrorInfo.of(RebalanceInProgressError("superseded by a newer JoinGroup")),
                    member_id=member.member_id,
                )
            )
        member.join_future = asyncio.get_running_loop().create_future()
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(
            group,
            f"member {member.member_id} rejoined" + (f" ({reason})" if reason else ""),
        )
        future = member.join_future
        self._maybe_complete_join(group)
        return future

    # --- rebalances --------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(COMPLETING):
            self._reset_and_propagate_assignment_error(
                group, RebalanceInProgressError(f"group {group.group_id} is rebalancing")
            )
        was_empty = group.is_in(EMPTY)
        group.transition_to(PREPARING, self._clock.milliseconds())
        self._metrics.rebalance_started(group.group_id)
        loop = asyncio.get_running_loop()
        self._cancel_timers(group)
        if was_empty:
            delay = self._config.group_initial_rebalance_delay_ms
            group.in_initial_delay = delay > 0
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            if delay > 0:
                group.join_timer = loop.call_later(delay / 1000, self._initial_delay_done, group)
        else:
            group.in_initial_delay = False
            group.join_timer = loop.call_later(
                group.rebalance_timeout_ms() / 1000, self._complete_join, group
            )
        logger.info(
            "group %s: preparing to rebalance in generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
        )

    def _initial_delay_done(self, group: GroupMetadata) -> None:
        """group.initial.rebalance.delay.ms passed: wait one more delay while members keep
        arriving (within the rebalance timeout), else complete the join."""
        group.join_timer = None
        delay = self._config.group_initial_rebalance_delay_ms
        remaining = group.initial_delay_remaining_ms
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            group.initial_delay_remaining_ms = max(remaining - delay, 0)
            group.join_timer = asyncio.get_running_loop().call_later(
                step / 1000, self._initial_delay_done, group
            )
            return
        group.in_initial_delay = False
        self._complete_join(group)

    def _maybe_complete_join(self, group: GroupMetadata) -> None:
        if group.is_in(PREPARING) and not group.in_initial_delay and group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """The join phase ends: members that did not rejoin (dynamic ones) are dropped, the
        generation moves on, the joined members are answered (the leader with everyone's
        metadata)."""
        if not group.is_in(PREPARING):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.in_initial_delay = False
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._remove_member(group, member, "did not rejoin in time")
        group.maybe_elect_joined_leader()
        now = self._clock.milliseconds()
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition_to(EMPTY, now)
            logger.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._spawn_store(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(COMPLETING, now)
        logger.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        group.join_timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._sync_expired, group, group.generation_id
        )
        members = self._member_list(group)
        for member in group.members.values():
            member.is_new = False
            if member.join_future is None or member.join_future.done():
                continue
            member.join_future.set_result(
                JoinGroupResult(
                    NO_ERROR,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    False,
                    member.member_id,
                    members if member.member_id == group.leader_id else (),
                )
            )
            member.join_future = None
            self._schedule_heartbeat(group, member)

    def _sync_expired(self, group: GroupMetadata, generation_id: int) -> None:
        """The rebalance timeout passed in CompletingRebalance: members that never sent their
        SyncGroup (the leader among them, if it did not) are removed and the group rebalances,
        so the others do not wait for ever."""
        group.join_timer = None
        if not group.is_in(COMPLETING) or group.generation_id != generation_id:
            return
        for member in list(group.members.values()):
            if member.sync_future is None:
                logger.info(
                    "group %s: member %s sent no SyncGroup within its rebalance timeout",
                    group.group_id,
                    member.member_id,
                )
                self._remove_member(group, member, "it sent no SyncGroup in time")
        self._prepare_rebalance(group, "members did not sync in time")

    def _reset_and_propagate_assignment_error(
        self, group: GroupMetadata, error: KafkaError
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_future is not None and not member.sync_future.done():
                member.sync_future.set_result(SyncGroupResult(ErrorInfo.of(error)))
            member.sync_future = None

    # --- SyncGroup ---------------------------------------------------------------------------

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
            self._check_group_id(group_id, allow_empty=False)
            group = self._groups.get(group_id)
            if group is None or group.is_in(DEAD):
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            member = self._check_member(group, member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} of group {group_id} is over; it is in "
                    f"generation {group.generation_id}"
                )
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                raise InconsistentGroupProtocolError(
                    f"group {group_id} uses {group.protocol_type}/{group.protocol_name}, not "
                    f"{protocol_type}/{protocol_name}"
                )
            if group.is_in(EMPTY):
                raise UnknownMemberIdError(f"group {group_id} is empty")
            if group.is_in(PREPARING):
                raise RebalanceInProgressError(f"group {group_id} is rebalancing")
            self._schedule_heartbeat(group, member)
            if group.is_in(STABLE):
                return self._sync_result(group, member)
            future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
            member.sync_future = future
            if member_id == group.leader_id:
                self._spawn(self._complete_sync(group, dict(assignments)))
        except KafkaError as error:
            return SyncGroupResult(ErrorInfo.of(error))
        return await future

    def _sync_result(self, group: GroupMetadata, member: MemberMetadata) -> SyncGroupResult:
        return SyncGroupResult(
            NO_ERROR, group.protocol_type, group.protocol_name, member.assignment
        )

    async def _complete_sync(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        """The leader's assignment: write the group durably, then answer every member."""
        generation = group.generation_id
        for member_id, member in group.members.items():
            member.assignment = bytes(assignments.get(member_id, b""))
        try:
            await self._manager.store_group(group)
        except KafkaError as error:
            logger.warning("group %s: storing the assignment failed: %s", group.group_id, error)
            if group.is_in(COMPLETING) and group.generation_id == generation:
                self._reset_and_propagate_assignment_error(
                    group, UnknownServerError(f"storing group {group.group_id} failed: {error}")
                )
                self._prepare_rebalance(group, "storing the assignment failed")
            return
        if not (group.is_in(COMPLETING) and group.generation_id == generation):
            return
        group.transition_to(STABLE, self._clock.milliseconds())
        self._cancel_timers(group)
        self._metrics.rebalance_completed(group.group_id)
        for member in group.members.values():
            if member.sync_future is not None and not member.sync_future.done():
                member.sync_future.set_result(self._sync_result(group, member))
            member.sync_future = None
        logger.info("group %s: generation %d is stable", group.group_id, generation)

    # --- Heartbeat ---------------------------------------------------------------------------

    async def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorInfo:
        try:
            self._check_group_id(group_id, allow_empty=False)
            group = self._groups.get(group_id)
            if group is None:
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            if group.is_in(DEAD):
                raise CoordinatorNotAvailableError(f"group {group_id} is being deleted")
            if group.is_in(EMPTY):
                raise UnknownMemberIdError(f"group {group_id} is empty")
            member = self._check_member(group, member_id, group_instance_id)
            # The generation first, in every state (Kafka's order): a member a generation
            # behind learns that, not only that a rebalance is on.
            if generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} of group {group_id} is over; it is in "
                    f"generation {group.generation_id}"
                )
            self._schedule_heartbeat(group, member)
            if group.is_in(PREPARING):
                raise RebalanceInProgressError(f"group {group_id} is rebalancing: rejoin")
        except KafkaError as error:
            return ErrorInfo.of(error)
        return NO_ERROR

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """(Re)start the member's session timer."""
        self._cancel_member_timer(member)
        member.heartbeat_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._session_expired, group, member
        )

    def _session_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.is_awaiting_join or member.is_awaiting_sync:
            # A member whose JoinGroup or SyncGroup is parked is alive: it waits for others.
            self._schedule_heartbeat(group, member)
            return
        logger.info(
            "group %s: member %s expired after session.timeout.ms=%d",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member, "its session expired")

    def _expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        if group.pending_members.pop(member_id, "gone") != "gone":
            self._maybe_complete_join(group)

    def _cancel_member_timer(self, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _cancel_timers(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    # --- LeaveGroup --------------------------------------------------------------------------

    async def leave_group(
        self, group_id: str, members: Sequence[MemberIdentity]
    ) -> LeaveGroupResult:
        """Remove the members named (batched leave, v3+): each gets its own outcome."""
        try:
            self._check_group_id(group_id, allow_empty=False)
            group = self._groups.get(group_id)
            if group is None or group.is_in(DEAD):
                raise UnknownMemberIdError(f"group {group_id} does not exist")
        except KafkaError as error:
            return LeaveGroupResult(ErrorInfo.of(error))
        results = []
        for identity in members:
            try:
                self._leave(group, identity)
                error = NO_ERROR
            except KafkaError as failure:
                error = ErrorInfo.of(failure)
            results.append(LeaveMemberResult(identity.member_id, identity.group_instance_id, error))
        return LeaveGroupResult(NO_ERROR, tuple(results))

    def _leave(self, group: GroupMetadata, identity: MemberIdentity) -> None:
        member_id = identity.member_id
        if identity.group_instance_id is not None and member_id == UNKNOWN_MEMBER_ID:
            found = group.static_member_id(identity.group_instance_id)
            if found is None:
                raise UnknownMemberIdError(
                    f"group {group.group_id} has no instance {identity.group_instance_id}"
                )
            member_id = found
        if member_id in group.pending_members:
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            self._maybe_complete_join(group)
            return
        member = self._check_member(group, member_id, identity.group_instance_id)
        logger.info("group %s: member %s left", group.group_id, member_id)
        self._remove_member_and_update_group(group, member, "it left the group")

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata, why: str) -> None:
        self._cancel_member_timer(member)
        group.remove(member.member_id)
        error = UnknownMemberIdError(f"member {member.member_id} was removed: {why}")
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(
                JoinGroupResult(ErrorInfo.of(error), member_id=member.member_id)
            )
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncGroupResult(ErrorInfo.of(error)))

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, why: str
    ) -> None:
        self._remove_member(group, member, why)
        if group.is_in(STABLE, COMPLETING):
            self._prepare_rebalance(group, f"member {member.member_id} left: {why}")
        elif group.is_in(PREPARING):
            self._maybe_complete_join(group)

    # --- offsets -----------------------------------------------------------------------------

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
            self._check_group_id(group_id, allow_empty=True)
            group = self._groups.get(group_id)
            if group is None:
                if generation_id >= 0:
                    raise IllegalGenerationError(
                        f"group {group_id} does not exist, so generation {generation_id} is over"
                    )
                group = self._groups[group_id] = GroupMetadata(group_id, self._clock.milliseconds())
            self._validate_commit(group, generation_id, member_id, group_instance_id)
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
            values = [
                OffsetAndMetadata(
                    entry.committed_offset,
                    entry.committed_leader_epoch,
                    entry.committed_metadata or "",
                    now,
                )
                for _, entry in accepted
            ]
            pairs = [
                (TopicPartition(e.topic, e.partition), v)
                for (_, e), v in zip(accepted, values, strict=True)
            ]
            group.commits_in_flight += 1
            try:
                await asyncio.shield(self._spawn(self._store_offsets(group, pairs)))
            except KafkaError as error:
                info = ErrorInfo.of(_coordinator_error(error))
                for index, _ in accepted:
                    results[index] = info
            else:
                for index, _ in accepted:
                    results[index] = NO_ERROR
                self._metrics.committed(time.monotonic() - started)
        self._forget_if_unused(group_id)
        return tuple(
            PartitionResult(entry.topic, entry.partition, results[index])
            for index, entry in enumerate(offsets)
        )

    async def _store_offsets(
        self, group: GroupMetadata, offsets: list[tuple[TopicPartition, OffsetAndMetadata]]
    ) -> None:
        try:
            await self._manager.store_offsets(group, offsets)
        finally:
            group.commits_in_flight -= 1  # counted by the caller, before this task started

    def _validate_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> None:
        if group.is_in(DEAD):
            raise CoordinatorNotAvailableError(f"group {group.group_id} is being deleted")
        if generation_id < 0 and group.is_in(EMPTY):
            return
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id:
            if group.is_in(COMPLETING):
                raise RebalanceInProgressError(f"group {group.group_id} is rebalancing")
            member = self._check_member(group, member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} of group {group.group_id} is over; it is in "
                    f"generation {group.generation_id}"
                )
            self._schedule_heartbeat(group, member)
            return
        raise UnknownMemberIdError(
            f"group {group.group_id} has members: a commit without membership is refused"
        )

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

    def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> OffsetFetchGroupResult:
        """The committed offsets of ``partitions`` (all the group has when None); -1 for a
        partition without one."""
        try:
            self._check_group_id(group_id, allow_empty=True)
        except KafkaError as error:
            return OffsetFetchGroupResult(group_id, ErrorInfo.of(error))
        group = self._groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_in(DEAD) else {}
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

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> tuple[ErrorInfo, tuple[PartitionResult, ...]]:
        """OffsetDelete: drop committed offsets of topics the group does not subscribe to."""
        try:
            self._check_group_id(group_id, allow_empty=False)
            group = self._groups.get(group_id)
            if group is None or group.is_in(DEAD):
                raise GroupIdNotFoundError(f"group {group_id} does not exist")
            if not group.is_in(EMPTY) and group.protocol_type != "consumer":
                raise NonEmptyGroupError(f"group {group_id} is not empty")
        except KafkaError as error:
            return ErrorInfo.of(error), ()
        subscribed = set() if group.is_in(EMPTY) else group.subscribed_topics()
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
                await self._manager.remove_offsets(group, deleted)
            except KafkaError as error:
                return ErrorInfo.of(_coordinator_error(error)), ()
        return NO_ERROR, tuple(results)

    def topic_deleted(self, topic: str) -> None:
        """Tombstone every group's offsets of a deleted topic, in the background (Kafka's
        ``handleDeletedPartitions``); a topic created again under the name starts clean."""
        for group in self.groups():
            gone = [tp for tp in list(group.offsets) if tp.topic == topic]
            if gone:
                self._spawn(self._manager.remove_offsets(group, gone))

    # --- expiry ------------------------------------------------------------------------------

    async def _expire_periodically(self) -> None:
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
        for group in list(self._groups.values()):
            if not group.is_in(EMPTY):
                continue
            expired = [
                tp
                for tp, offset in group.offsets.items()
                if max(offset.commit_timestamp, group.current_state_timestamp) + retention_ms <= now
            ]
            remove_group = len(expired) == len(group.offsets)
            if not expired and not remove_group:
                continue
            await self._manager.remove_offsets(group, expired, group_too=remove_group)
            expired_total += len(expired)
            if remove_group and group.is_in(EMPTY) and not group.offsets:
                group.transition_to(DEAD, now)
                self._groups.pop(group.group_id, None)
            logger.info(
                "group %s: %d committed offsets expired after offsets.retention.minutes=%d",
                group.group_id,
                len(expired),
                self._config.offsets_retention_minutes,
            )
        return expired_total

    # --- groups ------------------------------------------------------------------------------

    def list_groups(self, states_filter: Iterable[str] = ()) -> tuple[GroupListing, ...]:
        """Every group (in one of ``states_filter`` when it names any; case-insensitive)."""
        wanted = {name.lower() for name in states_filter}
        return tuple(
            GroupListing(group.group_id, group.protocol_type or "", group.state.value)
            for group in sorted(self._groups.values(), key=lambda g: g.group_id)
            if not group.is_in(DEAD) and (not wanted or group.state.value.lower() in wanted)
        )

    def describe_group(self, group_id: str) -> DescribedGroup:
        """A group's state, protocol and members; an unknown group is described as Dead."""
        try:
            self._check_group_id(group_id, allow_empty=True)
        except KafkaError as error:
            return DescribedGroup(group_id, ErrorInfo.of(error))
        group = self._groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id, NO_ERROR)
        stable = group.is_in(STABLE)
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return DescribedGroup(
            group_id,
            NO_ERROR,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    async def delete_groups(self, group_ids: Sequence[str]) -> tuple[GroupDeletionResult, ...]:
        """Delete empty groups: tombstones for their offsets and metadata, then forgotten."""
        results = []
        for group_id in group_ids:
            try:
                self._check_group_id(group_id, allow_empty=True)
                group = self._groups.get(group_id)
                if group is None or group.is_in(DEAD):
                    raise GroupIdNotFoundError(f"group {group_id} does not exist")
                if not group.is_in(EMPTY):
                    raise NonEmptyGroupError(
                        f"group {group_id} is {group.state.value} with {len(group.members)} members"
                    )
                group.transition_to(DEAD, self._clock.milliseconds())
                try:
                    await self._manager.remove_offsets(group, list(group.offsets), group_too=True)
                except KafkaError:
                    group.state = EMPTY
                    raise
                self._groups.pop(group_id, None)
                logger.info("group %s deleted", group_id)
                results.append(GroupDeletionResult(group_id, NO_ERROR))
            except KafkaError as error:
                results.append(
                    GroupDeletionResult(group_id, ErrorInfo.of(_coordinator_error(error)))
                )
        return tuple(results)

    # --- storing groups ----------------------------------------------------------------------

    async def _answer_once_stored(
        self, group: GroupMetadata, answer: JoinGroupResult
    ) -> JoinGroupResult:
        """``answer`` once the group's record (a static member's new id) is durable, as Kafka
        does: answered earlier, a power cut could bring the instance back under its old id
        and fence the member holding the new one. NOT_COORDINATOR if it cannot be stored
        (the member finds the coordinator again and rejoins)."""
        try:
            await self._manager.store_group(group)
        except KafkaError as error:
            logger.warning(
                "group %s: storing member %s failed: %s", group.group_id, answer.member_id, error
            )
            failed = NotCoordinatorError(
                f"the new member id of group {group.group_id} could not be stored: {error}"
            )
            return JoinGroupResult(ErrorInfo.of(failed), member_id=answer.member_id)
        return answer

    def _spawn_store(self, group: GroupMetadata) -> None:
        """Write the group's metadata in the background (an empty generation): nobody waits
        on it, a failure is logged."""
        self._spawn(self._manager.store_group(group))

    def _spawn(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``work`` to its end even if the request that started it goes away."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("group coordinator background work failed: %s", task.exception())


def _coordinator_error(error: KafkaError) -> KafkaError:
    """What a failed write to ``__consumer_offsets`` means to a client (Kafka's mapping):
    a timeout or storage failure is COORDINATOR_NOT_AVAILABLE (retriable); the rest is kept."""
    if isinstance(error, KafkaStorageError | RequestTimedOutError | UnknownTopicOrPartitionError):
        return CoordinatorNotAvailableError(error.message)
    return error
