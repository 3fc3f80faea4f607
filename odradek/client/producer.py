"""Producers: AsyncProducer (the asyncio core) and Producer (its blocking twin for threads).

A send puts the record into its partition's open batch and returns a future at once; the
sender task ships batches when they are full (``batch_size``) or have waited ``linger_ms``,
and settles the futures when the broker answers (``acks``). Records of one partition are
delivered in the order they were sent, also across retries. Records sent while the topic's
partitions are unknown, or while ``buffer_memory`` is full, wait their turn for up to
``max_block_ms`` behind each other, so order holds for them too.

With a ``transactional_id`` the producer is transactional, as Kafka's: ``init_transactions``
once, then ``begin_transaction``, sends (and ``send_offsets_to_transaction``), and
``commit_transaction`` or ``abort_transaction``; a read_committed consumer sees a
transaction's records all at once, after its commit, and never those of an aborted one
(TransactionManager has the states and errors).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Mapping, Sequence
from types import NoneType, TracebackType
from typing import Any, NamedTuple, Self

from odradek.client.blocking_client import BlockingClient
from odradek.client.config import ProducerConfig
from odradek.client.consumer_coordinator import ConsumerGroupMetadata
from odradek.client.event_loop_thread import shared_event_loop_thread
from odradek.client.network_client import NetworkClient
from odradek.client.partitioner import StickyPartitioner
from odradek.client.producer_batch import RECORD_OVERHEAD_BOUND, estimated_record_size
from odradek.client.producer_metadata import ProducerMetadata
from odradek.client.record_accumulator import RecordAccumulator
from odradek.client.record_metadata import (
    FutureRecordMetadata,
    FutureRecordsMetadata,
    RecordMetadata,
)
from odradek.client.sender import Sender
from odradek.client.transaction_manager import IllegalStateError, TransactionManager
from odradek.clock import SYSTEM_CLOCK
from odradek.errors import (
    MessageTooLargeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from odradek.topic_partition import TopicPartition

Headers = Sequence[tuple[str, bytes | None]]


class _Record(NamedTuple):
    """The arguments of one send, kept while the record waits to be appended."""

    topic: str
    value: bytes | None
    key: bytes | None
    headers: Headers
    partition: int | None
    timestamp_ms: int | None


class _Records(NamedTuple):
    """The arguments of one send_many, kept while the records wait to be appended."""

    topic: str
    values: list[bytes | None]
    keys: list[bytes | None] | None
    partition: int | None
    timestamp_ms: int | None


async def _delivery(appended: asyncio.Future[FutureRecordMetadata]) -> RecordMetadata:
    """The RecordMetadata of a record that had to wait before it was appended."""
    return await (await appended)


def _listed(items: Sequence[bytes | None] | None) -> list[bytes | None] | None:
    """The records' keys or values as a list (the C writer reads lists), copied only if need be."""
    return items if items is None or type(items) is list else list(items)


def _require_bytes(items: list[bytes | None], what: str) -> None:
    """TypeError unless every item is bytes or None (a pass at C speed over the types)."""
    for kind in set(map(type, items)):
        if kind is not NoneType and not issubclass(kind, bytes):
            raise TypeError(f"a record {what} must be bytes or None, not {kind.__name__}")


class AsyncProducer:
    """Sends records to the broker in batches. Create it inside a running event loop.

    Configuration: Kafka's producer settings as keyword arguments (see ProducerConfig), e.g.
    ``AsyncProducer(bootstrap_servers="broker:9092", linger_ms=10, compression_type="zstd")``.
    The broker connection is opened on the first send.
    """

    def __init__(self, **configs: Any) -> None:
        self.config = ProducerConfig(**configs)
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._client = NetworkClient(self.config)
        self._metadata = ProducerMetadata(self._client, self.config.retry_backoff_ms)
        self._partitioner = StickyPartitioner()
        transactional_id = self.config.transactional_id
        self._transactions = (
            TransactionManager(
                self._client,
                transactional_id,
                self.config.transaction_timeout_ms,
                self.config.retry_backoff_ms,
            )
            if transactional_id is not None
            else None
        )
        self._accumulator = RecordAccumulator(
            batch_size=self.config.batch_size,
            compression=self.config.compression(),
            linger_ms=self.config.linger_ms,
            buffer_memory=self.config.buffer_memory,
            transactional=transactional_id is not None,
        )
        self._sender = Sender(self._client, self._accumulator, self.config, self._transactions)
        self._sender_task = self._loop.create_task(self._sender.run())
        self._wakeup_scheduled = False  # a wake-up of the sender from another thread is queued
        self._backlog: deque[tuple[_Record | _Records, asyncio.Future[Any]]] = deque()
        self._backlog_task: asyncio.Task[None] | None = None
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Awaitable[RecordMetadata]:
        """Queue a record; await the result for its RecordMetadata once the broker has it.

        Returns at once. Errors found on the spot (a record larger than ``max_request_size``,
        a partition the topic does not have, a closed producer) are raised here; delivery
        errors are raised by the awaitable.
        """
        future = self.try_append(topic, value, key, headers, partition, timestamp_ms)
        if future is not None:
            return future
        appended = self._enqueue(_Record(topic, value, key, headers, partition, timestamp_ms))
        return self._loop.create_task(_delivery(appended))

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Awaitable[list[RecordMetadata]]:
        """Queue many records (without headers) at once; await the result for their
        RecordMetadata, in the order given, once the broker has them all.

        What a :meth:`send` of each would do, in order and with the same bytes on the wire,
        for a fraction of the cost per record: the records are written into batches a batch
        at a time (in C where it is built), and no future is made per record. ``keys``, if
        given, is as long as ``values``. All records get one timestamp (``timestamp_ms``, or
        now). Without a partition or keys they all go to the sticky partition, which moves on
        once they have started a batch there (as with :meth:`send`).
        """
        future = self.try_append_many(topic, values, keys, partition, timestamp_ms)
        if future is not None:
            return future
        appended = self._enqueue(
            _Records(topic, _listed(values), _listed(keys), partition, timestamp_ms)
        )
        return self._loop.create_task(_delivery(appended))

    def try_append_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordsMetadata | None:
        """Append the records if that needs no waiting (see :meth:`try_append`), else None.
        Safe from any thread."""
        if self._closed:
            raise RuntimeError("the producer is closed")
        if self._transactions is not None:
            self._transactions.check_can_send()
        if self._backlog or not self._accumulator.has_room():
            return None
        partitions = self._metadata.partitions(topic)
        if partitions is None:
            return None
        return self._append_many(
            partitions, topic, _listed(values), _listed(keys), partition, timestamp_ms
        )

    async def append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Like :meth:`send`, but wait until the record is in a batch (back-pressure).

        Waits for the topic's metadata and for ``buffer_memory`` to have room, at most
        ``max_block_ms``, then returns the record's future.
        """
        future = self.try_append(topic, value, key, headers, partition, timestamp_ms)
        if future is not None:
            return future
        return await self._enqueue(_Record(topic, value, key, headers, partition, timestamp_ms))

    async def append_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordsMetadata:
        """Like :meth:`send_many`, but wait until the records are in batches (back-pressure)."""
        future = self.try_append_many(topic, values, keys, partition, timestamp_ms)
        if future is not None:
            return future
        return await self._enqueue(
            _Records(topic, _listed(values), _listed(keys), partition, timestamp_ms)
        )

    def try_append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata | None:
        """Append the record if that needs no waiting, else None. Safe from any thread.

        It must wait when the topic's partitions are not known yet, ``buffer_memory`` is full,
        or earlier records are still waiting (they go first). A transactional producer
        sends only inside a transaction (IllegalStateError otherwise).
        """
        if self._closed:
            raise RuntimeError("the producer is closed")
        if self._transactions is not None:
            self._transactions.check_can_send()
        if self._backlog or not self._accumulator.has_room():
            return None
        partitions = self._metadata.partitions(topic)
        if partitions is None:
            return None
        return self._append(partitions, topic, value, key, headers, partition, timestamp_ms)

    async def flush(self) -> None:
        """Send every record queued so far at once (ignoring linger) and wait for them.

        Returns when each is acknowledged or has failed; errors stay with the records' futures.
        """
        if self._backlog:
            await asyncio.wait([self._backlog[-1][1]])
        results = self._accumulator.begin_flush()
        self._sender.wakeup()
        try:
            for result in results:
                await result.completion()
        finally:
            self._accumulator.end_flush()

    # --- transactions (Kafka's transactional producer API) ------------------------------------

    async def init_transactions(self) -> None:
        """Kafka's ``initTransactions``, once, before the first transaction: gets the producer
        id and epoch of ``transactional_id`` from its coordinator, fencing any other producer
        with that id (an open transaction of it is aborted). Waits up to ``max_block_ms``."""
        await self._require_transactions().init_transactions(self._block_s())

    def begin_transaction(self) -> None:
        """Kafka's ``beginTransaction``: the records sent from now on form one transaction."""
        self._require_transactions().begin_transaction()

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_metadata: ConsumerGroupMetadata
    ) -> None:
        """Kafka's ``sendOffsetsToTransaction``: commit the consumer group's offsets (per
        partition, the next offset to read) with the transaction: consume, transform and
        produce exactly once. ``group_metadata`` is the consumer's ``group_metadata()``."""
        await self._require_transactions().send_offsets_to_transaction(
            offsets, group_metadata, self._block_s()
        )

    async def commit_transaction(self) -> None:
        """Kafka's ``commitTransaction``: send every record of the transaction, then commit
        it. If a record could not be sent the transaction fails instead, with that error:
        abort it then (``abort_transaction``); a fenced producer (ProducerFencedError) can
        only be closed."""
        await self._require_transactions().end_transaction(True, self.flush, self._block_s())

    async def abort_transaction(self) -> None:
        """Kafka's ``abortTransaction``: records not sent yet fail with
        TransactionAbortedError, and none of the transaction's records are ever read by a
        read_committed consumer."""
        await self._require_transactions().end_transaction(False, self.flush, self._block_s())

    def _require_transactions(self) -> TransactionManager:
        if self._transactions is None:
            raise IllegalStateError(
                "transactional methods need a transactional_id in the producer's config"
            )
        if self._closed:
            raise RuntimeError("the producer is closed")
        return self._transactions

    def _block_s(self) -> float:
        return self.config.max_block_ms / 1000

    async def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop; after ``timeout`` seconds, fail what is left.

        Records not delivered by then fail with RequestTimedOutError.
        """
        if self._closed:
            return
        deadline = None if timeout is None else self._loop.time() + timeout
        try:
            async with asyncio.timeout_at(deadline):
                await self.flush()
        except TimeoutError:
            pass
        self._closed = True
        unsent = RequestTimedOutError(f"producer closed after {timeout}s with records unsent")
        if self._backlog_task is not None:
            self._backlog_task.cancel()
        for _, appended in self._backlog:
            if not appended.done():
                appended.set_exception(unsent)
        self._sender.initiate_close()
        try:
            async with asyncio.timeout_at(deadline):
                await asyncio.shield(self._sender_task)
        except TimeoutError:
            self._sender_task.cancel()
            await self._sender.abort(unsent)
        await self._client.close()

    def _enqueue(self, record: _Record | _Records) -> asyncio.Future[Any]:
        """Queue a record that has to wait; the future gives its FutureRecordMetadata.

        Waiting records are appended one by one, in the order they came.
        """
        appended: asyncio.Future[Any] = self._loop.create_future()
        self._backlog.append((record, appended))
        if self._backlog_task is None or self._backlog_task.done():
            self._backlog_task = self._loop.create_task(self._drain_backlog())
        return appended

    async def _drain_backlog(self) -> None:
        while self._backlog:
            record, appended = self._backlog[0]
            try:
                future = await self._append_when_ready(record)
            except Exception as error:  # whatever it is, it belongs to this record
                if not appended.done():
                    appended.set_exception(error)
            else:
                if not appended.done():
                    appended.set_result(future)
            self._backlog.popleft()

    async def _append_when_ready(
        self, record: _Record | _Records
    ) -> FutureRecordMetadata | FutureRecordsMetadata:
        max_block_ms = self.config.max_block_ms
        try:
            async with asyncio.timeout(max_block_ms / 1000):
                partitions = await self._metadata.fetch_partitions(record.topic)
                await self._accumulator.wait_for_room()
        except TimeoutError:
            raise RequestTimedOutError(
                f"topic {record.topic!r} unknown or buffer_memory full for "
                f"max_block_ms={max_block_ms}"
            ) from None
        if isinstance(record, _Records):
            return self._append_many(partitions, *record)
        return self._append(partitions, *record)

    def _append(
        self,
        partitions: tuple[TopicPartition, ...],
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: Headers,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> FutureRecordMetadata:
        """Put the record into its partition's batch; the hot path of every send."""
        size = estimated_record_size(key, value, headers)
        if size > self.config.max_request_size:
            raise MessageTooLargeError(
                f"the record is {size} bytes, more than max_request_size "
                f"{self.config.max_request_size}"
            )
        now = SYSTEM_CLOCK.milliseconds()
        timestamp = now if timestamp_ms is None else timestamp_ms
        count = len(partitions)
        sticky = partition is None and key is None
        if partition is None:
            partition = self._partitioner.partition(topic, key, count)
        elif not 0 <= partition < count:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has partitions 0..{count - 1}, not {partition}"
            )
        accumulator = self._accumulator
        appended = accumulator.append(
            partitions[partition], timestamp, key, value, headers, size, now, sticky
        )
        if appended is None:
            self._partitioner.on_new_batch(topic, count, partition)
            partition = self._partitioner.partition(topic, key, count)
            appended = accumulator.append(
                partitions[partition], timestamp, key, value, headers, size, now
            )
        future, new_batch = appended
        if new_batch:
            self._wake_sender()
        return future

    def _append_many(
        self,
        partitions: tuple[TopicPartition, ...],
        topic: str,
        values: list[bytes | None],
        keys: list[bytes | None] | None,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> FutureRecordsMetadata:
        """Put the records into their partitions' batches, a batch at a time."""
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        _require_bytes(values, "value")  # before any is appended: all or none go
        if keys is not None:
            _require_bytes(keys, "key")
        longest = max(map(len, filter(None, values)), default=0)
        if keys is not None:
            longest += max(map(len, filter(None, keys)), default=0)
        if RECORD_OVERHEAD_BOUND + longest > self.config.max_request_size:
            raise MessageTooLargeError(
                f"a record of {RECORD_OVERHEAD_BOUND + longest} bytes or so is more than "
                f"max_request_size {self.config.max_request_size}"
            )
        now = SYSTEM_CLOCK.milliseconds()
        timestamp = now if timestamp_ms is None else timestamp_ms
        count = len(partitions)
        if partition is not None:
            if not 0 <= partition < count:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has partitions 0..{count - 1}, not {partition}"
                )
            return self._append_to(partitions, partition, topic, values, keys, timestamp, now)
        if keys is None:
            partition = self._partitioner.partition(topic, None, count)
            return self._append_to(
                partitions, partition, topic, values, keys, timestamp, now, sticky=True
            )
        chosen: dict[int, list[int]] = {}  # partition -> indexes of its records
        choose = self._partitioner.partition
        for index, key in enumerate(keys):
            chosen.setdefault(choose(topic, key, count), []).append(index)
        groups = []
        for chosen_partition, indexes in chosen.items():
            future = self._append_to(
                partitions,
                chosen_partition,
                topic,
                [values[i] for i in indexes],
                [keys[i] for i in indexes],
                timestamp,
                now,
            )
            groups.append((future, indexes))
        return FutureRecordsMetadata.of_groups(groups)

    def _append_to(
        self,
        partitions: tuple[TopicPartition, ...],
        partition: int,
        topic: str,
        values: list[bytes | None],
        keys: list[bytes | None] | None,
        timestamp: int,
        now: int,
        sticky: bool = False,
    ) -> FutureRecordsMetadata:
        """Append to one partition; with ``sticky`` (records without keys) a batch started
        there moves later records without keys to another partition, as in :meth:`send`."""
        parts, new_batch = self._accumulator.append_many(
            partitions[partition], timestamp, keys, values, now
        )
        if new_batch:
            if sticky:
                self._partitioner.on_new_batch(topic, len(partitions), partition)
            self._wake_sender()
        return FutureRecordsMetadata(
            [(result, partition, first, count) for result, first, count in parts], topic, timestamp
        )

    def _wake_sender(self) -> None:
        """Have the sender look for ready batches. From another thread, once per wake-up on
        its way: the sender, once woken, sees every batch appended before it runs, so further
        sends skip the loop's self-pipe (a syscall each, and a wake-up of the loop thread)."""
        if threading.get_ident() == self._loop_thread:
            self._sender.wakeup()
        elif not self._wakeup_scheduled:
            self._wakeup_scheduled = True
            self._loop.call_soon_threadsafe(self._wake_sender_on_loop)

    def _wake_sender_on_loop(self) -> None:
        self._wakeup_scheduled = False  # before the sender looks: later batches wake it again
        self._sender.wakeup()


class Producer(BlockingClient):
    """The blocking producer: an AsyncProducer on the shared background event loop.

    ``send`` appends on the caller's thread when it can (no hop to the loop per record) and
    returns a FutureRecordMetadata; call ``.result()`` on it to block for the RecordMetadata.
    Done callbacks run on the event loop thread. Safe to use from several threads.
    """

    def __init__(self, **configs: Any) -> None:
        self._thread = shared_event_loop_thread()
        self._producer = self._thread.call(AsyncProducer, **configs)

    @property
    def config(self) -> ProducerConfig:
        return self._producer.config

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queue a record, blocking only while its topic is unknown or buffer_memory is full."""
        future = self._producer.try_append(topic, value, key, headers, partition, timestamp_ms)
        if future is None:
            future = self._thread.run(
                self._producer.append(topic, value, key, headers, partition, timestamp_ms)
            )
        return future

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordsMetadata:
        """Queue many records at once (see :meth:`AsyncProducer.send_many`); ``.result()``
        of the returned future blocks for their RecordMetadata."""
        future = self._producer.try_append_many(topic, values, keys, partition, timestamp_ms)
        if future is None:
            future = self._thread.run(
                self._producer.append_many(topic, values, keys, partition, timestamp_ms)
            )
        return future

    def flush(self) -> None:
        """Send everything queued and block until each record is acknowledged or failed."""
        self._thread.run(self._producer.flush())

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop (see :meth:`AsyncProducer.close`)."""
        self._thread.run(self._producer.close(timeout))

    def init_transactions(self) -> None:
        """See :meth:`AsyncProducer.init_transactions`."""
        self._thread.run(self._producer.init_transactions())

    def begin_transaction(self) -> None:
        """See :meth:`AsyncProducer.begin_transaction`."""
        self._thread.call(self._producer.begin_transaction)

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_metadata: ConsumerGroupMetadata
    ) -> None:
        """See :meth:`AsyncProducer.send_offsets_to_transaction`."""
        self._thread.run(self._producer.send_offsets_to_transaction(offsets, group_metadata))

    def commit_transaction(self) -> None:
        """See :meth:`AsyncProducer.commit_transaction`."""
        self._thread.run(self._producer.commit_transaction())

    def abort_transaction(self) -> None:
        """See :meth:`AsyncProducer.abort_transaction`."""
        self._thread.run(self._producer.abort_transaction())
