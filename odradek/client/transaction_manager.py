"""TransactionManager: a transactional producer's side of Kafka's transactions.

The role of Kafka's client ``TransactionManager``: its states and their transitions, and the
requests a transaction takes (FindCoordinator, InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn, sent as msgpack Kafka-data messages, Kafka's
request data). Errors are sorted as Kafka's client sorts them:

- retriable (the coordinator moving or loading, CONCURRENT_TRANSACTIONS, ...): the request is
  sent again after ``retry_backoff_ms``, until the caller's deadline;
- abortable (a batch of the transaction failed, TOPIC/GROUP_AUTHORIZATION_FAILED,
  TRANSACTION_ABORTABLE, UNKNOWN_PRODUCER_ID, a fenced group member...): the transaction can
  only be aborted, after which the producer goes on; ``commit_transaction`` raises the error;
- fatal (fenced by a newer instance of the same transactional id: ProducerFencedError, also for
  INVALID_PRODUCER_EPOCH; TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE, ...): every
  later call raises it; the producer can only be closed.

The broker ends each transaction with EndTxn v5 (transaction version 2, KIP-890): its answer
carries the producer's next epoch, which later batches use (sequences from 0). Partitions are
added to the transaction explicitly (AddPartitionsToTxn) before their first batch is sent,
which a broker accepts under either transaction version.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from enum import Enum
from typing import Any

from odradek.client.consumer_coordinator import ConsumerGroupMetadata
from odradek.client.network_client import NetworkClient, retry_log_level
from odradek.errors import (
    ClusterAuthorizationFailedError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    InvalidProducerEpochError,
    KafkaError,
    OperationNotAttemptedError,
    ProducerFencedError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnsupportedVersionError,
    error_for_code,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.kafka_data import kafka_data_request
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

TRANSACTION_COORDINATOR = 1
"""FindCoordinator's key type of a transactional id."""

_ABORTABLE = (
    TransactionAbortableError,
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    UnknownProducerIdError,
    UnknownMemberIdError,
    IllegalGenerationError,
    FencedInstanceIdError,
)
"""Errors after which the transaction can still be aborted (Kafka's abortable errors)."""
_NEEDS_EPOCH_BUMP = (UnknownProducerIdError,)
"""Abortable errors that the broker forgot the producer's state for: the abort then takes
the next epoch (InitProducerId with the current one, KIP-360) instead of EndTxn."""
_FATAL_FOR_BATCHES = (
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    UnsupportedVersionError,
)
"""A produce's errors that end the producer (Kafka's maybeTransitionToErrorState)."""


class TransactionState(Enum):
    """Kafka's ``TransactionManager.State``."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TransactionState
_TRANSITIONS: dict[TransactionState, frozenset[TransactionState]] = {
    # Which states each state may be entered from (Kafka's State.isTransitionValid).
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.READY, S.ABORTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(S),
}


class IllegalStateError(RuntimeError):
    """A transactional method called in a state that does not allow it (Kafka's
    IllegalStateException), e.g. ``send`` before ``begin_transaction``."""


class TransactionAbortedError(Exception):
    """A record's batch was not sent because its transaction was aborted (Kafka's client-side
    TransactionAbortedException: no error code, nothing the broker said)."""


class TransactionManager:
    """The transaction state of one transactional producer; runs on its event loop."""

    def __init__(
        self,
        client: NetworkClient,
        transactional_id: str,
        transaction_timeout_ms: int,
        retry_backoff_ms: int,
    ) -> None:
        self._client = client
        self.transactional_id = transactional_id
        self._transaction_timeout_ms = transaction_timeout_ms
        self._retry_backoff_s = retry_backoff_ms / 1000
        self.state = TransactionState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.last_error: KafkaError | None = None
        self._in_transaction: set[TopicPartition] = set()
        self._to_add: set[TopicPartition] = set()
        self._epoch_bump_required = False
        self._transaction_started = False  # partitions or offsets were added to it
        self._on_new_epoch: Callable[[int, int], None] = lambda _id, _epoch: None
        self._lock = asyncio.Lock()  # one transactional request sequence at a time

    def on_new_epoch(self, callback: Callable[[int, int], None]) -> None:
        """Call ``callback(producer_id, epoch)`` whenever they change (the sender numbers
        batches with them, from sequence 0 for a new epoch)."""
        self._on_new_epoch = callback

    # --- what the producer and sender ask ------------------------------------------------------

    def check_can_send(self) -> None:
        """Raise unless records may be sent now: inside a transaction (an aborted one's
        error when it has failed)."""
        state = self.state
        if state is TransactionState.IN_TRANSACTION:
            return
        if state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            raise self._error_state()
        raise IllegalStateError(
            f"transactional producer {self.transactional_id!r}: cannot send in state "
            f"{state.name}; call init_transactions() once, then begin_transaction()"
        )

    def is_added(self, tp: TopicPartition) -> bool:
        """Whether batches of ``tp`` may be sent: it is part of the transaction."""
        return tp in self._in_transaction

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Have these partitions (with batches ready) added to the transaction."""
        for tp in partitions:
            if tp not in self._in_transaction:
                self._to_add.add(tp)

    def has_partitions_to_add(self) -> bool:
        return bool(self._to_add) and self.state in (
            TransactionState.IN_TRANSACTION,
            TransactionState.COMMITTING_TRANSACTION,
        )

    @property
    def is_aborting_or_failed(self) -> bool:
        """Whether batches not yet sent must fail: the transaction is aborting or has failed."""
        return self.state in (
            TransactionState.ABORTING_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
            TransactionState.FATAL_ERROR,
        )

    def batch_failed(self, error: Exception, leaves_gap: bool) -> None:
        """A batch of the transaction failed for good: PRODUCER_FENCED and authorization
        errors are fatal; anything else makes the transaction abortable, INVALID_PRODUCER_EPOCH
        too (KIP-588: the coordinator may have aborted the transaction on its timeout; the
        abort then tells a fenced producer so). ``leaves_gap``: the batch's sequence number
        was used, so the abort takes a new epoch."""
        if isinstance(error, TransactionAbortedError):
            return
        if isinstance(error, _FATAL_FOR_BATCHES):
            self._fail(error, fatal=True)
            return
        if isinstance(error, _NEEDS_EPOCH_BUMP) or (
            leaves_gap and not isinstance(error, InvalidProducerEpochError)
        ):
            self._epoch_bump_required = True
        self._fail(error, fatal=False)

    # --- the application's calls ----------------------------------------------------------------

    async def init_transactions(self, timeout_s: float) -> None:
        """Kafka's ``initTransactions``: find the coordinator and get the producer id and
        epoch of the transactional id, fencing any older instance (whose open transaction
        the coordinator aborts)."""
        async with self._lock:
            if self.state is not TransactionState.UNINITIALIZED:
                raise IllegalStateError(
                    f"init_transactions() was called already (state {self.state.name})"
                )
            self._transition(TransactionState.INITIALIZING)
            await self._run(self._initialize, timeout_s, "InitProducerId")

    def begin_transaction(self) -> None:
        """Kafka's ``beginTransaction``: records sent from now on belong to the transaction."""
        if self.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            raise self._error_state()
        if self.state is not TransactionState.READY:
            raise IllegalStateError(
                f"cannot begin a transaction in state {self.state.name}"
                + (" (call init_transactions() first)" if self.state is S.UNINITIALIZED else "")
            )
        self._transition(TransactionState.IN_TRANSACTION)

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata,
        timeout_s: float,
    ) -> None:
        """Kafka's ``sendOffsetsToTransaction``: the group's offsets (the next offset to
        read, per partition) commit with the transaction, or not at all."""
        async with self._lock:
            self._require(TransactionState.IN_TRANSACTION, "send offsets to the transaction")
            await self._run(
                lambda: self._add_offsets(group_metadata.group_id), timeout_s, "AddOffsetsToTxn"
            )
            await self._run(
                lambda: self._commit_offsets(offsets, group_metadata), timeout_s, "TxnOffsetCommit"
            )

    async def end_transaction(
        self, commit: bool, flush: Callable[[], Awaitable[None]], timeout_s: float
    ) -> None:
        """Kafka's ``commitTransaction`` (``commit``) or ``abortTransaction``: a commit sends
        every record first (``flush``) and raises the transaction's error instead if one
        failed; an abort fails the records not sent yet. Then EndTxn (none when nothing
        was added to the transaction)."""
        if commit:
            self._require(TransactionState.IN_TRANSACTION, "commit the transaction")
            self._transition(TransactionState.COMMITTING_TRANSACTION)
            await flush()  # (the sender adds the partitions of the last batches meanwhile)
            if self.state is not TransactionState.COMMITTING_TRANSACTION:
                raise self._error_state()
        else:
            if self.state is TransactionState.FATAL_ERROR:
                raise self._error_state()
            if self.state not in (
                TransactionState.IN_TRANSACTION,
                TransactionState.ABORTABLE_ERROR,
            ):
                raise IllegalStateError(f"cannot abort a transaction in state {self.state.name}")
            self._transition(TransactionState.ABORTING_TRANSACTION)
            await flush()  # the sender fails what is not sent; what is in flight settles
        async with self._lock:
            if not commit and self._epoch_bump_required:
                # The broker lost track of the producer: InitProducerId with the current epoch
                # aborts the transaction and gives the next one (KIP-360).
                self._transition(TransactionState.INITIALIZING)
                await self._run(self._initialize, timeout_s, "InitProducerId")
            elif self._transaction_started:
                await self._run(lambda: self._end(commit), timeout_s, "EndTxn")
                self._transition(TransactionState.READY)
            else:
                self._transition(TransactionState.READY)
            self._in_transaction.clear()
            self._to_add.clear()
            self._transaction_started = False

    # --- requests ---------------------------------------------------------------------------------

    async def _run(
        self, attempt: Callable[[], Awaitable[None]], timeout_s: float, name: str
    ) -> None:
        """``attempt`` until it succeeds, retrying retriable errors after the backoff; a
        non-retriable error ends the transaction as abortable or fatal, and is raised.
        RequestTimedOutError after ``timeout_s`` (the call may be made again)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    await attempt()
                return
            except TimeoutError:
                raise RequestTimedOutError(
                    f"transactional producer {self.transactional_id!r}: {name} did not complete "
                    f"within {timeout_s:.1f} s"
                ) from None
            except KafkaError as error:
                if error.retriable and loop.time() + self._retry_backoff_s < deadline:
                    logger.log(
                        retry_log_level(error),
                        "transactional producer %r: %s failed, retrying: %s",
                        self.transactional_id,
                        name,
                        error,
                    )
                    await asyncio.sleep(self._retry_backoff_s)
                    continue
                if error.retriable:
                    raise
                raise self._request_failed(error) from None

    def _request_failed(self, error: KafkaError) -> KafkaError:
        """A transactional request failed for good: the transaction's error, as Kafka's
        client takes it (INVALID_PRODUCER_EPOCH is a fenced producer here)."""
        if isinstance(error, _NEEDS_EPOCH_BUMP):
            self._epoch_bump_required = True
        error = _as_fenced(error)
        self._fail(error)
        return error

    async def _send(self, api_key: ApiKey, data: dict[str, Any], version: int = 0) -> Any:
        response = await self._client.send(kafka_data_request(api_key, version)(data))
        return response.data

    async def _find_coordinator(self) -> None:
        data = await self._send(
            ApiKey.FIND_COORDINATOR,
            {"key_type": TRANSACTION_COORDINATOR, "coordinator_keys": [self.transactional_id]},
            version=1,
        )
        for coordinator in data["coordinators"]:
            _raise(coordinator["error_code"], coordinator.get("error_message"))

    async def _initialize(self) -> None:
        await self._find_coordinator()
        data = await self._send(
            ApiKey.INIT_PRODUCER_ID,
            {
                "transactional_id": self.transactional_id,
                "transaction_timeout": self._transaction_timeout_ms,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
            },
            version=1,
        )
        _raise(data["error_code"])
        self._epoch_bump_required = False
        self._set_producer(data["producer_id"], data["producer_epoch"])
        self._transition(TransactionState.READY)
        logger.info(
            "transactional producer %r: producer id %d, epoch %d",
            self.transactional_id,
            self.producer_id,
            self.producer_epoch,
        )

    async def add_pending_partitions(self) -> None:
        """AddPartitionsToTxn for the partitions waiting to be added (the sender calls it
        before sending their batches). When they cannot be added the transaction fails
        (abortable or fatal, as the error says) and the sender fails their batches."""
        async with self._lock:
            if not self.has_partitions_to_add():
                return
            partitions = sorted(self._to_add)
            try:
                await self._add(partitions)
            except KafkaError as error:
                if error.retriable:  # asked again by the sender, which expires batches meanwhile
                    logger.log(
                        retry_log_level(error),
                        "transactional producer %r: AddPartitionsToTxn failed, retrying: %s",
                        self.transactional_id,
                        error,
                    )
                    await asyncio.sleep(self._retry_backoff_s)
                    return
                self._request_failed(error)  # the sender fails what is not sent
            self._to_add.difference_update(partitions)

    async def _add(self, partitions: list[TopicPartition]) -> None:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        data = await self._send(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.producer_epoch,
                "v3_and_below_topics": [
                    {"name": name, "partitions": numbers} for name, numbers in topics.items()
                ],
            },
        )
        first_error: KafkaError | None = None
        for topic in data["results_by_topic_v3_and_below"]:
            for result in topic["results_by_partition"]:
                tp = TopicPartition(topic["name"], result["partition_index"])
                code = result["partition_error_code"]
                if not code:
                    self._in_transaction.add(tp)
                    self._transaction_started = True
                    continue
                error = error_for_code(code, f"adding {tp} to the transaction")
                if isinstance(error, OperationNotAttemptedError):
                    continue  # another partition's error is the reason
                if first_error is None or (first_error.retriable and not error.retriable):
                    first_error = error
        if first_error is not None:
            raise first_error

    async def _add_offsets(self, group_id: str) -> None:
        data = await self._send(
            ApiKey.ADD_OFFSETS_TO_TXN,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "group_id": group_id,
            },
        )
        _raise(data["error_code"])
        self._transaction_started = True

    async def _commit_offsets(
        self, offsets: Mapping[TopicPartition, int], group: ConsumerGroupMetadata
    ) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "committed_offset": offset}
            )
        data = await self._send(
            ApiKey.TXN_OFFSET_COMMIT,
            {
                "transactional_id": self.transactional_id,
                "group_id": group.group_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "generation_id": group.generation_id,
                "member_id": group.member_id,
                "group_instance_id": group.group_instance_id,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            },
        )
        for topic in data["topics"]:
            for partition in topic["partitions"]:
                _raise(partition["error_code"], f"{topic['name']}-{partition['partition_index']}")

    async def _end(self, commit: bool) -> None:
        data = await self._send(
            ApiKey.END_TXN,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "committed": commit,
            },
        )
        _raise(data["error_code"])
        if data["producer_id"] >= 0:  # transaction version 2: the next epoch
            self._set_producer(data["producer_id"], data["producer_epoch"])

    # --- state ------------------------------------------------------------------------------------

    def _set_producer(self, producer_id: int, producer_epoch: int) -> None:
        if (producer_id, producer_epoch) != (self.producer_id, self.producer_epoch):
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self._on_new_epoch(producer_id, producer_epoch)

    def _require(self, state: TransactionState, what: str) -> None:
        if self.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            raise self._error_state()
        if self.state is not state:
            raise IllegalStateError(f"cannot {what} in state {self.state.name}")

    def _transition(self, target: TransactionState) -> None:
        if self.state not in _TRANSITIONS[target] and self.state is not target:
            raise IllegalStateError(
                f"transactional producer {self.transactional_id!r}: invalid transition "
                f"{self.state.name} -> {target.name}"
            )
        logger.debug(
            "transactional producer %r: %s -> %s",
            self.transactional_id,
            self.state.name,
            target.name,
        )
        self.state = target

    def _fail(self, error: KafkaError, fatal: bool | None = None) -> None:
        """Enter ABORTABLE_ERROR or FATAL_ERROR for ``error`` (``fatal`` None: as its kind
        says)."""
        if self.state is TransactionState.FATAL_ERROR:
            return
        if fatal is None:
            fatal = not isinstance(error, _ABORTABLE)
        if not fatal and self.state in (
            TransactionState.UNINITIALIZED,
            TransactionState.INITIALIZING,
            TransactionState.READY,
        ):
            fatal = True  # nothing to abort: the producer cannot go on
        self.last_error = error
        target = TransactionState.FATAL_ERROR if fatal else TransactionState.ABORTABLE_ERROR
        logger.log(
            logging.ERROR if fatal else logging.WARNING,
            "transactional producer %r: %s error: %s",
            self.transactional_id,
            "fatal" if fatal else "abortable",
            error,
        )
        self.state = target

    def _error_state(self) -> KafkaError:
        """The error of a failed transaction, raised by the calls it rules out."""
        error = self.last_error or KafkaError("the transaction failed")
        if self.state is TransactionState.ABORTABLE_ERROR:
            return type(error)(
                f"the transaction failed and must be aborted (abort_transaction()): {error.message}"
            )
        return error


def _raise(code: int, where: str | None = None) -> None:
    if code:
        raise error_for_code(code, where or "")


def _as_fenced(error: KafkaError) -> KafkaError:
    """INVALID_PRODUCER_EPOCH from a transactional request or a produce means a newer
    instance took the transactional id: Kafka's client raises ProducerFencedException."""
    if isinstance(error, InvalidProducerEpochError):
        return ProducerFencedError(
            f"{error.message}; another producer with the same transactional id is running"
        )
    return error
