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
    not wait for each other). Each request carries every ready batch of its partitions, up to
    ``max_request_size``. Delivery is at least once: a batch whose response was lost is sent
    again and may be stored twice.
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

    async def _produce(self, drained: dict[TopicPartition, list[ProducerBatch]]) -> None:
        request = ProduceRequest(
            tuple(
                ProducePartitionData(tp.topic, tp.partition, b"".join(b.close() for b in batches))
                for tp, batches in drained.items()
            ),
            self._acks,
            self._config.request_timeout_ms,
        )
        try:
            if self._acks is Acks.NONE:
                await self._client.send_no_response(request)
                for batches in drained.values():
                    for batch in batches:
                        self._settle(batch)  # acks 0: no offsets are known
                return
            response = await self._client.send(request)
        except KafkaError as error:
            for batches in drained.values():
                self._retry_or_fail(batches, error)
        except Exception as error:  # a bug must not leave futures unsettled forever
            logger.exception("produce request failed unexpectedly")
            for batches in drained.values():
                self._retry_or_fail(batches, UnknownServerError(repr(error)))
        else:
            self._handle_response(drained, response.partitions)
        finally:
            self._in_flight.difference_update(drained)
            self._wakeup.set()

    def _handle_response(
        self,
        drained: dict[TopicPartition, list[ProducerBatch]],
        partitions: tuple[ProducePartitionResponse, ...],
    ) -> None:
        answers = {(p.topic, p.partition): p for p in partitions}
        for tp, batches in drained.items():
            answer = answers.get((tp.topic, tp.partition))
            if answer is None:
                self._retry_or_fail(batches, UnknownServerError(f"no response for {tp}"))
            elif answer.error:
                self._retry_or_fail(batches, error_for_code(answer.error, answer.message or ""))
            else:
                self._settle_all(batches, answer)

    def _settle_all(self, batches: list[ProducerBatch], answer: ProducePartitionResponse) -> None:
        """Complete the batches of one partition entry; their offsets follow on one another."""
        base_offset = answer.base_offset
        for batch in batches:
            self._settle(batch, base_offset, answer.log_append_time_ms)
            if base_offset >= 0:
                base_offset += batch.record_count

    def _retry_or_fail(self, batches: list[ProducerBatch], error: KafkaError) -> None:
        now = SYSTEM_CLOCK.milliseconds()
        backoff_ms = self._config.retry_backoff_ms
        retry = []
        for batch in batches:
            deadline = batch.created_ms + self._config.delivery_timeout_ms
            if (
                error.retriable
                and batch.attempts < self._config.retries
                and (now + backoff_ms < deadline)
            ):
                batch.attempts += 1
                batch.retry_at_ms = now + backoff_ms
                retry.append(batch)
            else:
                self._settle(batch, error=error)
        if retry:
            logger.warning(
                "retrying %d batch(es) for %s (attempt %d): %s",
                len(retry),
                retry[0].topic_partition,
                retry[0].attempts,
                error,
            )
            self._accumulator.reenqueue(retry)

    def _settle(
        self,
        batch: ProducerBatch,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        error: KafkaError | None = None,
    ) -> None:
        self._accumulator.deallocate(batch)
        batch.complete(base_offset, log_append_time_ms, error)
