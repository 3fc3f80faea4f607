"""TransactionState: the states of a transactional id at its coordinator, as Kafka names them.

The id is what ``__transaction_state`` records store (TransactionLogValue's status); the name is
what DescribeTransactions and ListTransactions show. Each state says which states may lead to it,
so a transition the coordinator did not expect is refused rather than written.
"""

from __future__ import annotations

import enum


class TransactionState(enum.Enum):
    """A transactional id's state (Kafka's ``TransactionState``)."""

    # No transaction open: AddPartitionsToTxn or AddOffsetsToTxn opens one (Ongoing); under
    # transaction version 2 an EndTxn abort is allowed too (the client may not know the state).
    EMPTY = (0, "Empty", True)
    # A transaction is open: EndTxn prepares its commit or abort.
    ONGOING = (1, "Ongoing", False)
    # The commit is decided (written) and its markers are being written.
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    # The abort is decided and its markers are being written.
    PREPARE_ABORT = (3, "PrepareAbort", False)
    # Every partition has its COMMIT marker.
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    # Every partition has its ABORT marker.
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    # The transactional id expired and is being removed (a tombstone follows).
    DEAD = (6, "Dead", False)
    # A new producer instance fenced the old one: the epoch is being bumped, and the open
    # transaction is aborted next.
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, state_name: str, expiration_allowed: bool) -> None:
        self.id = state_id
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS[self]

    def may_follow(self, previous: TransactionState) -> bool:
        """Whether a transactional id in ``previous`` may move to this state."""
        return previous in _VALID_PREVIOUS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        try:
            return _BY_ID[state_id]
        except KeyError:
            raise ValueError(f"unknown transaction state id {state_id}") from None

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state Kafka's tools call ``name`` (``Ongoing``), or None."""
        return _BY_NAME.get(name)


_BY_ID = {state.id: state for state in TransactionState}
_BY_NAME = {state.state_name: state for state in TransactionState}
_S = TransactionState
_COMPLETE = (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset((_S.EMPTY, *_COMPLETE)),
    _S.ONGOING: frozenset((_S.ONGOING, _S.EMPTY, *_COMPLETE)),
    _S.PREPARE_COMMIT: frozenset((_S.ONGOING,)),
    _S.PREPARE_ABORT: frozenset((_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, *_COMPLETE)),
    _S.COMPLETE_COMMIT: frozenset((_S.PREPARE_COMMIT,)),
    _S.COMPLETE_ABORT: frozenset((_S.PREPARE_ABORT,)),
    _S.DEAD: frozenset((_S.EMPTY, *_COMPLETE)),
    _S.PREPARE_EPOCH_FENCE: frozenset((_S.ONGOING,)),
}
