"""The task that turns ready batches into Produce requests and settles them when answered."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from odradek.client.config import ProducerConfig
from odradek.client.connection import Connection, InFlightRequest
from odradek.client.network_client import NetworkClient, retry_log_level
from odradek.client.producer_batch import ProducerBatch
from odradek.client.record_accumulator import SEQUENCE_MODULUS, RecordAccumulator
from odradek.client.transaction_manager import TransactionAbortedError, TransactionManager
from odradek.clock import SYSTEM_CLOCK
from odradek.errors import (
    KafkaError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
    UnknownServerError,
    error_for_code,
)
from odradek.protocol.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData, ProducePartitionResponse
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Sender:
    """Sends the accumulator's ready batches, retrying retriable failures.

    Up to ``max_in_flight_requests_per_connection`` requests per partition are in flight
    (odradek has one broker, so this is Kafka's per-connection limit kept per partition, so
    that partitions do not wait for each other). Each request carries one batch of each ready
    partition, up to ``max_request_size`` (as Kafka's producer sends them: a partition's whole
    backlog in one append could exceed the topic's ``segment.bytes``, which the broker
    refuses). Once a batch of a partition must be retried, nothing more of that partition is
    sent until its requests in flight are answered; the batches to retry then go out again,
    one a request, in order, before any later batch: records stay in order across retries.

    Idempotent (the default, as Kafka's): the sender first gets a producer id
    (InitProducerId) and numbers each partition's batches in the order it drains them, when
    it first sends them; a retry resends the same bytes, which the broker recognises when it
    wrote them already and answers with their offsets: exactly one copy, however often the
    acknowledgement is lost. OUT_OF_ORDER_SEQUENCE_NUMBER (a later batch reached the broker
    before an earlier one that failed) is retried. A numbered batch that fails for good
    leaves a gap, so the producer re-initialises with its id and epoch (KIP-360): the next
    epoch, sequences from 0. Not idempotent: delivery is at least once (a batch whose
    response was lost is sent again and may be stored twice).

    Transactional (a ``transaction_manager``): the producer id and epoch are the transaction
    manager's; a partition's batches go out once the partition is part of the transaction
    (the manager adds it when its first batch is ready), and while the transaction aborts or
    has failed, batches not sent yet fail (TransactionAbortedError); a batch that fails for
    good makes the transaction abortable (fenced: fatal).
    """

    def __init__(
        self,
        client: NetworkClient,
        accumulator: RecordAccumulator,
        config: ProducerConfig,
        transaction_manager: TransactionManager | None = None,
    ) -> None:
        self._client = client
        self._accumulator = accumulator
        self._config = config
        self._acks = config.required_acks()
        self._transactions = transaction_manager
        self._idempotent = config.idempotent or transaction_manager is not None
        if transaction_manager is not None:
            transaction_manager.on_new_epoch(self._new_epoch)
        self._in_flight: dict[TopicPartition, int] = {}
        self._retrying: set[TopicPartition] = set()
        self._producer_id = -1
        self._producer_epoch = -1
        self._next_sequence: dict[TopicPartition, int] = {}
        self._epoch_bump_needed = False
        self._requests: set[asyncio.Task[None]] = set()
        self._waiting_to_write = 0  # requests drained but not written at once, still unanswered
        self._wakeup = asyncio.Event()
        self._closing = False

    def wakeup(self) -> None:
        """Look for ready batches now (a batch was started or filled, or a flush began)."""
        self._wakeup.set()

    def initiate_close(self) -> None:
        """Send everything left, then stop."""
        self._closing = True
        self._accumulator.begin_close()
        self._wakeup.set()

    async def run(self) -> None:
        """Send until closed and every batch is settled."""
        transactions = self._transactions
        while not (self._closing and not self._accumulator.has_incomplete()):
            self._wakeup.clear()
            if transactions is not None:
                if transactions.has_partitions_to_add():
                    await transactions.add_pending_partitions()
            elif self._needs_producer_id() and self._accumulator.has_incomplete():
                await self._init_producer_id()
            delay_ms = self._send_ready(SYSTEM_CLOCK.milliseconds())
            try:
                async with asyncio.timeout(None if delay_ms is None else delay_ms / 1000):
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    async def abort(self, error: KafkaError) -> None:
        """Stop at once: cancel requests in flight and fail every unsettled batch."""
        for task in list(self._requests):
            task.cancel()
        await asyncio.gather(*self._requests, return_exceptions=True)
        for batch in self._accumulator.abandon_incomplete():
            self._settle(batch, error=error)

    # --- producer id (idempotence) ------------------------------------------------------------

    def _needs_producer_id(self) -> bool:
        """A producer id is wanted first, or an epoch bump once nothing is in flight."""
        if not self._idempotent:
            return False
        return self._producer_id < 0 or (self._epoch_bump_needed and not self._in_flight)

    async def _init_producer_id(self) -> None:
        """InitProducerId: a new id, or (bump) the next epoch of ours; sequences restart."""
        bump = self._producer_id >= 0
        request = (
            InitProducerIdRequest(
                producer_id=self._producer_id, producer_epoch=self._producer_epoch
            )
            if bump
            else InitProducerIdRequest()
        )
        try:
            response: InitProducerIdResponse = await self._client.send(request)
        except KafkaError as error:
            if not error.retriable and not isinstance(error, RequestTimedOutError):
                logger.error("InitProducerId failed: %s; failing the records waiting", error)
                for batch in self._accumulator.abandon_incomplete():
                    self._settle(batch, error=error)
                return
            logger.log(retry_log_level(error), "InitProducerId failed, retrying: %s", error)
            await asyncio.sleep(self._config.retry_backoff_ms / 1000)
            return
        if bump:
            logger.info(
                "producer %d: epoch %d -> %d, sequences start again",
                response.producer_id,
                self._producer_epoch,
                response.producer_epoch,
            )
            self._accumulator.clear_producer_state()
        self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
        self._next_sequence.clear()
        self._epoch_bump_needed = False

    def _new_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """The transaction manager's producer id or epoch changed: sequences from 0."""
        self._producer_id, self._producer_epoch = producer_id, producer_epoch
        self._next_sequence.clear()

    def _number(self, drained: dict[TopicPartition, ProducerBatch]) -> None:
        """Give each batch sent for the first time its producer id, epoch and sequence."""
        for tp, batch in drained.items():
            if batch.base_sequence is None:
                sequence = self._next_sequence.get(tp, 0)
                batch.set_producer_state(self._producer_id, self._producer_epoch, sequence)
                self._next_sequence[tp] = (sequence + batch.record_count) % SEQUENCE_MODULUS

    # --- sending -----------------------------------------------------------------------------

    def _muted(self) -> set[TopicPartition]:
        """Partitions that may not send now: at their in-flight limit, or retrying while a
        request is in flight (the retries go first, in order, one at a time)."""
        limit = self._config.max_in_flight_requests_per_connection
        return {
            tp for tp, count in self._in_flight.items() if count >= limit or tp in self._retrying
        }

    def _send_ready(self, now: int) -> int | None:
        """Expire old batches and send the ready ones; ms until something is due, or None."""
        for batch in self._accumulator.expired_batches(now, self._config.delivery_timeout_ms):
            expired = RequestTimedOutError(
                f"{batch.record_count} record(s) for {batch.topic_partition} expired: "
                f"{now - batch.created_ms} ms have passed since the batch was created"
            )
            self._settle(batch, error=expired)
        transactions = self._transactions
        if transactions is not None and transactions.is_aborting_or_failed:
            aborted = transactions.last_error or TransactionAbortedError(
                "the transaction was aborted before the batch was sent"
            )
            for batch in self._accumulator.abort_undrained():
                self._settle(batch, error=TransactionAbortedError(f"not sent: {aborted}"))
        if self._idempotent and (self._producer_id < 0 or self._epoch_bump_needed):
            return self._config.retry_backoff_ms  # InitProducerId first
        ready, delay_ms = self._accumulator.ready(now, self._muted())
        if transactions is not None and ready:
            # A partition's batches go out once it is part of the transaction.
            ready = self._in_transaction(transactions, ready)
        if ready:
            drained = self._accumulator.drain(ready, self._config.max_request_size, now)
            if drained:
                if self._idempotent:
                    self._number(drained)
                for tp, batch in drained.items():
                    self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
                    if batch.attempts == 0:
                        self._retrying.discard(tp)  # the retries of tp have all gone out
                request = ProduceRequest(
                    tuple(
                        ProducePartitionData(tp.topic, tp.partition, batch.close())
                        for tp, batch in drained.items()
                    ),
                    self._acks,
                    self._config.request_timeout_ms,
                    self._config.transactional_id,
                )
                started = None
                if self._acks is not Acks.NONE and not self._waiting_to_write:
                    try:
                        started = self._client.try_start(request)
                    except KafkaError:
                        pass  # sent by the task instead, which meets the error and handles it
                if started is None:
                    self._waiting_to_write += 1
                task = asyncio.create_task(self._produce(drained, request, started))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
        return delay_ms

    def _in_transaction(
        self, transactions: TransactionManager, ready: list[TopicPartition]
    ) -> list[TopicPartition]:
        """Those of ``ready`` that are part of the transaction; the others are handed to the
        transaction manager to add, and the sender looks again once it has."""
        not_added = [tp for tp in ready if not transactions.is_added(tp)]
        if not not_added:
            return ready
        transactions.add_partitions(not_added)
        self._wakeup.set()
        return [tp for tp in ready if transactions.is_added(tp)]

    async def _produce(
        self,
        drained: dict[TopicPartition, ProducerBatch],
        request: ProduceRequest,
        started: tuple[Connection, InFlightRequest] | None,
    ) -> None:
        """Settle (or retry) the batches of ``request``: written already when ``started``,
        else sent here once the connection takes it."""
        try:
            if started is not None:
                connection, in_flight = started
                response = await connection.response(in_flight)
            elif self._acks is Acks.NONE:
                await self._sent_later(self._client.send_no_response(request))
                for batch in drained.values():
                    self._settle(batch)  # acks 0: no offsets are known
                return
            else:
                response = await self._sent_later(self._client.send(request))
        except KafkaError as error:
            for batch in drained.values():
                self._retry_or_fail(batch, error)
        except Exception as error:  # a bug must not leave futures unsettled forever
            logger.exception("produce request failed unexpectedly")
            for batch in drained.values():
                self._retry_or_fail(batch, UnknownServerError(repr(error)))
        else:
            self._handle_response(drained, response.partitions)
        finally:
            for tp in drained:
                count = self._in_flight.get(tp, 0) - 1
                if count > 0:
                    self._in_flight[tp] = count
                else:
                    self._in_flight.pop(tp, None)
            self._wakeup.set()

    async def _sent_later(self, sending: Awaitable[T]) -> T:
        """Await a request that could not be written at once. Until it is answered, later
        requests take the same way, so requests go out in the order they were drained."""
        try:
            return await sending
        finally:
            self._waiting_to_write -= 1

    def _handle_response(
        self,
        drained: dict[TopicPartition, ProducerBatch],
        partitions: tuple[ProducePartitionResponse, ...],
    ) -> None:
        answers = {(p.topic, p.partition): p for p in partitions}
        for tp, batch in drained.items():
            answer = answers.get((tp.topic, tp.partition))
            if answer is None:
                self._retry_or_fail(batch, UnknownServerError(f"no response for {tp}"))
            elif answer.error:
                self._retry_or_fail(batch, error_for_code(answer.error, answer.message or ""))
            else:
                self._settle(batch, answer.base_offset, answer.log_append_time_ms)

    def _retry_or_fail(self, batch: ProducerBatch, error: KafkaError) -> None:
        now = SYSTEM_CLOCK.milliseconds()
        backoff_ms = self._config.retry_backoff_ms
        deadline = batch.created_ms + self._config.delivery_timeout_ms
        retriable = error.retriable or (
            self._idempotent and isinstance(error, OutOfOrderSequenceNumberError)
        )
        if not (
            retriable and batch.attempts < self._config.retries and now + backoff_ms < deadline
        ):
            self._settle(batch, error=error)
            return
        batch.attempts += 1
        batch.retry_at_ms = now + backoff_ms
        logger.log(
            retry_log_level(error),
            "retrying %d record(s) for %s (attempt %d): %s",
            batch.record_count,
            batch.topic_partition,
            batch.attempts,
            error,
        )
        self._accumulator.reenqueue(batch)
        self._retrying.add(batch.topic_partition)

    def _settle(
        self,
        batch: ProducerBatch,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        error: KafkaError | TransactionAbortedError | None = None,
    ) -> None:
        if error is not None:
            if self._transactions is not None:
                self._transactions.batch_failed(error, batch.base_sequence is not None)
            elif batch.base_sequence is not None:
                self._epoch_bump_needed = True  # its sequence is a gap now
        self._accumulator.deallocate(batch)
        batch.complete(base_offset, log_append_time_ms, error)
