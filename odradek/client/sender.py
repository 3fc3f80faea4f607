"""The task that turns ready batches into Produce requests and settles them when answered."""

from __future__ import annotations

import asyncio
import logging

from odradek.client.config import ProducerConfig
from odradek.client.network_client import NetworkClient
from odradek.client.producer_batch import ProducerBatch
from odradek.client.record_accumulator import RecordAccumulator
from odradek.clock import SYSTEM_CLOCK
from odradek.errors import KafkaError, RequestTimedOutError, UnknownServerError, error_for_code
from odradek.protocol.produce import (
    Acks,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
)
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class Sender:
    """Sends the accumulator's ready batches, retrying retriable failures.

    At most one request per partition is in flight, so a batch being retried goes out again
    before any later batch of its partition: records stay in order even across retries (Kafka
    with ``max.in.flight.requests.per.connection=1``, kept per partition so that partitions do
    not wait for each other). Each request carries one batch of each ready partition, up to
    ``max_request_size`` (as Kafka's producer sends them: a partition's whole backlog in one
    append could exceed the topic's ``segment.bytes``, which the broker refuses). Delivery is
    at least once: a batch whose response was lost is sent again and may be stored twice.
    """

    def __init__(
        self, client: NetworkClient, accumulator: RecordAccumulator, config: ProducerConfig
    ) -> None:
        self._client = client
        self._accumulator = accumulator
        self._config = config
        self._acks = config.required_acks()
        self._in_flight: set[TopicPartition] = set()
        self._requests: set[asyncio.Task[None]] = set()
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
        while not (self._closing and not self._accumulator.has_incomplete()):
            self._wakeup.clear()
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

    def _send_ready(self, now: int) -> int | None:
        """Expire old batches and send the ready ones; ms until something is due, or None."""
        for batch in self._accumulator.expired_batches(now, self._config.delivery_timeout_ms):
            expired = RequestTimedOutError(
                f"{batch.record_count} record(s) for {batch.topic_partition} expired: "
                f"{now - batch.created_ms} ms have passed since the batch was created"
            )
            self._settle(batch, error=expired)
        ready, delay_ms = self._accumulator.ready(now, self._in_flight)
        if ready:
            drained = self._accumulator.drain(ready, self._config.max_request_size, now)
            if drained:
                self._in_flight.update(drained)
                task = asyncio.create_task(self._produce(drained))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
        return delay_ms

    async def _produce(self, drained: dict[TopicPartition, ProducerBatch]) -> None:
        request = ProduceRequest(
            tuple(
                ProducePartitionData(tp.topic, tp.partition, batch.close())
                for tp, batch in drained.items()
            ),
            self._acks,
            self._config.request_timeout_ms,
        )
        try:
            if self._acks is Acks.NONE:
                await self._client.send_no_response(request)
                for batch in drained.values():
                    self._settle(batch)  # acks 0: no offsets are known
                return
            response = await self._client.send(request)
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
            self._in_flight.difference_update(drained)
            self._wakeup.set()

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
        if not (
            error.retriable
            and batch.attempts < self._config.retries
            and now + backoff_ms < deadline
        ):
            self._settle(batch, error=error)
            return
        batch.attempts += 1
        batch.retry_at_ms = now + backoff_ms
        logger.warning(
            "retrying %d record(s) for %s (attempt %d): %s",
            batch.record_count,
            batch.topic_partition,
            batch.attempts,
            error,
        )
        self._accumulator.reenqueue(batch)

    def _settle(
        self,
        batch: ProducerBatch,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        error: KafkaError | None = None,
    ) -> None:
        self._accumulator.deallocate(batch)
        batch.complete(base_offset, log_append_time_ms, error)
