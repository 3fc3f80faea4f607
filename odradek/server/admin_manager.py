"""AdminManager: cluster metadata and topic administration over the LogManager.

Metadata, CreateTopics, DeleteTopics, DescribeConfigs, AlterConfigs and
DescribeTopicPartitions land here (the roles of Kafka's ``ZkAdminManager`` and
``MetadataCache``). Every topic of a request gets its own outcome: one bad topic does not fail
the others. Work that touches the disk (creating, deleting, persisting configs) runs on a
thread; reading the LogManager's state does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import TypeVar

from odradek.config.broker_config import BrokerConfig
from odradek.config.config_entry import ConfigEntry as StoredConfigEntry
from odradek.config.log_config import LogConfig
from odradek.errors import (
    InvalidPartitionsError,
    KafkaError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.configs import (
    AlterableTopicConfigs,
    AlterConfigsRequest,
    AlterConfigsResponse,
    ConfigEntry,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    TopicConfigs,
)
from odradek.protocol.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    PartitionDescription,
    TopicDescription,
)
from odradek.protocol.metadata import (
    BrokerMetadata,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.protocol.partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    NewPartitionCount,
)
from odradek.protocol.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    TopicResult,
)
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition, validate_topic_name

T = TypeVar("T")


class AdminManager:
    """Answers the metadata and admin APIs; ``on_topic_deleted`` hears of each deletion."""

    def __init__(
        self,
        log_manager: LogManager,
        config: BrokerConfig,
        broker: BrokerMetadata,
        executor: Executor,
        on_topic_deleted: Callable[[str], None],
    ) -> None:
        self._log_manager = log_manager
        self._config = config
        self._broker = broker
        self._executor = executor
        self._on_topic_deleted = on_topic_deleted
        self._config_lock = asyncio.Lock()  # an incremental alter is read, merge, write

    @property
    def cluster_id(self) -> str:
        return self._log_manager.meta_properties.cluster_id

    # --- metadata ----------------------------------------------------------------------------

    async def metadata(self, request: MetadataRequest) -> MetadataResponse:
        """The broker and the topics asked for (all when None), creating missing ones when
        the request allows it and ``auto.create.topics.enable`` is on."""
        if request.topics is None:
            names, auto_create = self._log_manager.topics(), False
        else:
            names, auto_create = request.topics, request.allow_auto_topic_creation
        topics = [await self._topic_metadata(name, auto_create) for name in names]
        return MetadataResponse(self._broker, self.cluster_id, tuple(topics))

    async def _topic_metadata(self, name: str, auto_create: bool) -> TopicMetadata:
        try:
            validate_topic_name(name)
            partitions = self._log_manager.partitions(name)
            if not partitions and auto_create:
                partitions = await self._in_thread(self._log_manager.get_or_create_topic, name)
            if not partitions:
                raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
        except KafkaError as error:
            return TopicMetadata(name, error.code, error.message)
        return TopicMetadata(name, partitions=tuple(map(self._partition_metadata, partitions)))

    def _partition_metadata(self, tp: TopicPartition) -> PartitionMetadata:
        try:
            self._log_manager.get_log(tp)
        except KafkaError as error:
            return PartitionMetadata(tp.partition, error.code, error.message)
        return PartitionMetadata(tp.partition, leader=self._broker.node_id)

    # --- create and delete -------------------------------------------------------------------

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        results = [await self._create_topic(t, request.validate_only) for t in request.topics]
        return CreateTopicsResponse(tuple(results))

    async def _create_topic(
        self, topic: CreatableTopic, validate_only: bool
    ) -> CreatableTopicResult:
        count = self._config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        try:
            if validate_only:
                self._validate_new_topic(topic.name, count, topic.configs)
            else:
                await self._in_thread(
                    self._log_manager.create_topic, topic.name, count, topic.configs
                )
        except KafkaError as error:
            return CreatableTopicResult(topic.name, error.code, error.message)
        return CreatableTopicResult(topic.name, num_partitions=count)

    def _validate_new_topic(self, name: str, count: int, configs: Mapping[str, str]) -> None:
        """Every check of a creation, creating nothing (``validate_only``)."""
        validate_topic_name(name)
        if count < 1:
            raise InvalidPartitionsError(f"topic {name} needs at least one partition, not {count}")
        if self._log_manager.partitions(name):
            raise TopicAlreadyExistsError(f"topic {name} already exists")
        LogConfig.from_props(configs, self._config.log_config())

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        return DeleteTopicsResponse(
            tuple([await self._delete_topic(name) for name in request.topics])
        )

    async def _delete_topic(self, name: str) -> TopicResult:
        try:
            if not self._config.delete_topic_enable:
                raise PolicyViolationError(
                    f"cannot delete topic {name}: delete.topic.enable is false on this broker"
                )
            await self._in_thread(self._log_manager.delete_topic, name)
        except KafkaError as error:
            return TopicResult(name, error.code, error.message)
        self._on_topic_deleted(name)
        return TopicResult(name)

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        """Grow each topic to its new partition count (never shrink)."""
        results = [await self._add_partitions(t, request.validate_only) for t in request.topics]
        return CreatePartitionsResponse(tuple(results))

    async def _add_partitions(self, topic: NewPartitionCount, validate_only: bool) -> TopicResult:
        name = topic.name
        try:
            if validate_only:
                partitions = self._log_manager.partitions(name)
                if not partitions:
                    raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
                current = partitions[-1].partition + 1
                if topic.count <= current:
                    raise InvalidPartitionsError(
                        f"topic {name} has {current} partitions; the new count must be "
                        f"larger, not {topic.count}"
                    )
            else:
                await self._in_thread(self._log_manager.add_partitions, name, topic.count)
        except KafkaError as error:
            return TopicResult(name, error.code, error.message)
        return TopicResult(name)

    # --- configs -----------------------------------------------------------------------------

    async def describe_configs(self, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
        return DescribeConfigsResponse(tuple(map(self._topic_configs, request.topics)))

    def _topic_configs(self, name: str) -> TopicConfigs:
        try:
            entries = self._log_manager.describe_topic_config(name)
        except KafkaError as error:
            return TopicConfigs(name, error.code, error.message)
        return TopicConfigs(name, entries=_config_entries(entries))

    async def alter_configs(self, request: AlterConfigsRequest) -> AlterConfigsResponse:
        results = [await self._alter_config(t, request.validate_only) for t in request.topics]
        return AlterConfigsResponse(tuple(results))

    async def _alter_config(self, topic: AlterableTopicConfigs, validate_only: bool) -> TopicResult:
        """Set the overrides named (None removes one) and keep the others."""
        name = topic.name
        try:
            async with self._config_lock:
                if not self._log_manager.partitions(name):
                    raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
                overrides = self._log_manager.topic_overrides(name)
                for key, value in topic.configs.items():
                    if value is None:
                        overrides.pop(key, None)
                    else:
                        overrides[key] = value
                if validate_only:
                    LogConfig.from_props(overrides, self._config.log_config())
                else:
                    await self._in_thread(self._log_manager.alter_topic_config, name, overrides)
        except KafkaError as error:
            return TopicResult(name, error.code, error.message)
        return TopicResult(name)

    # --- describe partitions -----------------------------------------------------------------

    async def describe_topic_partitions(
        self, request: DescribeTopicPartitionsRequest
    ) -> DescribeTopicPartitionsResponse:
        names = self._log_manager.topics() if request.topics is None else request.topics
        return DescribeTopicPartitionsResponse(tuple(map(self._describe_topic, names)))

    def _describe_topic(self, name: str) -> TopicDescription:
        try:
            partitions = self._log_manager.partitions(name)
            if not partitions:
                raise UnknownTopicOrPartitionError(f"topic {name} does not exist")
            configs = _config_entries(self._log_manager.describe_topic_config(name))
        except KafkaError as error:
            return TopicDescription(name, error.code, error.message)
        descriptions = tuple(map(self._describe_partition, partitions))
        return TopicDescription(name, partitions=descriptions, configs=configs)

    def _describe_partition(self, tp: TopicPartition) -> PartitionDescription:
        try:
            found = self._log_manager.describe_partition(tp)
        except KafkaError as error:
            return PartitionDescription(tp.partition, error.code, error.message)
        return PartitionDescription(
            tp.partition,
            log_start_offset=found.log_start_offset,
            high_watermark=found.high_watermark,
            log_end_offset=found.log_end_offset,
            size_bytes=found.size_in_bytes,
            segment_count=found.number_of_segments,
            log_dir=str(found.log_dir),
        )

    async def _in_thread(self, function: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)


def _config_entries(entries: list[StoredConfigEntry]) -> tuple[ConfigEntry, ...]:
    return tuple(
        ConfigEntry(entry.name, entry.value, ConfigSource[entry.source.name], entry.is_default)
        for entry in entries
    )
