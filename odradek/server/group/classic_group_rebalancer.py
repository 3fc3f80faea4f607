"""ClassicGroupRebalancer: drives a classic group through its rebalances (Kafka's
``GroupMetadataManager`` does this for classic groups in ``prepareRebalance``,
``completeClassicGroupJoin`` and the member heartbeat timers).

A rebalance goes PreparingRebalance (members rejoin; the join timer, and on a group that was
Empty the ``group.initial.rebalance.delay.ms`` wait) -> CompletingRebalance (the joined
members are answered, the leader with everyone's metadata; the sync timer) -> Stable (the
leader's assignment is written durably, then handed out). Each member's session timer
removes it when it stops heartbeating. Everything runs on the event loop.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    KafkaError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownServerError,
)
from odradek.server.group.coordinator_log import CoordinatorLog
from odradek.server.group.coordinator_results import (
    NO_ERROR,
    ErrorInfo,
    JoinGroupResult,
    SyncGroupResult,
)
from odradek.server.group.coordinator_tasks import CoordinatorTasks
from odradek.server.group.group_coordinator_metrics import GroupCoordinatorMetrics
from odradek.server.group.group_metadata import GroupMetadata
from odradek.server.group.group_state import GroupState
from odradek.server.group.member_metadata import MemberMetadata, Protocols

logger = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)


class ClassicGroupRebalancer:
    """The rebalance state machine and timers of classic groups; knows no group registry."""

    def __init__(
        self,
        config: BrokerConfig,
        log: CoordinatorLog,
        tasks: CoordinatorTasks,
        metrics: GroupCoordinatorMetrics,
        clock: Clock,
    ) -> None:
        self._config = config
        self._log = log
        self._tasks = tasks
        self._metrics = metrics
        self._clock = clock

    # --- members joining ---------------------------------------------------------------------

    def add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, reason: str | None
    ) -> asyncio.Future[JoinGroupResult]:
        """Add a new member and rebalance; the future is its JoinGroup's answer."""
        member.join_future = asyncio.get_running_loop().create_future()
        group.add(member)
        if group.is_in(PREPARING) and group.in_initial_delay:
            group.new_member_added = True
        self.schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(
            group, f"member {member.member_id} joined" + (f" ({reason})" if reason else "")
        )
        future = member.join_future
        self.maybe_complete_join(group)
        return future

    def update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: Protocols,
        reason: str | None,
    ) -> asyncio.Future[JoinGroupResult]:
        """A known member rejoins (with new timeouts or protocols): rebalance."""
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
        self.schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(
            group,
            f"member {member.member_id} rejoined" + (f" ({reason})" if reason else ""),
        )
        future = member.join_future
        self.maybe_complete_join(group)
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
        self.cancel_timers(group)
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

    def maybe_complete_join(self, group: GroupMetadata) -> None:
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
        members = group.member_list()
        for member in group.members.values():
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
            self.schedule_heartbeat(group, member)

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

    # --- completing a sync -------------------------------------------------------------------

    def sync_result(self, group: GroupMetadata, member: MemberMetadata) -> SyncGroupResult:
        """What a member's SyncGroup gets once its group is Stable: its assignment."""
        return SyncGroupResult(
            NO_ERROR, group.protocol_type, group.protocol_name, member.assignment
        )

    async def complete_sync(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        """The leader's assignment: write the group durably, then answer every member."""
        generation = group.generation_id
        for member_id, member in group.members.items():
            member.assignment = bytes(assignments.get(member_id, b""))
        try:
            await self._log.append_group_metadata(group)
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
        self.cancel_timers(group)
        self._metrics.rebalance_completed(group.group_id)
        for member in group.members.values():
            if member.sync_future is not None and not member.sync_future.done():
                member.sync_future.set_result(self.sync_result(group, member))
            member.sync_future = None
        logger.info("group %s: generation %d is stable", group.group_id, generation)

    # --- session timers ----------------------------------------------------------------------

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """(Re)start the member's session timer."""
        self.cancel_member_timer(member)
        member.heartbeat_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._session_expired, group, member
        )

    def _session_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.is_awaiting_join or member.is_awaiting_sync:
            # A member whose JoinGroup or SyncGroup is parked is alive: it waits for others.
            self.schedule_heartbeat(group, member)
            return
        logger.info(
            "group %s: member %s expired after session.timeout.ms=%d",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self.remove_member_and_update_group(group, member, "its session expired")

    def expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        """A member id handed out by MEMBER_ID_REQUIRED was never used to join in time."""
        if group.pending_members.pop(member_id, "gone") != "gone":
            self.maybe_complete_join(group)

    def cancel_member_timer(self, member: MemberMetadata) -> None:
        """Stop the member's session timer."""
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def cancel_timers(self, group: GroupMetadata) -> None:
        """Stop the group's join or sync timer."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    # --- members leaving ---------------------------------------------------------------------

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata, why: str) -> None:
        self.cancel_member_timer(member)
        group.remove(member.member_id)
        error = UnknownMemberIdError(f"member {member.member_id} was removed: {why}")
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(
                JoinGroupResult(ErrorInfo.of(error), member_id=member.member_id)
            )
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncGroupResult(ErrorInfo.of(error)))

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, why: str
    ) -> None:
        """Remove ``member`` (its parked requests get UNKNOWN_MEMBER_ID) and rebalance."""
        self._remove_member(group, member, why)
        if group.is_in(STABLE, COMPLETING):
            self._prepare_rebalance(group, f"member {member.member_id} left: {why}")
        elif group.is_in(PREPARING):
            self.maybe_complete_join(group)

    # --- storing the group -------------------------------------------------------------------

    async def answer_once_stored(
        self, group: GroupMetadata, answer: JoinGroupResult
    ) -> JoinGroupResult:
        """``answer`` once the group's record (a static member's new id) is durable, as Kafka
        does: answered earlier, a power cut could bring the instance back under its old id
        and fence the member holding the new one. NOT_COORDINATOR if it cannot be stored
        (the member finds the coordinator again and rejoins)."""
        try:
            await self._log.append_group_metadata(group)
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
        self._tasks.spawn(group.group_id, self._log.append_group_metadata(group))
