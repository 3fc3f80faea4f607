"""AdminManager: cluster metadata and topic administration (the roles of Kafka's
``ZkAdminManager`` and ``MetadataCache``).

Both protocols' handlers call it with plain data (names, counts, config changes) and get plain
outcomes back (partitions, config entries, the error of each topic), so neither protocol's
messages cross into the other's: Metadata's topics (``find_topics``), CreateTopics,
CreatePartitions, DeleteTopics, a topic's configs and their changes, and the partitions' logs
DescribeTopicPartitions (which only the msgpack protocol has) describes. The TopicAdmin
carries the changes out on the logs, and the AutoTopicCreationManager creates the missing
topics Metadata may create. Every topic of a request gets its own outcome: one bad topic does
not fail the others, except that a CreateTopics request asking for more partitions in all
than ``create.topics.max.partitions.per.request`` is refused whole (POLICY_VIOLATION on every
topic, as Kafka's controller refuses an excessively large batch). Work that touches the disk
(creating, deleting, persisting configs) runs on a thread; reading the LogManager's state does
not."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TypeVar

from odradek.config.broker_config import BrokerConfig
from odradek.config.config_entry import ConfigEntry as StoredConfigEntry
from odradek.config.log_config import LogConfig
from odradek.errors import (
    KafkaError,
    PolicyViolationError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.values.broker_metadata import BrokerMetadata
from odradek.server.admin.auto_topic_creation_manager import AutoTopicCreationManager
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.storage.log_manager import LogManager
from odradek.storage.partition_description import PartitionDescription
from odradek.topic_partition import TopicPartition, validate_topic_name

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class NewTopic:
    """A topic to create (Kafka's admin ``NewTopic``): ``num_partitions`` -1 takes the
    broker's ``num.partitions``; ``configs`` are its overrides."""

    name: str
    num_partitions: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionState:
    """One partition as Metadata describes it: ``error`` is what keeps it from being read
    here (None: this broker leads it)."""

    partition: int
    error: KafkaError | None = None


FoundTopic = tuple[PartitionState, ...] | KafkaError
"""A topic's partitions, or why it cannot be described."""


@dataclass(frozen=True)
class DescribedTopic:
    """A topic's partitions' logs (each one's snapshot, or why it cannot be read here) and
    its configs; ``error``: why the topic cannot be described (None: it can)."""

    name: str
    error: KafkaError | None = None
    partitions: tuple[tuple[int, PartitionDescription | KafkaError], ...] = ()
    configs: tuple[StoredConfigEntry, ...] = ()


class AdminManager:
    """Answers the metadata and admin APIs; ``on_topic_deleted`` hears of each deletion."""

    def __init__(
        self,
        log_manager: LogManager,
        topic_admin: TopicAdmin,
        config: BrokerConfig,
        broker: BrokerMetadata,
        executor: Executor,
        on_topic_deleted: Callable[[str], None],
    ) -> None:
        self._log_manager = log_manager
        self._topic_admin = topic_admin
        self._auto_topic_creation = AutoTopicCreationManager(topic_admin, config, executor)
        self._config = config
        self._broker = broker
        self._executor = executor
        self._on_topic_deleted = on_topic_deleted
        self._config_lock = asyncio.Lock()  # an incremental alter is read, merge, write

    @property
    def auto_creates_topics(self) -> bool:
        """``auto.create.topics.enable``."""
        return self._config.auto_create_topics_enable

    def topic_exists(self, topic: str) -> bool:
        return bool(self._log_manager.partitions(topic))

    @property
    def broker(self) -> BrokerMetadata:
        """Where this broker is reached (its node id, host and port)."""
        return self._broker

    @property
    def cluster_id(self) -> str:
        return self._log_manager.meta_properties.cluster_id

    # --- metadata ----------------------------------------------------------------------------

    async def find_topics(
        self, names: Sequence[str] | None, allow_auto_topic_creation: bool
    ) -> list[tuple[str, FoundTopic]]:
        """The topics named (all when None), in that order, each with its partitions or why it
        cannot be described; missing ones are created when ``allow_auto_topic_creation`` and
        ``auto.create.topics.enable`` are both on (never when all are asked for)."""
        if names is None:
            names, auto_create = self._log_manager.topics(), False
        else:
            auto_create = allow_auto_topic_creation
        found: dict[str, list[TopicPartition] | KafkaError] = {}
        for name in names:
            try:
                validate_topic_name(name)
                found[name] = self._log_manager.partitions(name) or UnknownTopicOrPartitionError(
                    f"topic {name} does not exist"
                )
            except KafkaError as error:
                found[name] = error
        missing = [
            name
            for name, result in found.items()
            if isinstance(result, UnknownTopicOrPartitionError)
        ]
        if auto_create and missing:
            found.update(await self._auto_topic_creation.create_topics(missing))
        return [(name, self._found_topic(found[name])) for name in names]

    def _found_topic(self, found: list[TopicPartition] | KafkaError) -> FoundTopic:
        if isinstance(found, KafkaError):
            return found
        return tuple(map(self._partition_state, found))

    def _partition_state(self, tp: TopicPartition) -> PartitionState:
        try:
            self._log_manager.get_log(tp)
        except KafkaError as error:
            return PartitionState(tp.partition, error)
        return PartitionState(tp.partition)

    # --- create and delete -------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[NewTopic], validate_only: bool, timeout_ms: int
    ) -> list[int | KafkaError]:
        """Create ``topics`` (only check them when ``validate_only``), one after the other
        within ``timeout_ms``: each one's partition count, or why it was not created."""
        counts = [self._partition_count(topic) for topic in topics]
        total = sum(count for count in counts if count > 0)
        limit = self._config.create_topics_max_partitions_per_request
        if total > limit:
            refusal = PolicyViolationError(
                f"the request asks for {total} partitions in all; "
                f"create.topics.max.partitions.per.request is {limit}: nothing was created"
            )
            return [refusal for _ in topics]
        deadline = asyncio.get_running_loop().time() + max(0, timeout_ms) / 1000
        return [
            await self._create_topic(topic, count, validate_only, deadline, timeout_ms)
            for topic, count in zip(topics, counts, strict=True)
        ]

    def _partition_count(self, topic: NewTopic) -> int:
        return self._config.num_partitions if topic.num_partitions == -1 else topic.num_partitions

    async def _create_topic(
        self,
        topic: NewTopic,
        count: int,
        validate_only: bool,
        deadline: float,
        timeout_ms: int,
    ) -> int | KafkaError:
        try:
            if validate_only:
                self._topic_admin.validate_new_topic(topic.name, count, topic.configs)
            else:
                await self._create_within(
                    topic.name,
                    count,
                    deadline,
                    timeout_ms,
                    self._topic_admin.create_topic,
                    topic.name,
                    count,
                    topic.configs,
                )
        except KafkaError as error:
            return error
        return count

    async def _create_within(
        self,
        name: str,
        count: int,
        deadline: float,
        timeout_ms: int,
        create: Callable[..., object],
        *args: object,
    ) -> None:
        """``create(*args)`` on a thread, creating ``count`` partitions of topic ``name``; past
        ``deadline`` answer REQUEST_TIMED_OUT and let the creation finish (or roll back) on its
        own, as Kafka does: it is bounded by ``create.topics.max.partitions.per.request`` and
        all or nothing."""
        loop = asyncio.get_running_loop()
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise RequestTimedOutError(
                f"topic {name}: nothing created: timeout_ms={timeout_ms} passed before its turn"
            )
        creation = loop.run_in_executor(self._executor, create, *args)
        try:
            async with asyncio.timeout(remaining):
                await asyncio.shield(creation)
        except TimeoutError:
            creation.add_done_callback(_log_late_outcome(name, "its request timed out"))
            raise RequestTimedOutError(
                f"topic {name}: creating {count} partitions takes longer than "
                f"timeout_ms={timeout_ms}; it goes on, and they will appear all together or "
                f"not at all"
            ) from None
        except asyncio.CancelledError:
            # The request was given up (its connection closed): the creation goes on, and
            # its outcome is read and logged here since nobody else will read it.
            creation.add_done_callback(_log_late_outcome(name, "its client went away"))
            raise

    async def create_partitions(
        self, counts: Sequence[tuple[str, int]], validate_only: bool, timeout_ms: int
    ) -> list[KafkaError | None]:
        """Grow each (topic, new partition count) of ``counts`` (Kafka's CreatePartitions;
        only check when ``validate_only``): why each was not (None: it was). The new
        partitions of each topic appear all together or not at all, at most
        ``create.topics.max.partitions.per.request`` in all."""
        added: list[int | KafkaError] = []
        for name, count in counts:
            try:
                added.append(self._topic_admin.validate_new_partitions(name, count))
            except KafkaError as error:
                added.append(error)
        total = sum(count for count in added if isinstance(count, int))
        limit = self._config.create_topics_max_partitions_per_request
        if total > limit:
            refusal = PolicyViolationError(
                f"the request adds {total} partitions in all; "
                f"create.topics.max.partitions.per.request is {limit}: nothing was created"
            )
            return [refusal for _ in counts]
        deadline = asyncio.get_running_loop().time() + max(0, timeout_ms) / 1000
        results: list[KafkaError | None] = []
        for (name, count), new in zip(counts, added, strict=True):
            try:
                if isinstance(new, KafkaError):
                    raise new
                if not validate_only:
                    await self._create_within(
                        name,
                        new,
                        deadline,
                        timeout_ms,
                        self._topic_admin.create_partitions,
                        name,
                        count,
                    )
            except KafkaError as error:
                results.append(error)
            else:
                results.append(None)
        return results

    async def delete_topics(self, names: Sequence[str]) -> list[KafkaError | None]:
        """Delete the topics ``names``, one after the other: why each was not (None: it was)."""
        return [await self._delete_topic(name) for name in names]

    async def _delete_topic(self, name: str) -> KafkaError | None:
        try:
            if not self._config.delete_topic_enable:
                raise PolicyViolationError(
                    f"cannot delete topic {name}: delete.topic.enable is false on this broker"
                )
            await self._in_thread(self._topic_admin.delete_topic, name)
        except KafkaError as error:
            return error
        self._on_topic_deleted(name)
        return None

    # --- configs -----------------------------------------------------------------------------

    def topic_configs(self, name: str) -> list[StoredConfigEntry] | KafkaError:
        """Every topic-level config of topic ``name`` (its effective values), or why not."""
        try:
            return self._topic_admin.describe_topic_config(name)
        except KafkaError as error:
            return error

    async def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], validate_only: bool
    ) -> KafkaError | None:
        """Set the overrides of topic ``name`` that ``changes`` names (None removes one) and
        keep the others (only check them when ``validate_only``): why not (None: done)."""
        try:
            async with self._config_lock:
                if not self._log_manager.partitions(name):
                    raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
                overrides = self._topic_admin.topic_overrides(name)
                for key, value in changes.items():
                    if value is None:
                        overrides.pop(key, None)
                    else:
                        overrides[key] = value
                if validate_only:
                    LogConfig.from_props(overrides, self._config.log_config())
                else:
                    await self._in_thread(self._topic_admin.alter_topic_config, name, overrides)
        except KafkaError as error:
            return error
        return None

    # --- describe partitions -----------------------------------------------------------------

    async def describe_topic_partitions(self, names: Sequence[str] | None) -> list[DescribedTopic]:
        """Each topic of ``names`` (None: every topic) described, in that order."""
        return [
            self._describe_topic(name)
            for name in (self._log_manager.topics() if names is None else names)
        ]

    def _describe_topic(self, name: str) -> DescribedTopic:
        try:
            partitions = self._log_manager.partitions(name)
            if not partitions:
                raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
            configs = self._topic_admin.describe_topic_config(name)
        except KafkaError as error:
            return DescribedTopic(name, error)
        described = tuple((tp.partition, self._describe_partition(tp)) for tp in partitions)
        return DescribedTopic(name, partitions=described, configs=tuple(configs))

    def _describe_partition(self, tp: TopicPartition) -> PartitionDescription | KafkaError:
        try:
            return self._log_manager.describe_partition(tp)
        except KafkaError as error:
            return error

    async def _in_thread(self, function: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)


def _log_late_outcome(name: str, why: str) -> Callable[[asyncio.Future[object]], None]:
    """Log how a creation ended that nobody waits for any more (``why``: its request timed
    out, its client went away), reading its outcome so none is left unread."""

    def log(creation: asyncio.Future[object]) -> None:
        if creation.cancelled():
            return
        error = creation.exception()
        if error is None:
            logger.info("topic %s: created after %s", name, why)
        elif isinstance(error, KafkaError):
            logger.info("topic %s: not created after %s: %s", name, why, error)
        else:
            logger.warning("topic %s: creation failed after %s: %r", name, why, error)

    return log
