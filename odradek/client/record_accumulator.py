"""Per-partition queues of batches between the threads that send records and the sender task."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Iterable, Sequence

from odradek.client.produce_request_result import ProduceRequestResult
from odradek.client.producer_batch import ProducerBatch
from odradek.client.record_metadata import FutureRecordMetadata
from odradek.record.compression import CompressionType
from odradek.topic_partition import TopicPartition

SEQUENCE_MODULUS = 2**31
"""Sequence numbers wrap to 0 after Integer.MAX_VALUE, as Kafka's do."""


def sequence_distance(start: int, sequence: int) -> int:
    """How far ``sequence`` lies after ``start`` (negative: before it), across the wrap.

    The batches of one partition in flight span far less than half the sequence space, so
    the nearer way round is the true one: 2^31 - 2 comes 2 before 0.
    """
    distance = (sequence - start) % SEQUENCE_MODULUS
    return distance - SEQUENCE_MODULUS if distance >= SEQUENCE_MODULUS // 2 else distance


class RecordAccumulator:
    """Collects records into batches per partition and hands the sender those ready to go.

    A partition is ready when its first batch is full, has waited ``linger_ms``, its retry
    backoff is over, or a flush or close is under way. Appends may come from any thread (the
    sync Producer appends on the caller's thread, saving a hop to the event loop per record),
    so the queues are guarded by a lock; everything else runs on the event loop thread.
    ``buffer_memory`` bounds the bytes of records not yet acknowledged. A transactional
    producer's batches are marked transactional.
    """

    def __init__(
        self,
        *,
        batch_size: int,
        compression: CompressionType,
        linger_ms: int,
        buffer_memory: int,
        transactional: bool = False,
    ) -> None:
        self._batch_size = batch_size
        self._transactional = transactional
        self._compression = compression
        self._linger_ms = linger_ms
        self._buffer_memory = buffer_memory
        self._lock = threading.Lock()
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._buffered_bytes = 0
        self._room = asyncio.Event()
        self._flushes_in_progress = 0
        self._closing = False

    def has_room(self) -> bool:
        return self._buffered_bytes < self._buffer_memory

    async def wait_for_room(self) -> None:
        """Return once acknowledged batches have freed ``buffer_memory``."""
        while not self.has_room():
            self._room.clear()
            await self._room.wait()

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def append(
        self,
        topic_partition: TopicPartition,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        size: int,
        now_ms: int,
        abort_on_new_batch: bool = False,
    ) -> tuple[FutureRecordMetadata, bool] | None:
        """Add a record of estimated ``size`` bytes to its partition's open batch.

        Returns its future and whether a new batch was started (the sender should look again),
        or None when the record needs a new batch and ``abort_on_new_batch`` is set (the
        sticky partitioner then picks another partition first, as in Kafka).
        """
        with self._lock:
            queue = self._queues.get(topic_partition)
            if queue is None:
                queue = self._queues[topic_partition] = deque()
            elif queue:
                future = queue[-1].try_append(
                    timestamp, key, value, headers, size, self._batch_size
                )
                if future is not None:
                    self._buffered_bytes += size
                    return future, False
            if abort_on_new_batch:
                return None
            batch = ProducerBatch(topic_partition, self._compression, now_ms, self._transactional)
            future = batch.try_append(timestamp, key, value, headers, size, self._batch_size)
            queue.append(batch)
            self._incomplete.add(batch)
            self._buffered_bytes += size
            return future, True

    def append_many(
        self,
        topic_partition: TopicPartition,
        timestamp: int,
        keys: list[bytes | None] | None,
        values: list[bytes | None],
        now_ms: int,
    ) -> tuple[list[tuple[ProduceRequestResult, int, int]], bool]:
        """Add the records (no headers) to the partition's open batch and as many new ones as
        they need, in order: one call per batch, not per record.

        Returns, per batch used, its result, the first record's place in it and how many
        records went into it; and whether a new batch was started.
        """
        batch_size = self._batch_size
        parts = []
        new_batch = False
        start = 0
        with self._lock:
            queue = self._queues.get(topic_partition)
            if queue is None:
                queue = self._queues[topic_partition] = deque()
            while start < len(values):
                batch = queue[-1] if queue else None
                if batch is None or batch.is_full(batch_size):
                    batch = ProducerBatch(
                        topic_partition, self._compression, now_ms, self._transactional
                    )
                    queue.append(batch)
                    self._incomplete.add(batch)
                    new_batch = True
                place = batch.record_count
                reserved = batch.reserved_bytes
                try:
                    stopped = batch.try_append_many(timestamp, keys, values, start, batch_size)
                except Exception:
                    if not batch.record_count:  # an empty batch must never be sent
                        queue.pop()
                        self._incomplete.discard(batch)
                    raise
                if stopped == start:  # closed, or the next record does not fit
                    batch = ProducerBatch(
                        topic_partition, self._compression, now_ms, self._transactional
                    )
                    queue.append(batch)
                    self._incomplete.add(batch)
                    new_batch = True
                    continue
                self._buffered_bytes += batch.reserved_bytes - reserved
                parts.append((batch.result, place, stopped - start))
                start = stopped
        return parts, new_batch

    def ready(
        self, now_ms: int, muted: set[TopicPartition]
    ) -> tuple[list[TopicPartition], int | None]:
        """Partitions (not in ``muted``) with a batch to send now, and ms until the next one."""
        ready = []
        next_ms: int | None = None
        with self._lock:
            for topic_partition, queue in self._queues.items():
                if not queue or topic_partition in muted:
                    continue
                send_at = self._send_at(queue[0], len(queue) > 1)
                if send_at <= now_ms:
                    ready.append(topic_partition)
                elif next_ms is None or send_at - now_ms < next_ms:
                    next_ms = send_at - now_ms
        return ready, next_ms

    def drain(
        self, partitions: Iterable[TopicPartition], max_request_size: int, now_ms: int
    ) -> dict[TopicPartition, ProducerBatch]:
        """Take the first batch of each of ``partitions``, while the request stays within
        ``max_request_size`` (the first batch always goes, however large).

        One batch per partition, as Kafka's ``RecordAccumulator.drain`` takes: the broker
        refuses a partition's whole append when it exceeds the topic's ``segment.bytes``
        (RECORD_LIST_TOO_LARGE, not retriable), so sending a partition's backlog together
        would lose records on topics with small segments; a batch is bounded by ``batch_size``
        instead. The batches are built (closed) on the way.
        """
        drained: dict[TopicPartition, ProducerBatch] = {}
        size = 0
        with self._lock:
            for topic_partition in partitions:
                queue = self._queues[topic_partition]
                if not queue or self._send_at(queue[0], len(queue) > 1) > now_ms:
                    continue
                estimate = queue[0].estimated_size
                if size and size + estimate > max_request_size:
                    break
                drained[topic_partition] = queue.popleft()
                size += estimate
        for batch in drained.values():
            batch.close()
        return drained

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch back at the front of its partition's queue, to be retried first; an
        idempotent producer's (numbered) batch goes in sequence order among the numbered
        batches already back, whatever order the failures of its partition's requests in
        flight came in."""
        with self._lock:
            queue = self._queues[batch.topic_partition]
            back = [batch]
            if batch.base_sequence is not None:
                while queue and queue[0].base_sequence is not None:
                    back.append(queue.popleft())
                first = batch.base_sequence
                back.sort(key=lambda queued: sequence_distance(first, queued.base_sequence))
            queue.extendleft(reversed(back))

    def abort_undrained(self) -> list[ProducerBatch]:
        """Remove and return every batch not sent yet (its transaction is aborting or
        failed: Kafka's ``abortUndrainedBatches``); batches in flight are left to settle."""
        with self._lock:
            batches = [batch for queue in self._queues.values() for batch in queue]
            for queue in self._queues.values():
                queue.clear()
        return batches

    def clear_producer_state(self) -> None:
        """Forget the sequences of every queued batch (see ProducerBatch)."""
        with self._lock:
            for queue in self._queues.values():
                for batch in queue:
                    batch.clear_producer_state()

    def expired_batches(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches created more than ``delivery_timeout_ms`` ago."""
        expired = []
        with self._lock:
            for queue in self._queues.values():
                while queue and queue[0].created_ms + delivery_timeout_ms <= now_ms:
                    expired.append(queue.popleft())
        return expired

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a batch that is acknowledged or failed, freeing its buffer memory."""
        with self._lock:
            self._incomplete.discard(batch)
            self._buffered_bytes -= batch.reserved_bytes
        self._room.set()

    def begin_flush(self) -> list[ProduceRequestResult]:
        """Make every batch ready now; the results of all batches not yet complete."""
        with self._lock:
            self._flushes_in_progress += 1
            return [batch.result for batch in self._incomplete]

    def end_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress -= 1

    def begin_close(self) -> None:
        """From now on every batch is ready at once."""
        self._closing = True

    def abandon_incomplete(self) -> list[ProducerBatch]:
        """Remove every batch not yet complete (a forced close) and return them."""
        with self._lock:
            batches = list(self._incomplete)
            for queue in self._queues.values():
                queue.clear()
        return batches

    def _send_at(self, batch: ProducerBatch, followed: bool) -> int:
        """When the first batch of a queue may be sent (ms since the epoch; 0 = now)."""
        if batch.attempts:
            return batch.retry_at_ms
        if followed or batch.is_full(self._batch_size):
            return 0
        if self._closing or self._flushes_in_progress:
            return 0
        return batch.created_ms + self._linger_ms
