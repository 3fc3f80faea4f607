"""TransactionCoordinator: what the transaction request handlers call (Kafka's
``TransactionCoordinator``).

InitProducerId with a transactional id gives the id its producer id and the next epoch; an
instance that finds a transaction open fences its predecessor (PrepareEpochFence: the epoch
is bumped and the open transaction aborted) and is told CONCURRENT_TRANSACTIONS, so it retries
once the abort is done. AddPartitionsToTxn and AddOffsetsToTxn (or, under transaction version 2,
the Produce that writes to a partition: KIP-890) open a transaction and add partitions; EndTxn
decides it (PrepareCommit/PrepareAbort, durable before the client is answered), and the
TransactionMarkerChannelManager ends it on its partitions. A background task aborts
transactions open longer than their timeout; another removes transactional ids idle longer
than transactional.id.expiration.ms. Every change is written to ``__transaction_state``
through the TransactionStateManager before it is taken. Methods take plain arguments under
Kafka's names and raise the KafkaError Kafka answers.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
)
from odradek.int_limits import INT16_MAX
from odradek.record.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.transaction import transaction_test_stop
from odradek.server.transaction.transaction_coordinator_metrics import (
    TransactionCoordinatorMetrics,
)
from odradek.server.transaction.transaction_marker_channel_manager import (
    TransactionMarkerChannelManager,
)
from odradek.server.transaction.transaction_metadata import (
    TRANSACTION_VERSION_2,
    TransactionMetadata,
    TxnTransitMetadata,
)
from odradek.server.transaction.transaction_state import TransactionState
from odradek.server.transaction.transaction_state_manager import (
    TRANSACTION_STATE_TOPIC_NAME,
    TransactionStateManager,
)
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

S = TransactionState
TRANSACTION_VERSION_0 = 0
"""The client transaction version of a transaction opened by AddPartitionsToTxn (version 1
of the protocol: no epoch bump per transaction)."""

# Why a coordinator-initiated abort happened (metrics, logs).
ABORT_BY_TIMEOUT, ABORT_BY_FENCE = "timeout", "fence"


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class TransactionListing:
    """One transaction as ListTransactions shows it."""

    transactional_id: str
    producer_id: int
    state: TransactionState


class TransactionCoordinator:
    """Every transactional id of this broker."""

    def __init__(
        self,
        config: BrokerConfig,
        state_manager: TransactionStateManager,
        producer_ids: ProducerIdManager,
        markers: TransactionMarkerChannelManager,
        metrics: TransactionCoordinatorMetrics,
        clock: Clock,
    ) -> None:
        self._config = config
        self._state = state_manager
        self._producer_ids = producer_ids
        self._markers = markers
        self._metrics = metrics
        self._clock = clock
        self._background: list[asyncio.Task[None]] = []
        self._aborts: set[asyncio.Task[None]] = set()
        self._completion: asyncio.Event | None = None
        self.active = False

    @property
    def state_manager(self) -> TransactionStateManager:
        return self._state

    # --- lifecycle ---------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the transactional ids (blocking; before :meth:`startup`, on a thread)."""
        self._state.load()

    def startup(self) -> None:
        """On the loop: end the transactions found decided but not ended (their markers are
        written again), start the timeout and expiration tasks."""
        now = self._clock.milliseconds()
        for metadata in self._state.all():
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                committed = metadata.state is S.PREPARE_COMMIT
                logger.info(
                    "transactional id %r: completing the %s of producer %d epoch %d found at "
                    "start-up",
                    metadata.transactional_id,
                    "commit" if committed else "abort",
                    metadata.producer_id,
                    metadata.producer_epoch,
                )
                complete = metadata.prepare_complete(now)
                self._markers.add_txn_markers_to_send(
                    metadata, committed, complete, self._completed
                )
        loop = asyncio.get_running_loop()
        config = self._config
        self._background = [
            loop.create_task(
                self._every(
                    config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                    self.abort_timed_out_transactions,
                )
            ),
            loop.create_task(
                self._every(
                    config.transaction_remove_expired_transaction_cleanup_interval_ms,
                    self.remove_expired_transactional_ids,
                )
            ),
        ]
        self._metrics.watch(self._state, self._clock)
        self.active = True

    async def _every(self, interval_ms: int, work: object) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await work()  # type: ignore[operator]
            except Exception:
                logger.exception("transaction coordinator: %s failed", work)

    async def shutdown(self) -> None:
        self.active = False
        for task in (*self._background, *self._aborts):
            task.cancel()
        await asyncio.gather(*self._background, *self._aborts, return_exceptions=True)
        await self._markers.shutdown()

    def _check_active(self) -> None:
        if not self.active or not self._state.loaded:
            raise CoordinatorLoadInProgressError(
                f"the transaction coordinator is loading {TRANSACTION_STATE_TOPIC_NAME}"
            )

    def _completed(self, metadata: TransactionMetadata, committed: bool) -> None:
        self._metrics.completed(committed)
        completion, self._completion = self._completion, None
        if completion is not None:
            completion.set()

    async def wait_for_a_completion(self, timeout_s: float) -> None:
        """Return once any transaction has completed (its markers durable, its
        CompleteCommit/CompleteAbort written), or after ``timeout_s``: a request refused with
        CONCURRENT_TRANSACTIONS tries again as soon as the transaction it waited for has
        ended, not at the next tick of a fixed backoff."""
        if self._completion is None:
            self._completion = asyncio.Event()
        try:
            await asyncio.wait_for(self._completion.wait(), timeout_s)
        except TimeoutError:
            pass

    # --- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        expected: ProducerIdAndEpoch | None = None,
    ) -> ProducerIdAndEpoch:
        """The producer id and epoch of a (new) producer instance of ``transactional_id``.
        Raises CONCURRENT_TRANSACTIONS while a transaction is being ended (after fencing an
        open one: the caller retries), PRODUCER_FENCED for a stale ``expected``."""
        if not transactional_id:
            raise InvalidRequestError("the transactional id must not be empty")
        if not self._state.validate_transaction_timeout_ms(transaction_timeout_ms):
            raise InvalidTransactionTimeoutError(
                f"transaction.timeout.ms {transaction_timeout_ms} is not within 1.."
                f"{self._config.transaction_max_timeout_ms} (transaction.max.timeout.ms)"
            )
        self._check_active()
        metadata = self._state.get(transactional_id)
        if metadata is None:
            producer_id = await self._producer_ids.generate()
            metadata = self._state.put_if_absent(
                TransactionMetadata(
                    transactional_id,
                    producer_id,
                    NO_PRODUCER_EPOCH,
                    transaction_timeout_ms,
                    last_update_timestamp_ms=self._clock.milliseconds(),
                )
            )
        transit = await self._prepare_init_producer_id(metadata, transaction_timeout_ms, expected)
        if transit.state is S.PREPARE_EPOCH_FENCE:
            logger.info(
                "transactional id %r: a new producer instance fences producer %d epoch %d and "
                "aborts its open transaction",
                transactional_id,
                metadata.producer_id,
                metadata.producer_epoch,
            )
            await self._end_transaction(
                metadata,
                transit.producer_id,
                transit.producer_epoch,
                committed=False,
                from_client=False,
                client_transaction_version=metadata.client_transaction_version,
                reason=ABORT_BY_FENCE,
            )
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r}: the open transaction of the fenced "
                f"producer is being aborted; retry"
            )
        await self._state.append_transaction_to_log(metadata, transit)
        logger.info(
            "transactional id %r: initialized producer %d epoch %d",
            transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
        )
        return ProducerIdAndEpoch(metadata.producer_id, metadata.producer_epoch)

    async def _prepare_init_producer_id(
        self,
        metadata: TransactionMetadata,
        transaction_timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
    ) -> TxnTransitMetadata:
        if metadata.pending_transition_in_progress:
            raise ConcurrentTransactionsError(
                f"transactional id {metadata.transactional_id!r} is being changed"
            )
        if expected is not None and not (
            metadata.producer_epoch == NO_PRODUCER_EPOCH
            or expected.producer_id == metadata.producer_id
            or (
                expected.producer_id == metadata.previous_producer_id
                and expected.producer_epoch >= INT16_MAX - 1
            )
        ):
            raise ProducerFencedError(
                f"transactional id {metadata.transactional_id!r}: producer {expected.producer_id} "
                f"is not its producer {metadata.producer_id}"
            )
        state = metadata.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise ConcurrentTransactionsError(
                f"transactional id {metadata.transactional_id!r}: its transaction is being "
                f"ended ({state.state_name})"
            )
        if state is S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        if state not in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            raise InvalidTxnStateError(
                f"transactional id {metadata.transactional_id!r} is {state.state_name}"
            )
        now = self._clock.milliseconds()
        if metadata.is_producer_epoch_exhausted and (
            expected is None or expected.producer_epoch == metadata.producer_epoch
        ):
            producer_id = await self._producer_ids.generate()
            if metadata.pending_transition_in_progress:  # changed while the id was reserved
                raise ConcurrentTransactionsError(
                    f"transactional id {metadata.transactional_id!r} is being changed"
                )
            return metadata.prepare_producer_id_rotation(
                producer_id, transaction_timeout_ms, now, expected is not None
            )
        return metadata.prepare_increment_producer_epoch(
            transaction_timeout_ms, None if expected is None else expected.producer_epoch, now
        )

    # --- AddPartitionsToTxn, AddOffsetsToTxn, the checks of Produce ----------------------------

    def _metadata_of(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TransactionMetadata:
        if not transactional_id:
            raise InvalidRequestError("the transactional id must not be empty")
        self._check_active()
        metadata = self._state.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} has no producer {producer_id}"
            )
        if metadata.producer_epoch != producer_epoch:
            raise ProducerFencedError(
                f"transactional id {transactional_id!r}: producer {producer_id} epoch "
                f"{producer_epoch} is not the current epoch {metadata.producer_epoch}"
            )
        return metadata

    async def add_partitions_to_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        client_transaction_version: int = TRANSACTION_VERSION_0,
    ) -> None:
        """Open the producer's transaction (unless open) and add ``partitions``, durably."""
        added = frozenset(partitions)
        metadata = self._metadata_of(transactional_id, producer_id, producer_epoch)
        if metadata.pending_transition_in_progress or metadata.state in (
            S.PREPARE_COMMIT,
            S.PREPARE_ABORT,
        ):
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r}: the last transaction is being ended"
            )
        if metadata.state is S.ONGOING and added <= metadata.partitions:
            return
        if metadata.state not in (S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            raise InvalidTxnStateError(
                f"transactional id {transactional_id!r} is {metadata.state.state_name}"
            )
        opens = metadata.state is not S.ONGOING
        version = metadata.client_transaction_version if not opens else client_transaction_version
        transit = metadata.prepare_add_partitions(added, self._clock.milliseconds(), version)
        await self._state.append_transaction_to_log(metadata, transit)
        if opens:
            self._metrics.started()

    def verify_partitions_in_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, KafkaError | None]:
        """Whether each partition is in the producer's open transaction (Kafka's
        ``handleVerifyPartitionsInTransaction``): TRANSACTION_ABORTABLE for one that is not."""
        wanted = tuple(partitions)
        try:
            metadata = self._metadata_of(transactional_id, producer_id, producer_epoch)
            if metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r}: its transaction is being ended"
                )
        except KafkaError as error:
            return {tp: error for tp in wanted}
        return {
            tp: None
            if tp in metadata.partitions
            else TransactionAbortableError(
                f"{tp} is not in the transaction of transactional id {transactional_id!r}"
            )
            for tp in wanted
        }

    async def verify_or_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        implicit_add: bool,
    ) -> dict[TopicPartition, KafkaError | None]:
        """The check before a transactional append (seam of the produce path): under
        transaction version 2 the partitions join the transaction (KIP-890), else each must be
        in it already."""
        wanted = tuple(partitions)
        if not implicit_add:
            return self.verify_partitions_in_transaction(
                transactional_id, producer_id, producer_epoch, wanted
            )
        try:
            await self.add_partitions_to_transaction(
                transactional_id, producer_id, producer_epoch, wanted, TRANSACTION_VERSION_2
            )
        except KafkaError as error:
            return {tp: error for tp in wanted}
        return dict.fromkeys(wanted)

    # --- EndTxn ------------------------------------------------------------------------------

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        client_transaction_version: int,
    ) -> ProducerIdAndEpoch:
        """Commit or abort the producer's transaction: answered once the decision is durable
        (the markers follow). Returns the producer id and epoch the producer goes on with
        (bumped under transaction version 2)."""
        if not transactional_id:
            raise InvalidRequestError("the transactional id must not be empty")
        self._check_active()
        metadata = self._state.get(transactional_id)
        if metadata is None:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} has no producer {producer_id}"
            )
        return await self._end_transaction(
            metadata,
            producer_id,
            producer_epoch,
            committed,
            from_client=True,
            client_transaction_version=client_transaction_version,
        )

    async def _end_transaction(
        self,
        metadata: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        from_client: bool,
        client_transaction_version: int,
        reason: str | None = None,
    ) -> ProducerIdAndEpoch:
        transactional_id = metadata.transactional_id
        fencing = metadata.pending_state is S.PREPARE_EPOCH_FENCE
        bumps = not fencing and metadata.client_transaction_version >= TRANSACTION_VERSION_2
        retry_on_overflow = (
            bumps
            and metadata.previous_producer_id == producer_id
            and producer_epoch == INT16_MAX - 1
            and metadata.producer_epoch == 0
        )
        retry_on_epoch_bump = bumps and metadata.producer_epoch == producer_epoch + 1
        state = metadata.state
        if bumps:
            # Kafka 4.4: a prepared transaction's retry (the epoch before its bump), or the
            # next EndTxn at the bumped epoch, which waits (CONCURRENT_TRANSACTIONS) while the
            # markers are written: the Java client may send it before the next transaction's
            # first Produce, and retries it.
            if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                valid_epoch = retry_on_epoch_bump or producer_epoch == metadata.producer_epoch
            elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                valid_epoch = (
                    retry_on_epoch_bump
                    or retry_on_overflow
                    or producer_epoch == metadata.producer_epoch
                )
            else:
                valid_epoch = producer_epoch == metadata.producer_epoch
        else:
            valid_epoch = (
                not from_client or producer_epoch == metadata.producer_epoch
            ) and producer_epoch >= metadata.producer_epoch
        is_retry = retry_on_epoch_bump or retry_on_overflow or not bumps
        outcome = "commit" if committed else "abort"
        if metadata.producer_id != producer_id and not retry_on_overflow:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} has no producer {producer_id}"
            )
        if not valid_epoch:
            raise ProducerFencedError(
                f"transactional id {transactional_id!r}: producer {producer_id} epoch "
                f"{producer_epoch} is not the current epoch {metadata.producer_epoch}"
            )
        if metadata.pending_transition_in_progress and not fencing:
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r} is being changed"
            )

        def invalid() -> InvalidTxnStateError:
            return InvalidTxnStateError(
                f"transactional id {transactional_id!r} is {state.state_name}; cannot {outcome}"
            )

        no_partition_added = False
        if state is S.ONGOING:
            pass
        elif state is S.COMPLETE_COMMIT or state is S.COMPLETE_ABORT:
            same = (state is S.COMPLETE_COMMIT) == committed
            if same and is_retry:
                return ProducerIdAndEpoch(metadata.producer_id, metadata.producer_epoch)
            if committed or not bumps or is_retry and not same:
                raise invalid()
            no_partition_added = True  # transaction version 2 aborts what it never opened
        elif state is S.EMPTY:
            if committed or client_transaction_version < TRANSACTION_VERSION_2:
                raise invalid()
            no_partition_added = True
        elif state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            if (state is S.PREPARE_COMMIT) == committed:
                raise ConcurrentTransactionsError(
                    f"transactional id {transactional_id!r}: the {outcome} is under way"
                )
            raise invalid()
        else:
            raise invalid()

        next_producer_id = NO_PRODUCER_ID
        if (
            client_transaction_version >= TRANSACTION_VERSION_2
            and not fencing
            and metadata.is_producer_epoch_exhausted
        ):
            next_producer_id = await self._producer_ids.generate()
        if fencing:
            metadata.pending_state = None
            if metadata.client_transaction_version < TRANSACTION_VERSION_2:
                # The fenced epoch was never given out: take it now, and abort at it.
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            # (Transaction version 2: the abort bumps the epoch itself, once, as Kafka 4.4
            # does; the producer's EndTxn at the old epoch is then INVALID_TXN_STATE, an
            # abortable error, not a fence.)
        elif metadata.pending_transition_in_progress:
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r} is being changed"
            )
        now = self._clock.milliseconds()
        transit = metadata.prepare_abort_or_commit(
            S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
            client_transaction_version,
            next_producer_id,
            now,
            no_partition_added,
        )
        transaction_test_stop.stop_at(transaction_test_stop.BEFORE_PREPARE)
        try:
            await self._state.append_transaction_to_log(metadata, transit)
        except KafkaError:
            if fencing:
                metadata.has_failed_epoch_fence = True
                logger.warning(
                    "transactional id %r: the epoch fence of producer %d was not written; the "
                    "epoch %d was never given out",
                    transactional_id,
                    producer_id,
                    producer_epoch,
                )
            raise
        transaction_test_stop.stop_at(transaction_test_stop.AFTER_PREPARE)
        if not committed:
            self._metrics.aborted(reason)
        complete = metadata.prepare_complete(now)
        self._markers.add_txn_markers_to_send(metadata, committed, complete, self._completed)
        return ProducerIdAndEpoch(metadata.producer_id, metadata.producer_epoch)

    # --- timeouts and expiration -------------------------------------------------------------

    async def abort_timed_out_transactions(self) -> int:
        """Abort every transaction open longer than its timeout (Kafka's
        ``abortTimedOutTransactions``): its producer's epoch is bumped (fenced) and the
        transaction aborted. The number aborted."""
        if not self.active:
            return 0
        aborted = 0
        for expired in self._state.timed_out_transactions(self._clock.milliseconds()):
            metadata = self._state.get(expired.transactional_id)
            if (
                metadata is None
                or metadata.producer_id != expired.producer_id
                or metadata.pending_transition_in_progress
            ):
                continue
            transit = metadata.prepare_fence_producer_epoch()
            logger.info(
                "transactional id %r: aborting the transaction of producer %d epoch %d, open "
                "longer than its timeout of %d ms",
                expired.transactional_id,
                expired.producer_id,
                expired.producer_epoch,
                metadata.transaction_timeout_ms,
            )
            try:
                await self._end_transaction(
                    metadata,
                    transit.producer_id,
                    transit.producer_epoch,
                    committed=False,
                    from_client=False,
                    client_transaction_version=metadata.client_transaction_version,
                    reason=ABORT_BY_TIMEOUT,
                )
                aborted += 1
            except KafkaError as error:
                if metadata.pending_state is S.PREPARE_EPOCH_FENCE:
                    metadata.abandon_transition()
                logger.warning(
                    "transactional id %r: aborting the timed-out transaction failed: %s",
                    expired.transactional_id,
                    error,
                )
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        """Remove the transactional ids idle longer than transactional.id.expiration.ms (a
        tombstone each). The number removed."""
        if not self.active:
            return 0
        removed = 0
        for metadata in self._state.expired_transactional_ids(self._clock.milliseconds()):
            if metadata.pending_transition_in_progress:
                continue
            transit = metadata.prepare_dead()
            try:
                await self._state.append_transaction_to_log(metadata, transit)
            except KafkaError as error:
                logger.warning(
                    "transactional id %r: removing it failed: %s", metadata.transactional_id, error
                )
                continue
            logger.info(
                "transactional id %r expired (idle over transactional.id.expiration.ms=%d)",
                metadata.transactional_id,
                self._config.transactional_id_expiration_ms,
            )
            removed += 1
        return removed

    # --- DescribeTransactions, ListTransactions ----------------------------------------------

    def describe_transaction(self, transactional_id: str) -> TransactionMetadata:
        if not transactional_id:
            raise InvalidRequestError("the transactional id must not be empty")
        self._check_active()
        metadata = self._state.get(transactional_id)
        if metadata is None or metadata.state is S.DEAD:
            raise TransactionalIdNotFoundError(
                f"transactional id {transactional_id!r} is not known"
            )
        return metadata

    def list_transactions(
        self,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> tuple[list[str], list[TransactionListing]]:
        """The transactions matching every filter given, and the state names not known."""
        self._check_active()
        states: set[TransactionState] = set()
        unknown: list[str] = []
        for name in state_filters:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        producer_ids = set(producer_id_filters)
        pattern = None
        if transactional_id_pattern:
            try:
                pattern = re.compile(transactional_id_pattern)
            except re.error as error:
                raise InvalidRequestError(
                    f"transactional id pattern {transactional_id_pattern!r}: {error}"
                ) from None
        now = self._clock.milliseconds()
        found = []
        for m in self._state.all():
            if m.state is S.DEAD:
                continue
            if states and m.state not in states:
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            # (As Kafka: a transactional id with no transaction yet, start -1, passes.)
            if duration_filter_ms >= 0 and now - m.start_timestamp_ms <= duration_filter_ms:
                continue
            if pattern is not None and pattern.fullmatch(m.transactional_id) is None:
                continue
            found.append(TransactionListing(m.transactional_id, m.producer_id, m.state))
        if unknown and not states:
            return unknown, []  # only unknown states asked for: nothing matches them
        return unknown, found
