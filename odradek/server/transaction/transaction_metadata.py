"""TransactionMetadata: one transactional id's state at its coordinator, and its transitions.

Every change is two steps, as in Kafka: ``prepare_*`` checks the transition is allowed and
returns the new state as a :class:`TxnTransitMetadata` (the value of the ``__transaction_state``
record to write), marking it pending so no other change starts; once the record is durable,
``complete_transition`` checks the transit against the current state once more and takes it.
A failed write calls ``abandon_transition`` instead, leaving the state as it was.

Transaction version 2 (KIP-890, what Kafka 4 clients use) bumps the producer epoch at every
commit or abort, and when the epoch would run out hands the producer a new producer id
(``next_producer_id``) with epoch 0 at the transaction's completion.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from odradek.errors import ProducerFencedError
from odradek.int_limits import INT16_MAX
from odradek.record.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_TIMESTAMP
from odradek.server.transaction.transaction_log import TransactionLogValue
from odradek.server.transaction.transaction_state import TransactionState
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

TRANSACTION_VERSION_2 = 2  # the first client transaction version that bumps epochs per txn

S = TransactionState


def is_epoch_exhausted(epoch: int) -> bool:
    """Whether ``epoch`` leaves no room for the coordinator to fence its producer: one epoch is
    always kept back for that."""
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """A transactional id's state as a transition would leave it."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp_ms: int
    last_update_timestamp_ms: int
    client_transaction_version: int

    @property
    def bumps_epochs(self) -> bool:
        return self.client_transaction_version >= TRANSACTION_VERSION_2

    def to_log_value(self) -> TransactionLogValue:
        """The ``__transaction_state`` record value holding this state."""
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.transaction_timeout_ms,
            state=self.state,
            partitions=frozenset() if self.state is S.EMPTY else self.partitions,
            last_update_timestamp_ms=self.last_update_timestamp_ms,
            start_timestamp_ms=self.start_timestamp_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )


class TransactionMetadata:
    """One transactional id's state (Kafka's ``TransactionMetadata``). Not thread-safe: the
    coordinator changes it from its event loop only."""

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        transaction_timeout_ms: int,
        *,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        state: TransactionState = S.EMPTY,
        partitions: frozenset[TopicPartition] = frozenset(),
        start_timestamp_ms: int = NO_TIMESTAMP,
        last_update_timestamp_ms: int = NO_TIMESTAMP,
        client_transaction_version: int = 0,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = state
        self.partitions = partitions
        self.start_timestamp_ms = start_timestamp_ms
        self.last_update_timestamp_ms = last_update_timestamp_ms
        self.client_transaction_version = client_transaction_version
        # The state a prepared transition moves to, until it completes or is abandoned.
        self.pending_state: TransactionState | None = None
        # A fence whose record could not be written: the next fence does not bump again (the
        # bumped epoch was never handed to anyone).
        self.has_failed_epoch_fence = False

    @classmethod
    def from_log_value(
        cls, transactional_id: str, value: TransactionLogValue
    ) -> TransactionMetadata:
        """The state a ``__transaction_state`` record holds, as loading rebuilds it."""
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
            state=value.state,
            partitions=value.partitions,
            start_timestamp_ms=value.start_timestamp_ms,
            last_update_timestamp_ms=value.last_update_timestamp_ms,
            client_transaction_version=value.client_transaction_version,
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, producer {self.producer_id} epoch "
            f"{self.producer_epoch}, {self.state.state_name}, pending "
            f"{self.pending_state.state_name if self.pending_state else None}, "
            f"{len(self.partitions)} partitions)"
        )

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def _current(self, state: TransactionState) -> TxnTransitMetadata:
        """The current state with ``state`` as its state: what a transition starts from."""
        return TxnTransitMetadata(
            producer_id=self.producer_id,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            transaction_timeout_ms=self.transaction_timeout_ms,
            state=state,
            partitions=self.partitions,
            start_timestamp_ms=self.start_timestamp_ms,
            last_update_timestamp_ms=self.last_update_timestamp_ms,
            client_transaction_version=self.client_transaction_version,
        )

    # --- preparing -------------------------------------------------------------------------

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current state, with nothing pending (an abort of it follows)."""
        return self._current(self.state)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to fence the producer of the open transaction (it is aborted next)."""
        if self.producer_epoch == INT16_MAX:
            logger.error(
                "transactional id %r: fencing producer %d at epoch %d, which must not happen",
                self.transactional_id,
                self.producer_id,
                self.producer_epoch,
            )
        fenced = self.has_failed_epoch_fence or self.producer_epoch == INT16_MAX
        epoch = self.producer_epoch if fenced else self.producer_epoch + 1
        return self._prepare(replace(self._current(S.PREPARE_EPOCH_FENCE), producer_epoch=epoch))

    def prepare_increment_producer_epoch(
        self, transaction_timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransitMetadata:
        """InitProducerId for a known transactional id: the next epoch (or, for a retry of a
        call that succeeded, the current one). Raises ProducerFencedError when the producer's
        expected epoch is neither."""
        if self.is_producer_epoch_exhausted:
            raise ValueError(f"no producer epoch left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"transactional id {self.transactional_id!r}: epoch {expected_epoch} is neither "
                f"the current epoch {self.producer_epoch} nor the previous "
                f"{self.last_producer_epoch}"
            )
        return self._prepare(
            replace(
                self._current(S.EMPTY),
                producer_epoch=epoch,
                last_producer_epoch=last_epoch,
                transaction_timeout_ms=transaction_timeout_ms,
                partitions=frozenset(),
                start_timestamp_ms=NO_TIMESTAMP,
                last_update_timestamp_ms=now_ms,
            )
        )

    def prepare_producer_id_rotation(
        self,
        new_producer_id: int,
        transaction_timeout_ms: int,
        now_ms: int,
        record_last_epoch: bool,
    ) -> TxnTransitMetadata:
        """A new producer id at epoch 0 (the epoch ran out, or the id is new to the producer)."""
        if self.has_pending_transaction:
            raise ValueError("cannot rotate producer ids while a transaction is still pending")
        return self._prepare(
            replace(
                self._current(S.EMPTY),
                producer_id=new_producer_id,
                producer_epoch=0,
                last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                transaction_timeout_ms=transaction_timeout_ms,
                partitions=frozenset(),
                start_timestamp_ms=NO_TIMESTAMP,
                last_update_timestamp_ms=now_ms,
            )
        )

    def prepare_add_partitions(
        self, added: frozenset[TopicPartition], now_ms: int, client_transaction_version: int
    ) -> TxnTransitMetadata:
        """AddPartitionsToTxn, AddOffsetsToTxn or a transaction version 2 produce: the
        transaction (opened now unless one is open) holds ``added`` too."""
        starts = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._prepare(
            replace(
                self._current(S.ONGOING),
                partitions=self.partitions | added,
                start_timestamp_ms=now_ms if starts else self.start_timestamp_ms,
                last_update_timestamp_ms=now_ms,
                client_transaction_version=client_transaction_version,
            )
        )

    def prepare_abort_or_commit(
        self,
        state: TransactionState,
        client_transaction_version: int,
        next_producer_id: int,
        now_ms: int,
        no_partition_added: bool,
    ) -> TxnTransitMetadata:
        """EndTxn (or the coordinator's own abort): PrepareCommit or PrepareAbort. Transaction
        version 2 bumps the epoch here, so markers carry an epoch no zombie holds."""
        current = self._current(state)
        if client_transaction_version >= TRANSACTION_VERSION_2:
            if self.producer_epoch == INT16_MAX and state is S.PREPARE_ABORT:
                logger.error(
                    "transactional id %r: aborting producer %d at epoch %d, which must not happen",
                    self.transactional_id,
                    self.producer_id,
                    self.producer_epoch,
                )
                epoch = self.producer_epoch
            else:
                epoch = self.producer_epoch + 1
            current = replace(
                current, producer_epoch=epoch, last_producer_epoch=self.producer_epoch
            )
        return self._prepare(
            replace(
                current,
                # Transaction version 2 may abort what never had a partition: its start is now.
                start_timestamp_ms=now_ms if no_partition_added else self.start_timestamp_ms,
                next_producer_id=next_producer_id,
                last_update_timestamp_ms=now_ms,
                client_transaction_version=client_transaction_version,
            )
        )

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """Every marker is written: CompleteCommit or CompleteAbort (with the new producer id
        at epoch 0 when transaction version 2 rotated it)."""
        self.has_failed_epoch_fence = False
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        current = self._current(state)
        if current.bumps_epochs and self.next_producer_id != NO_PRODUCER_ID:
            current = replace(current, producer_id=self.next_producer_id, producer_epoch=0)
        return self._prepare(
            replace(
                current,
                next_producer_id=NO_PRODUCER_ID,
                partitions=frozenset(),
                last_update_timestamp_ms=now_ms,
            )
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        """The transactional id expired: a tombstone removes it."""
        return self._prepare(replace(self._current(S.DEAD), partitions=frozenset()))

    def _prepare(self, transit: TxnTransitMetadata) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise ValueError(
                f"transactional id {self.transactional_id!r}: preparing {transit.state.state_name} "
                f"while {self.pending_state.state_name} is pending"
            )
        if transit.producer_id < 0:
            raise ValueError(f"illegal producer id {transit.producer_id}")
        if transit.state is not S.DEAD and transit.producer_epoch < 0:
            raise ValueError(f"illegal producer epoch {transit.producer_epoch}")
        if not transit.state.may_follow(self.state):
            raise ValueError(
                f"transactional id {self.transactional_id!r}: {transit.state.state_name} may not "
                f"follow {self.state.state_name}"
            )
        transit = replace(transit, previous_producer_id=self.producer_id)
        logger.debug(
            "transactional id %r: prepare %s -> %s",
            self.transactional_id,
            self.state.state_name,
            transit.state.state_name,
        )
        self.pending_state = transit.state
        return transit

    # --- completing ------------------------------------------------------------------------

    def abandon_transition(self) -> None:
        """The prepared transition's record could not be written: nothing changes."""
        self.pending_state = None

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Take ``transit`` once its record is durable; refuses one that does not follow from
        the current state as its prepare said it would."""
        target = self.pending_state
        if target is None:
            raise ValueError(
                f"transactional id {self.transactional_id!r}: completing a transition to "
                f"{transit.state.state_name} that was never prepared"
            )
        if target is not transit.state or not self._follows(transit):
            raise ValueError(
                f"transactional id {self.transactional_id!r}: the transition to {transit} does "
                f"not follow from {self!r}"
            )
        logger.debug(
            "transactional id %r: complete %s -> %s",
            self.transactional_id,
            self.state.state_name,
            transit.state.state_name,
        )
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.transaction_timeout_ms = transit.transaction_timeout_ms
        self.partitions = transit.partitions
        self.start_timestamp_ms = transit.start_timestamp_ms
        self.last_update_timestamp_ms = transit.last_update_timestamp_ms
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = transit.state

    def _follows(self, transit: TxnTransitMetadata) -> bool:
        state = transit.state
        same_timeout = transit.transaction_timeout_ms == self.transaction_timeout_ms
        if state is S.EMPTY:  # InitProducerId
            return (
                (transit.producer_epoch == self.producer_epoch or self._valid_epoch_bump(transit))
                and not transit.partitions
                and transit.start_timestamp_ms == NO_TIMESTAMP
            )
        if state is S.ONGOING:  # AddPartitionsToTxn
            return (
                self._valid_producer_epoch(transit)
                and transit.partitions >= self.partitions
                and same_timeout
            )
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # EndTxn
            empty_abort = (
                state is S.PREPARE_ABORT
                and transit.bumps_epochs
                and self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            )
            return (
                self._valid_producer_epoch(transit)
                and transit.partitions == self.partitions
                and same_timeout
                and (transit.start_timestamp_ms == self.start_timestamp_ms or empty_abort)
            )
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # the markers are written
            return (
                self._valid_producer_epoch(transit)
                and same_timeout
                and transit.start_timestamp_ms != NO_TIMESTAMP
            )
        # PrepareEpochFence is followed by PrepareAbort at once, never completed; Dead removes
        # the transactional id instead of completing.
        return False

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        if (
            transit.bumps_epochs
            and transit.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            and transit.producer_epoch == 0
        ):  # the producer id rotated as the transaction completed
            return (
                transit.last_producer_epoch == self.last_producer_epoch
                and transit.previous_producer_id == self.producer_id
            )
        if transit.bumps_epochs and transit.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return (
                transit.last_producer_epoch == self.producer_epoch
                and transit.producer_id == self.producer_id
            )
        return (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 or (
            transit.producer_epoch == 0 and transit.producer_id != self.producer_id
        )
