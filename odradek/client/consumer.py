"""Consumers: AsyncConsumer (the asyncio core) and Consumer (its blocking twin).

Partitions are assigned by hand (``assign``); there are no consumer groups or committed
offsets, so a partition starts where ``seek`` puts it or, failing that, where
``auto_offset_reset`` says (``earliest``, ``latest``, or ``none`` to raise instead).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self

from odradek.client.blocking_client import BlockingClient
from odradek.client.config import ConsumerConfig
from odradek.client.consumer_record import ConsumerRecord
from odradek.client.event_loop_thread import shared_event_loop_thread
from odradek.client.fetcher import Fetcher
from odradek.client.network_client import NetworkClient
from odradek.client.offset_lookup import OffsetAndTimestamp, list_offsets
from odradek.client.subscription_state import SubscriptionState
from odradek.errors import KafkaError, OffsetOutOfRangeError
from odradek.protocol.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class AsyncConsumer:
    """Reads records from assigned partitions. Create it inside a running event loop.

    Configuration: Kafka's consumer settings as keyword arguments (see ConsumerConfig), e.g.
    ``AsyncConsumer(bootstrap_servers="broker:9092", auto_offset_reset="earliest")``.
    """

    def __init__(self, **configs: Any) -> None:
        self.config = ConsumerConfig(**configs)
        self._isolation = self.config.isolation_level()
        self._client = NetworkClient(self.config)
        self._subscriptions = SubscriptionState(self.config.auto_offset_reset)
        self._fetcher = Fetcher(self._client, self._subscriptions, self.config)

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
        self._subscriptions.assign(partitions)

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
            await self._reset_positions()
            records = self._fetcher.fetched_records(self.config.max_poll_records)
            self._fetcher.send_fetch()
            remaining = deadline - loop.time()
            if records or remaining <= 0:
                return records
            await self._fetcher.wait_for_data(remaining)

    async def close(self) -> None:
        await self._fetcher.close()
        await self._client.close()

    async def _offsets(
        self, partitions: Iterable[TopicPartition], target: int
    ) -> dict[TopicPartition, int]:
        targets = dict.fromkeys(partitions, target)
        found = await list_offsets(self._client, targets, self._isolation)
        return {tp: entry.offset for tp, entry in found.items()}

    async def _reset_positions(self) -> None:
        """Look up the offsets of partitions waiting for a reset, and seek to them."""
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
            logger.warning("resetting positions failed, will retry: %s", error)
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
        return self._thread.run(self._consumer.poll(timeout_ms))

    def close(self) -> None:
        self._thread.run(self._consumer.close())
