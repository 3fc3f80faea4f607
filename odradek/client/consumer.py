"""Consumers: AsyncConsumer (the asyncio core) and Consumer (its blocking twin).

Partitions are assigned by hand (``assign``) or by the consumer's group (``subscribe`` with a
``group_id``). A partition starts where ``seek`` puts it, else at the group's committed
offset, else where ``auto_offset_reset`` says (``earliest``, ``latest``, or ``none`` to raise
instead). With ``enable_auto_commit`` the positions are committed every
``auto_commit_interval_ms``, before a rebalance and on close.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Self

from odradek.client.blocking_client import BlockingClient
from odradek.client.config import ConsumerConfig
from odradek.client.consumer_coordinator import ConsumerCoordinator, ConsumerGroupMetadata
from odradek.client.consumer_rebalance_listener import ConsumerRebalanceListener
from odradek.client.consumer_record import ConsumerRecord
from odradek.client.event_loop_thread import shared_event_loop_thread
from odradek.client.fetcher import Fetcher
from odradek.client.network_client import NetworkClient, retry_log_level
from odradek.client.offset_lookup import OffsetAndTimestamp, list_offsets
from odradek.client.subscription_state import SubscriptionState
from odradek.errors import InvalidConfigError, KafkaError, OffsetOutOfRangeError
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class AsyncConsumer:
    """Reads records from assigned partitions. Create it inside a running event loop.

    Configuration: Kafka's consumer settings as keyword arguments (see ConsumerConfig), e.g.
    ``AsyncConsumer(bootstrap_servers="broker:9092", auto_offset_reset="earliest")``.
    """

    def __init__(self, **configs: Any) -> None:
        self.config = ConsumerConfig(**configs)
        self._isolation = self.config.fetch_isolation()
        self._client = NetworkClient(self.config)
        self._subscriptions = SubscriptionState(self.config.auto_offset_reset)
        self._fetcher = Fetcher(self._client, self._subscriptions, self.config)
        self._coordinator: ConsumerCoordinator | None = None
        self._committed_pending: set[TopicPartition] = set()
        if self.config.group_id is not None:
            self._coordinator = ConsumerCoordinator(self._client, self.config, self._subscriptions)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions from now on (partitions kept keep their positions)."""
        if self._coordinator is not None and self._coordinator.is_subscribed:
            raise InvalidConfigError("this consumer subscribed; it cannot also assign")
        partitions = list(partitions)
        if self._coordinator is not None:
            self._committed_pending.update(
                p for p in partitions if not self._subscriptions.is_assigned(p)
            )
        self._subscriptions.assign(partitions)

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Read the partitions the group assigns among ``topics``: names, or a regex
        (``re.Pattern``, or a string starting with ``^``) matched against every topic."""
        if self._coordinator is None:
            raise InvalidConfigError("subscribe needs a group_id")
        if isinstance(topics, str) and topics.startswith("^"):
            topics = re.compile(topics)
        if isinstance(topics, re.Pattern):
            self._coordinator.subscribe(None, topics, listener)
        else:
            names = [topics] if isinstance(topics, str) else list(topics)
            self._coordinator.subscribe(names, None, listener)

    def group_metadata(self) -> ConsumerGroupMetadata | None:
        """The group, generation and member id this consumer has now (Kafka's
        ``groupMetadata()``); None without a group_id."""
        coordinator = self._coordinator
        if coordinator is None:
            return None
        return ConsumerGroupMetadata(
            coordinator.group_id,
            coordinator.generation_id,
            coordinator.member_id,
            self.config.group_instance_id,
        )

    def subscription(self) -> set[str]:
        """The topics subscribed to (those a pattern matched last)."""
        return set(self._coordinator.subscribed_topics) if self._coordinator else set()

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition) for the
        group, returning once the broker has made them durable. CommitFailedError when the
        group rebalanced meanwhile."""
        coordinator = self._require_group()
        await coordinator.commit(
            dict(offsets) if offsets is not None else self._subscriptions.fetch_positions()
        )

    def commit_async(
        self, offsets: Mapping[TopicPartition, int] | None = None
    ) -> asyncio.Task[None]:
        """Start a commit and return its task at once (await it, or add a done callback)."""
        snapshot = dict(offsets) if offsets is not None else self._subscriptions.fetch_positions()
        return asyncio.get_running_loop().create_task(self.commit(snapshot))

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where there is none)."""
        return await self._require_group().committed(list(partitions))

    def _require_group(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise InvalidConfigError("committed offsets need a group_id")
        return self._coordinator

    def assignment(self) -> set[TopicPartition]:
        return self._subscriptions.assignment

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on the next poll."""
        self._subscriptions.seek(partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the log start offset of ``partitions`` (default: all assigned), lazily."""
        for tp in partitions or self.assignment():
            self._subscriptions.request_reset(tp, EARLIEST_TIMESTAMP)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the end of ``partitions`` (default: all assigned), lazily.

        With isolation ``high_watermark`` the end is the high watermark.
        """
        for tp in partitions or self.assignment():
            self._subscriptions.request_reset(tp, LATEST_TIMESTAMP)

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record to be returned for ``partition``."""
        position = self._subscriptions.position(partition)
        if position is None:
            await self._reset_positions()
            position = self._subscriptions.position(partition)
        return position

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first offset whose timestamp is >= the given one.

        None for a partition with no record that recent.
        """
        found = await list_offsets(self._client, timestamps, self._isolation)
        return {tp: (entry if entry.offset >= 0 else None) for tp, entry in found.items()}

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The log start offset of each partition."""
        return await self._offsets(partitions, EARLIEST_TIMESTAMP)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset after the last readable record (the high watermark or log end offset)."""
        return await self._offsets(partitions, LATEST_TIMESTAMP)

    async def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """The next records, at most ``max_poll_records``; [] if none came in ``timeout_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            if self._coordinator is not None and self._coordinator.is_subscribed:
                remaining = deadline - loop.time()
                if not await self._coordinator.poll(remaining):
                    return []
            await self._reset_positions()
            records = self._fetcher.fetched_records(self.config.max_poll_records)
            self._fetcher.send_fetch()
            remaining = deadline - loop.time()
            if records or remaining <= 0:
                return records
            await self._fetcher.wait_for_data(remaining)

    def try_poll(self) -> list[ConsumerRecord] | None:
        """What :meth:`poll` would return at once, taken on the caller's thread (safe from
        any thread); None when the poll needs the event loop (the group to keep up with,
        offsets to look up, no fetch in flight to wait for). [] when a fetch is in flight
        but nothing has come yet: :meth:`wait_for_data` waits for it from another thread."""
        coordinator = self._coordinator
        if (
            self._committed_pending
            or (coordinator is not None and coordinator.is_subscribed)
            or not self._subscriptions.all_positioned()
        ):
            return None
        return self._fetcher.try_fetched_records(self.config.max_poll_records)

    def wait_for_data(self, timeout_s: float) -> None:
        """Block the calling thread (never the event loop's) until fetched data may be
        there, after a :meth:`try_poll` that gave []."""
        self._fetcher.wait_for_data_threadsafe(timeout_s)

    async def close(self) -> None:
        if self._coordinator is not None:
            await self._coordinator.close()
        await self._fetcher.close()
        await self._client.close()

    async def _seek_to_committed(self) -> None:
        """Partitions assigned by hand to a consumer with a group start at its committed
        offsets, where it has them."""
        pending = [
            tp
            for tp in self._committed_pending
            if self._subscriptions.is_assigned(tp) and self._subscriptions.position(tp) is None
        ]
        self._committed_pending.clear()
        if not pending or self._coordinator is None:
            return
        for tp, offset in (await self._coordinator.committed(pending)).items():
            if offset is not None:
                self._subscriptions.seek(tp, offset)

    async def _offsets(
        self, partitions: Iterable[TopicPartition], target: int
    ) -> dict[TopicPartition, int]:
        targets = dict.fromkeys(partitions, target)
        found = await list_offsets(self._client, targets, self._isolation)
        return {tp: entry.offset for tp, entry in found.items()}

    async def _reset_positions(self) -> None:
        """Look up the offsets of partitions waiting for a reset, and seek to them."""
        await self._seek_to_committed()
        due, stuck = self._subscriptions.resets_due()
        if stuck:
            names = ", ".join(map(str, sorted(stuck)))
            raise OffsetOutOfRangeError(
                f"no position for {names} and auto_offset_reset is 'none'; seek first"
            )
        if not due:
            return
        try:
            found = await list_offsets(self._client, due, self._isolation)
        except KafkaError as error:
            if not error.retriable:
                raise
            logger.log(retry_log_level(error), "resetting positions failed, will retry: %s", error)
            return
        for tp, entry in found.items():
            if self._subscriptions.is_assigned(tp) and self._subscriptions.position(tp) is None:
                self._subscriptions.seek(tp, entry.offset)


class Consumer(BlockingClient):
    """The blocking consumer: an AsyncConsumer on the shared background event loop."""

    def __init__(self, **configs: Any) -> None:
        self._thread = shared_event_loop_thread()
        self._consumer = self._thread.call(AsyncConsumer, **configs)

    @property
    def config(self) -> ConsumerConfig:
        return self._consumer.config

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._thread.call(self._consumer.assign, list(partitions))

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """As AsyncConsumer.subscribe; the listener runs on a worker thread, so it may call
        this consumer (commit, seek, position)."""
        wrapped = _ThreadedListener(listener) if listener is not None else None
        if not isinstance(topics, str | re.Pattern):
            topics = list(topics)
        self._thread.call(self._consumer.subscribe, topics, wrapped)

    def subscription(self) -> set[str]:
        return self._thread.call(self._consumer.subscription)

    def group_metadata(self) -> ConsumerGroupMetadata | None:
        return self._thread.call(self._consumer.group_metadata)

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        self._thread.run(self._consumer.commit(offsets))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        callback: Callable[[BaseException | None], object] | None = None,
    ) -> None:
        """Start a commit and return at once; ``callback`` gets its error (None on success),
        on the client's event loop thread."""

        def start() -> None:
            task = self._consumer.commit_async(offsets)
            if callback is not None:
                task.add_done_callback(
                    lambda done: callback(None if done.cancelled() else done.exception())
                )
            else:
                task.add_done_callback(_log_commit_failure)

        self._thread.call(start)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self._thread.run(self._consumer.committed(list(partitions)))

    def assignment(self) -> set[TopicPartition]:
        return self._thread.call(self._consumer.assignment)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._thread.call(self._consumer.seek, partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._thread.call(self._consumer.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._thread.call(self._consumer.seek_to_end, *partitions)

    def position(self, partition: TopicPartition) -> int:
        return self._thread.run(self._consumer.position(partition))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._thread.run(self._consumer.offsets_for_times(timestamps))

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._thread.run(self._consumer.end_offsets(list(partitions)))

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """As AsyncConsumer.poll. Records already fetched are taken on the caller's thread,
        and a poll waiting for the fetch in flight is woken by the response itself: no round
        trip through the event loop thread per poll, whose two thread wake-ups (and turns at
        the GIL) lay on each record's way from fetched to delivered."""
        consumer = self._consumer
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            records = consumer.try_poll()
            remaining = deadline - time.monotonic()
            if records is None:
                return self._thread.run(consumer.poll(max(0, round(remaining * 1000))))
            if records or remaining <= 0:
                return records
            consumer.wait_for_data(remaining)

    def close(self) -> None:
        self._thread.run(self._consumer.close())


class _ThreadedListener(ConsumerRebalanceListener):
    """Runs a blocking consumer's listener on a worker thread, off the event loop."""

    def __init__(self, listener: ConsumerRebalanceListener) -> None:
        self._listener = listener

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._listener.on_partitions_revoked, revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._listener.on_partitions_assigned, assigned)


def _log_commit_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("asynchronous commit failed: %s", task.exception())
