"""CoordinatorTopic: the internal, compacted topic a coordinator keeps its state in, and what
both coordinators do with it alike (the PartitionWriter and CoordinatorLoader of Kafka's
coordinator runtime): ``__consumer_offsets`` for groups, ``__transaction_state`` for
transactional ids.

A key (group id, transactional id) lives in partition ``abs(hashCode(key)) % partitions``, as
in Kafka. The topic is created the first time a coordinator needs it, with the settings the
coordinator gives. A write is done only once fsync'ed (``wait_durable``), so an acknowledged
change survives any crash; at start-up the coordinator reads every batch back
(``batches``), log start to log end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor

from odradek.errors import (
    CoordinatorNotAvailableError,
    KafkaError,
    KafkaStorageError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import RecordBatch
from odradek.server.partition import Partition
from odradek.server.replica_manager import ReplicaManager
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

CreateTopic = Callable[[str, int, Mapping[str, object]], object]
"""How a topic is created: (name, partition count, config overrides)."""


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as a signed int32."""
    value = 0
    data = text.encode("utf-16-be")
    for index in range(0, len(data), 2):
        value = (31 * value + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode) % numPartitions``."""
    return (java_string_hash(key) & 0x7FFFFFFF) % num_partitions


def coordinator_error(error: KafkaError) -> KafkaError:
    """What a failed write to a coordinator topic means to a client (Kafka's mapping): a
    timeout or storage failure is COORDINATOR_NOT_AVAILABLE (retriable); the rest is kept."""
    if isinstance(error, KafkaStorageError | RequestTimedOutError | UnknownTopicOrPartitionError):
        return CoordinatorNotAvailableError(error.message)
    return error


class CoordinatorTopic:
    """One coordinator topic: its partitions, their creation, durable writes, reading back."""

    def __init__(
        self,
        name: str,
        num_partitions: int,
        overrides: Mapping[str, str],
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        io_executor: Executor,
        create_topic: CreateTopic,
    ) -> None:
        """``num_partitions`` and ``overrides``: what the topic is created with (its
        ``*.num.partitions`` setting and Kafka's configs for it)."""
        self.name = name
        self._configured_partitions = num_partitions
        self._overrides = dict(overrides)
        self._log_manager = log_manager
        self._replica_manager = replica_manager
        self._io_executor = io_executor
        self._create_topic = create_topic
        self._ready = asyncio.Lock()

    @property
    def num_partitions(self) -> int:
        """The topic's partition count: as created, else the configured one."""
        return len(self._log_manager.partitions(self.name)) or self._configured_partitions

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def partitions(self) -> list[TopicPartition]:
        return self._log_manager.partitions(self.name)

    # --- creation ----------------------------------------------------------------------------

    def create(self) -> None:
        """Create the topic unless it exists (blocking: the broker's topic-creation path)."""
        try:
            self._create_topic(self.name, self._configured_partitions, self._overrides)
        except TopicAlreadyExistsError:
            pass

    async def ensure(self) -> None:
        """Create the topic, off the event loop, if it does not exist yet."""
        if self._log_manager.partitions(self.name):
            return
        async with self._ready:
            if self._log_manager.partitions(self.name):
                return
            await asyncio.get_running_loop().run_in_executor(self._io_executor, self.create)

    # --- writes ------------------------------------------------------------------------------

    async def partition_of(self, key: str) -> Partition:
        """The leader partition ``key`` is written to (the topic created first if need be)."""
        await self.ensure()
        return self._replica_manager.partition(self.name, self.partition_for(key))

    @staticmethod
    async def wait_durable(
        partition: Partition, last_offset: int, timeout_s: float, what: str, bound: str
    ) -> None:
        """Wait until ``partition`` is fsync'ed through ``last_offset``; REQUEST_TIMED_OUT
        after ``timeout_s`` (``bound`` names the setting) saying ``what`` was not."""
        try:
            await asyncio.wait_for(asyncio.shield(partition.durable(last_offset)), timeout_s)
        except TimeoutError:
            raise RequestTimedOutError(
                f"{what} in {partition.topic_partition} was not fsync'ed within {bound}"
            ) from None

    # --- reading back ------------------------------------------------------------------------

    def batches(self, tp: TopicPartition, buffer_size: int) -> Iterator[tuple[RecordBatch, int]]:
        """Every batch of partition ``tp``, log start to log end, each with the offset the
        read was at (its records before that offset were read already). Blocking: start-up
        work for a thread. A log that cannot be opened is logged and yields nothing; a batch
        that cannot be read is COORDINATOR_NOT_AVAILABLE."""
        try:
            log = self._log_manager.get_log(tp)
        except KafkaError as error:
            logger.error("[%s] cannot load %s: %s", tp, self.name, error)
            return
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            info = log.read(offset, buffer_size, FetchIsolation.LOG_END, True)
            if info.records is None:
                break
            moved = False
            for batch in MemoryRecords(info.records.read_bytes()).batches():
                yield batch, offset
                offset = batch.next_offset
                moved = True
            if not moved:
                raise CoordinatorNotAvailableError(
                    f"[{tp}] cannot read the batch at offset {offset} while loading {self.name}"
                )
