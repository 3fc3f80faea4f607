"""GroupMetadataManager: the classic groups and their membership (Kafka's
``GroupMetadataManager``, for classic groups).

The groups this broker coordinates; JoinGroup, SyncGroup, Heartbeat and LeaveGroup with
Kafka's rules, states and error codes, static members included; whether a member may
commit offsets; ListGroups and DescribeGroups. Rebalances and their timers are the
ClassicGroupRebalancer's; committed offsets are the OffsetMetadataManager's. Everything runs
on the event loop: a group is changed only between awaits, and a parked JoinGroup or
SyncGroup is a future its request handler awaits.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from odradek.server.group.classic_group_rebalancer import ClassicGroupRebalancer
from odradek.server.group.coordinator_records import GroupMetadataKey, GroupMetadataValue
from odradek.server.group.coordinator_results import (
    NO_ERROR,
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    ErrorInfo,
    GroupListing,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberIdentity,
    SyncGroupResult,
)
from odradek.server.group.coordinator_tasks import CoordinatorTasks
from odradek.server.group.group_metadata import GroupMetadata
from odradek.server.group.group_state import GroupState
from odradek.server.group.member_metadata import MemberMetadata, Protocols

logger = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


class GroupMetadataManager:
    """Every classic group of this broker (it coordinates them all: it is the only broker)."""

    def __init__(
        self,
        config: BrokerConfig,
        rebalancer: ClassicGroupRebalancer,
        tasks: CoordinatorTasks,
        clock: Clock,
    ) -> None:
        self._config = config
        self._rebalancer = rebalancer
        self._tasks = tasks
        self._clock = clock
        self._groups: dict[str, GroupMetadata] = {}

    # --- the groups --------------------------------------------------------------------------

    def get(self, group_id: str) -> GroupMetadata | None:
        """The group ``group_id``, if this broker knows it."""
        return self._groups.get(group_id)

    def get_or_create(self, group_id: str) -> GroupMetadata:
        """The group ``group_id``, created Empty if unknown."""
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = GroupMetadata(group_id, self._clock.milliseconds())
        return group

    def remove(self, group_id: str) -> None:
        """Forget a group that is Dead (deleted, or expired with its last offsets)."""
        self._groups.pop(group_id, None)

    def forget_if_unused(self, group_id: str) -> None:
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

    def groups(self) -> list[GroupMetadata]:
        """The groups known now (for metrics; safe to call from another thread)."""
        for _ in range(5):
            try:
                return list(self._groups.values())
            except RuntimeError:  # the loop changed the dict meanwhile
                continue
        return []

    # --- loading and lifecycle ---------------------------------------------------------------

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        """Apply one group record read back at start-up (None: its tombstone); the offsets
        loaded for the group so far are kept."""
        offsets = self.get_or_create(key.group).offsets
        if value is None:
            group = GroupMetadata(key.group, self._clock.milliseconds())
            group.offsets = offsets
        else:
            group = GroupMetadata.from_record(key.group, value, offsets, self._clock.milliseconds())
        self._groups[key.group] = group

    def drop_unused_after_load(self, has_open_transactions: Callable[[str], bool]) -> None:
        """Forget the groups the records left without members, offsets or generation (and
        without offsets an open transaction holds)."""
        self._groups = {
            group_id: group
            for group_id, group in self._groups.items()
            if group.members
            or group.offsets
            or group.generation_id > 0
            or has_open_transactions(group_id)
        }

    def startup(self) -> None:
        """Start the session timers of the members loaded; on the loop."""
        for group in self._groups.values():
            for member in group.members.values():
                self._rebalancer.schedule_heartbeat(group, member)

    def shutdown(self) -> None:
        """Stop the timers and answer every parked JoinGroup and SyncGroup with
        NOT_COORDINATOR (the members will find the coordinator again)."""
        gone = ErrorInfo.of(NotCoordinatorError("the coordinator is shutting down"))
        for group in self._groups.values():
            self._rebalancer.cancel_timers(group)
            for timer in group.pending_members.values():
                if timer is not None:
                    timer.cancel()
            for member in group.members.values():
                self._rebalancer.cancel_member_timer(member)
                if member.join_future is not None and not member.join_future.done():
                    member.join_future.set_result(JoinGroupResult(gone, member_id=member.member_id))
                if member.sync_future is not None and not member.sync_future.done():
                    member.sync_future.set_result(SyncGroupResult(gone))

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
                future = self._join_new_member(
                    self.get_or_create(group_id),
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
            self.forget_if_unused(group_id)
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
                session_timeout_ms / 1000, self._rebalancer.expire_pending, group, new_member_id
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
        )
        return self._rebalancer.add_member_and_rebalance(group, member, reason)

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
            )
            return self._rebalancer.add_member_and_rebalance(group, member, reason)
        member = group.validate_member(member_id, group_instance_id)
        if not group.supports_protocols(protocol_type, protocols):
            raise InconsistentGroupProtocolError(
                f"group {group.group_id} has no protocol in common with member {member_id}"
            )
        if group.is_in(PREPARING):
            return self._rebalancer.update_member_and_rebalance(
                group, member, rebalance_timeout_ms, session_timeout_ms, protocols, reason
            )
        if group.is_in(COMPLETING):
            if member.matches(protocols):
                return self._current_generation(group, member, include_members=True)
            return self._rebalancer.update_member_and_rebalance(
                group, member, rebalance_timeout_ms, session_timeout_ms, protocols, reason
            )
        if group.is_in(STABLE):
            if member.member_id == group.leader_id or not member.matches(protocols):
                return self._rebalancer.update_member_and_rebalance(
                    group, member, rebalance_timeout_ms, session_timeout_ms, protocols, reason
                )
            return self._current_generation(group, member, include_members=False)
        raise UnknownMemberIdError(f"group {group.group_id} has no member {member_id}")

    def _current_generation(
        self, group: GroupMetadata, member: MemberMetadata, include_members: bool
    ) -> JoinGroupResult:
        self._rebalancer.schedule_heartbeat(group, member)
        is_leader = member.member_id == group.leader_id
        return JoinGroupResult(
            NO_ERROR,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            False,
            member.member_id,
            group.member_list() if include_members and is_leader else (),
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
        self._rebalancer.cancel_member_timer(old)
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
                self._rebalancer.schedule_heartbeat(group, member)
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
                return self._tasks.spawn(
                    group.group_id, self._rebalancer.answer_once_stored(group, answer)
                )
        # Otherwise a rebalance, also when CompletingRebalance: the leader may be assigning
        # partitions to the old member id, which the new one would never get.
        return self._rebalancer.update_member_and_rebalance(
            group, member, rebalance_timeout_ms, session_timeout_ms, protocols, None
        )

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
            group = self._groups.get(group_id)
            if group is None or group.is_in(DEAD):
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            member = group.validate_member(member_id, group_instance_id)
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
            self._rebalancer.schedule_heartbeat(group, member)
            if group.is_in(STABLE):
                return self._rebalancer.sync_result(group, member)
            future: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
            member.sync_future = future
            if member_id == group.leader_id:
                self._tasks.spawn(
                    group_id, self._rebalancer.complete_sync(group, dict(assignments))
                )
        except KafkaError as error:
            return SyncGroupResult(ErrorInfo.of(error))
        return await future

    # --- Heartbeat ---------------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorInfo:
        """A member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""
        try:
            group = self._groups.get(group_id)
            if group is None:
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            if group.is_in(DEAD):
                raise CoordinatorNotAvailableError(f"group {group_id} is being deleted")
            if group.is_in(EMPTY):
                raise UnknownMemberIdError(f"group {group_id} is empty")
            member = group.validate_member(member_id, group_instance_id)
            # The generation first, in every state (Kafka's order): a member a generation
            # behind learns that, not only that a rebalance is on.
            if generation_id != group.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} of group {group_id} is over; it is in "
                    f"generation {group.generation_id}"
                )
            self._rebalancer.schedule_heartbeat(group, member)
            if group.is_in(PREPARING):
                raise RebalanceInProgressError(f"group {group_id} is rebalancing: rejoin")
        except KafkaError as error:
            return ErrorInfo.of(error)
        return NO_ERROR

    # --- LeaveGroup --------------------------------------------------------------------------

    def leave_group(self, group_id: str, members: Sequence[MemberIdentity]) -> LeaveGroupResult:
        """Remove the members named (batched leave, v3+): each gets its own outcome."""
        try:
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
            self._rebalancer.maybe_complete_join(group)
            return
        member = group.validate_member(member_id, identity.group_instance_id)
        logger.info("group %s: member %s left", group.group_id, member_id)
        self._rebalancer.remove_member_and_update_group(group, member, "it left the group")

    # --- offset commits ----------------------------------------------------------------------

    def validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> None:
        """Whether this member may commit offsets now (the group's rules); a member's
        commit also counts as its heartbeat."""
        member = group.validate_offset_commit(generation_id, member_id, group_instance_id)
        if member is not None:
            self._rebalancer.schedule_heartbeat(group, member)

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
