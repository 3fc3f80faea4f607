"""GroupState: where a classic group is in its rebalance cycle (Kafka's ``GroupState``)."""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    """Kafka's states and names.

    Empty: no members (offsets may remain). PreparingRebalance: waiting for the members to
    (re)join. CompletingRebalance: joined, waiting for the leader's assignment. Stable: every
    member has its assignment. Dead: deleted or expired, about to be forgotten.
    """

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def for_name(cls, name: str) -> GroupState | None:
        """The state of a ListGroups filter name (case-insensitive, as Kafka), else None."""
        for state in cls:
            if state.value.lower() == name.lower():
                return state
        return None
