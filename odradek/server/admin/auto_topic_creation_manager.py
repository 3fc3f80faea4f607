"""AutoTopicCreationManager: Metadata's auto-creation of missing topics, within limits.

As Kafka's ``AutoTopicCreationManager``, it creates the topics a Metadata request names that do
not exist, with ``num.partitions`` each, when ``auto.create.topics.enable`` is on. A request may
create at most ``auto.create.topics.max.per.request`` topics (fewer when that many topics of
``num.partitions`` would exceed ``create.topics.max.partitions.per.request``), and the broker at
most ``auto.create.topics.max.per.second`` a second (a token bucket holding one second's worth);
the topics beyond either limit are answered THROTTLING_QUOTA_EXCEEDED, as Kafka's controller
mutation quota answers creations beyond it: the error is retriable, so a client asking again
later gets its topics, while a flood of names costs the broker a bounded amount of work.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Executor

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import KafkaError, ThrottlingQuotaExceededError, UnknownTopicOrPartitionError
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.topic_partition import TopicPartition

CreationResult = list[TopicPartition] | KafkaError


class AutoTopicCreationManager:
    """Creates missing topics for Metadata requests, at most so many per request and second."""

    def __init__(
        self,
        topic_admin: TopicAdmin,
        config: BrokerConfig,
        executor: Executor,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._topic_admin = topic_admin
        self._config = config
        self._executor = executor
        self._clock = clock
        self._rate = config.auto_create_topics_max_per_second
        self._capacity = max(1.0, self._rate)
        self._tokens = self._capacity
        self._refilled_ms = clock.milliseconds()
        self._lock = threading.Lock()

    async def create_topics(self, names: Sequence[str]) -> dict[str, CreationResult]:
        """Create the missing topics ``names`` (valid names, distinct): each one's partitions,
        or the error that kept it from being created."""
        if not self._config.auto_create_topics_enable:
            return {
                name: UnknownTopicOrPartitionError(
                    f"topic {name} does not exist and auto.create.topics.enable is false"
                )
                for name in names
            }
        config = self._config
        per_request = config.auto_create_topics_max_per_request
        by_partitions = max(
            1, config.create_topics_max_partitions_per_request // config.num_partitions
        )
        if by_partitions < per_request:
            per_request = by_partitions
            request_limit = (
                f"{per_request} topics of num.partitions={config.num_partitions} reach "
                f"create.topics.max.partitions.per.request="
                f"{config.create_topics_max_partitions_per_request}"
            )
        else:
            request_limit = f"auto.create.topics.max.per.request={per_request}"
        allowed = self._take(min(len(names), per_request))
        results: dict[str, CreationResult] = {}
        for name in names[allowed:]:
            reason = (
                f"this request already auto-creates {per_request} topics ({request_limit})"
                if allowed == per_request
                else f"auto.create.topics.max.per.second={self._rate:g} is exhausted"
            )
            results[name] = ThrottlingQuotaExceededError(
                f"topic {name} not created: {reason}; ask again later"
            )
        loop = asyncio.get_running_loop()
        created = await loop.run_in_executor(self._executor, self._create_all, names[:allowed])
        results.update(created)
        return results

    def _create_all(self, names: Sequence[str]) -> dict[str, CreationResult]:
        results: dict[str, CreationResult] = {}
        for name in names:
            try:
                results[name] = self._topic_admin.get_or_create_topic(name)
            except KafkaError as error:
                results[name] = error
        return results

    def _take(self, wanted: int) -> int:
        """Take up to ``wanted`` whole tokens from the bucket; how many were taken."""
        with self._lock:
            now_ms = self._clock.milliseconds()
            elapsed_s = max(0, now_ms - self._refilled_ms) / 1000
            self._tokens = min(self._capacity, self._tokens + elapsed_s * self._rate)
            self._refilled_ms = now_ms
            taken = min(wanted, int(self._tokens))
            self._tokens -= taken
            return taken
