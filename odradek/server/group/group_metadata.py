"""GroupMetadata: one classic group's members, generation, chosen protocol and offsets
(Kafka's ``ClassicGroup``)."""

from __future__ import annotations

import asyncio
from collections import Counter

from odradek.errors import (
    CoordinatorNotAvailableError,
    CorruptRecordError,
    FencedInstanceIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from odradek.protocol.consumer_protocol import parse_subscription
from odradek.server.group.coordinator_records import GroupMetadataValue
from odradek.server.group.coordinator_results import UNKNOWN_MEMBER_ID, JoinGroupMember
from odradek.server.group.group_state import GroupState
from odradek.server.group.member_metadata import MemberMetadata, Protocols
from odradek.server.group.offset_and_metadata import OffsetAndMetadata
from odradek.topic_partition import TopicPartition

VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}
"""The states each state may be entered from (Kafka's transitions)."""


class GroupMetadata:
    """What the coordinator knows of one group. Mutated only on the event loop."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}
        self.static_members: dict[str, str] = {}
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.commits_in_flight = 0
        self.join_timer: asyncio.TimerHandle | None = None
        self.initial_delay_remaining_ms = 0
        self.in_initial_delay = False
        self.new_member_added = False

    @classmethod
    def from_record(
        cls,
        group_id: str,
        value: GroupMetadataValue,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        now_ms: int,
    ) -> GroupMetadata:
        """The group a GroupMetadata record read back at start-up describes, with the
        ``offsets`` loaded so far: Stable with its members, or Empty."""
        group = cls(group_id, now_ms)
        group.offsets = offsets
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        if value.current_state_timestamp >= 0:
            group.current_state_timestamp = value.current_state_timestamp
        for member in value.members:
            group.add(
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
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, "
            f"generation {self.generation_id}, {len(self.members)} members)"
        )

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise AssertionError(
                f"group {self.group_id} cannot go from {self.state.value} to {state.value}"
            )
        self.state = state
        self.current_state_timestamp = now_ms

    # --- members -----------------------------------------------------------------------------

    def validate_member(self, member_id: str, group_instance_id: str | None) -> MemberMetadata:
        """The member ``member_id``; FENCED_INSTANCE_ID when another member now holds its
        instance id, UNKNOWN_MEMBER_ID when there is no such member."""
        if group_instance_id is not None:
            holder = self.static_member_id(group_instance_id)
            if holder is not None and holder != member_id:
                raise FencedInstanceIdError(
                    f"instance {group_instance_id} of group {self.group_id} is now member "
                    f"{holder}, not {member_id}"
                )
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"group {self.group_id} has no member {member_id!r}")
        if group_instance_id is not None and member.group_instance_id != group_instance_id:
            raise FencedInstanceIdError(
                f"member {member_id} of group {self.group_id} is not instance {group_instance_id}"
            )
        return member

    def validate_offset_commit(
        self,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        is_transactional: bool = False,
    ) -> MemberMetadata | None:
        """Whether a commit may be made now (Kafka's classic ``validateOffsetCommit``): the
        committing member, or None for a commit from outside group management (generation
        -1, no member id), accepted while the group is Empty. A transactional commit
        (TxnOffsetCommit) naming no member is accepted in any state (its versions before 3
        name none), and is not refused while the group completes a rebalance."""
        if self.is_in(GroupState.DEAD):
            raise CoordinatorNotAvailableError(f"group {self.group_id} is being deleted")
        if generation_id < 0 and self.is_in(GroupState.EMPTY):
            return None
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id:
            if not is_transactional and self.is_in(GroupState.COMPLETING_REBALANCE):
                raise RebalanceInProgressError(f"group {self.group_id} is rebalancing")
            member = self.validate_member(member_id, group_instance_id)
            if generation_id != self.generation_id:
                raise IllegalGenerationError(
                    f"generation {generation_id} of group {self.group_id} is over; it is in "
                    f"generation {self.generation_id}"
                )
            return member
        if is_transactional:
            return None
        raise UnknownMemberIdError(
            f"group {self.group_id} has members: a commit without membership is refused"
        )

    def member_list(self) -> tuple[JoinGroupMember, ...]:
        """The members and their metadata for the chosen protocol (the leader's JoinGroup)."""
        protocol = self.protocol_name or ""
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def replace_static_member(
        self, group_instance_id: str, old_id: str, new_id: str
    ) -> MemberMetadata:
        """Give the member of ``group_instance_id`` the id ``new_id``; its old id is fenced."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [member for member in self.members.values() if not member.is_awaiting_join]

    def has_all_members_joined(self) -> bool:
        return (
            all(member.is_awaiting_join for member in self.members.values())
            and not self.pending_members
        )

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members: how long a rebalance waits."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_joined_leader(self) -> None:
        """Make a member that rejoined the leader if the current one did not."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.is_awaiting_join:
            return
        joined = next((m for m in self.members.values() if m.is_awaiting_join), None)
        if joined is not None:
            self.leader_id = joined.member_id
        elif leader is None:
            self.leader_id = next(iter(self.members), None)

    # --- protocols ---------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        candidates = set(members[0].protocol_names())
        for member in members[1:]:
            candidates &= set(member.protocol_names())
        return candidates

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        """Whether a member declaring these may join (Kafka's ``supportsProtocols``)."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The candidate protocol most members prefer (each votes for its first candidate);
        ties go to the one whose first voter joined first."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        order: dict[str, int] = {}
        for index, member in enumerate(self.members.values()):
            choice = next(name for name in member.protocol_names() if name in candidates)
            votes[choice] += 1
            order.setdefault(choice, index)
        return max(votes, key=lambda name: (votes[name], -order[name]))

    def subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to under the consumer protocol; None when they
        cannot be known (another protocol type, or metadata that does not parse)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(parse_subscription(member.metadata(self.protocol_name)).topics)
            except (CorruptRecordError, KeyError):
                return None
        return topics
