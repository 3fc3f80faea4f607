"""CoordinatorLog: the groups' records in ``__consumer_offsets``, written durably and read
back at start-up: committed offsets, their tombstones, and each group's membership. This is
the log side of Kafka's group coordinator (the ``PartitionWriter`` and ``CoordinatorLoader``
of its ``CoordinatorRuntime``); the rules of groups and offsets live in the
GroupMetadataManager and the OffsetMetadataManager, as in Kafka 4.

A group lives in partition ``abs(hashCode(group_id)) % offsets.topic.num.partitions`` of the
topic, as in Kafka. Writes go through the partition's append queue and group commit: a write
is done only once fsync'ed, so an acknowledged commit survives any crash. The topic is created
the first time a group needs it (as Kafka does), compacted, with Kafka's settings.

A transaction's offsets (TxnOffsetCommit) are the same OffsetCommit records in a batch that
carries the transactional flag and the producer's id and epoch, as Kafka's coordinator writes
them; the COMMIT or ABORT marker the transaction coordinator later appends to the partition
decides whether they count. Loading hands both to the coordinator: each record with the
producer id of its batch, and each marker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    CoordinatorNotAvailableError,
    CorruptRecordError,
    KafkaError,
    KafkaStorageError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.produce import Acks
from odradek.record.control_record import ControlRecordType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from odradek.record.record_batch_builder import RecordBatchBuilder
from odradek.server.group.coordinator_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    parse_key,
)
from odradek.server.group.group_metadata import GroupMetadata
from odradek.server.group.offset_and_metadata import OffsetAndMetadata
from odradek.server.replica_manager import ReplicaManager
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_manager import LogManager
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
CreateTopic = Callable[[str, int, Mapping[str, object]], object]
"""How a topic is created: (name, partition count, config overrides)."""


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as a signed int32."""
    value = 0
    data = text.encode("utf-16-be")
    for index in range(0, len(data), 2):
        value = (31 * value + ((data[index] << 8) | data[index + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def coordinator_error(error: KafkaError) -> KafkaError:
    """What a failed write to ``__consumer_offsets`` means to a client (Kafka's mapping):
    a timeout or storage failure is COORDINATOR_NOT_AVAILABLE (retriable); the rest is kept."""
    if isinstance(error, KafkaStorageError | RequestTimedOutError | UnknownTopicOrPartitionError):
        return CoordinatorNotAvailableError(error.message)
    return error


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % numPartitions``."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions


MAX_SEQUENCE = 0x7FFFFFFF


@dataclass(frozen=True)
class LoadedRecord:
    """One record read back: its key, value (None for a tombstone) and offset in the topic;
    ``producer_id`` is the transaction's producer for a record of a transactional batch
    (a TxnOffsetCommit), NO_PRODUCER_ID otherwise."""

    key: OffsetCommitKey | GroupMetadataKey
    value: OffsetCommitValue | GroupMetadataValue | None
    offset: int
    producer_id: int = NO_PRODUCER_ID


@dataclass(frozen=True)
class LoadedMarker:
    """A COMMIT or ABORT marker read back: it ends ``producer_id``'s transaction in the
    partition (``partition``) it was read from."""

    producer_id: int
    committed: bool
    offset: int
    partition: int


@dataclass(frozen=True)
class LoadSummary:
    partitions: int
    records: int
    seconds: float


class CoordinatorLog:
    """Appends group records durably and reads them back; knows no group rules (the
    coordinator's managers decide what to write and when)."""

    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        replica_manager: ReplicaManager,
        io_executor: Executor,
        clock: Clock,
        create_topic: CreateTopic,
    ) -> None:
        self._config = config
        self._log_manager = log_manager
        self._replica_manager = replica_manager
        self._io_executor = io_executor
        self._clock = clock
        self._create_topic = create_topic
        self._topic_ready = asyncio.Lock()
        self._transactional_appends = asyncio.Lock()
        self.load_summary: LoadSummary | None = None

    @property
    def num_partitions(self) -> int:
        """The topic's partition count: as created, else ``offsets.topic.num.partitions``."""
        existing = self._log_manager.partitions(GROUP_METADATA_TOPIC_NAME)
        return len(existing) or self._config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    # --- the topic ---------------------------------------------------------------------------

    async def ensure_topic(self) -> None:
        """Create ``__consumer_offsets`` if it does not exist yet."""
        if self._log_manager.partitions(GROUP_METADATA_TOPIC_NAME):
            return
        async with self._topic_ready:
            if self._log_manager.partitions(GROUP_METADATA_TOPIC_NAME):
                return
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(
                self._io_executor, create_offsets_topic, self._create_topic, self._config
            )

    # --- writes ------------------------------------------------------------------------------

    async def append(
        self,
        group_id: str,
        records: Iterable[tuple[bytes, bytes | None]],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        on_appended: Callable[[list[int]], None] | None = None,
    ) -> list[int]:
        """Append ``(key, value)`` records for ``group_id`` as one batch and wait until it is
        fsync'ed; the offsets the records got. With a ``producer_id`` the batch is
        transactional, that producer's (a TxnOffsetCommit). ``on_appended`` is told the
        offsets as soon as the batch is in the log, before the fsync (what is in the log, a
        restart replays). Raises a KafkaError (REQUEST_TIMED_OUT after
        ``offsets.commit.timeout.ms``, KAFKA_STORAGE_ERROR, INVALID_PRODUCER_EPOCH for a
        fenced producer ...) when it is not durable."""
        await self.ensure_topic()
        partition = self._replica_manager.partition(
            GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id)
        )
        now = self._clock.milliseconds()
        if producer_id == NO_PRODUCER_ID:
            builder = RecordBatchBuilder()
            for key, value in records:
                builder.append(now, key, value)
            info = await partition.append(builder.build(), Acks.ALL)
        else:
            # The log checks a producer's sequences for every batch (Kafka spares its
            # coordinator's writes the check; odradek's log has no such origin), so a
            # transaction's commits take the producer's next sequence in the partition, one
            # transactional append at a time.
            async with self._transactional_appends:
                builder = RecordBatchBuilder(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    base_sequence=_next_sequence(partition.log, producer_id, producer_epoch),
                    is_transactional=True,
                )
                for key, value in records:
                    builder.append(now, key, value)
                info = await partition.append(builder.build(), Acks.ALL)
        offsets = list(range(info.first_offset, info.last_offset + 1))
        if on_appended is not None:
            on_appended(offsets)
        durable = partition.durable(info.last_offset)
        try:
            await asyncio.wait_for(
                asyncio.shield(durable), self._config.offsets_commit_timeout_ms / 1000
            )
        except TimeoutError:
            raise RequestTimedOutError(
                f"the append of group {group_id} to {partition.topic_partition} was not "
                f"fsync'ed within offsets.commit.timeout.ms="
                f"{self._config.offsets_commit_timeout_ms}"
            ) from None
        return offsets

    async def append_offset_commits(
        self,
        group_id: str,
        offsets: Sequence[tuple[TopicPartition, OffsetAndMetadata]],
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        on_appended: Callable[[list[int]], None] | None = None,
    ) -> list[int]:
        """Append an OffsetCommit record for each of ``offsets``, durably; the offsets the
        records got (the OffsetMetadataManager applies them). With a ``producer_id``, in a
        transactional batch of that producer (its TxnOffsetCommit); see :meth:`append` for
        ``on_appended``."""
        records: list[tuple[bytes, bytes | None]] = [
            (
                OffsetCommitKey(group_id, tp.topic, tp.partition).to_bytes(),
                OffsetCommitValue(
                    value.offset, value.leader_epoch, value.metadata, value.commit_timestamp
                ).to_bytes(),
            )
            for tp, value in offsets
        ]
        return await self.append(group_id, records, producer_id, producer_epoch, on_appended)

    async def append_tombstones(
        self, group_id: str, partitions: Sequence[TopicPartition], group_too: bool = False
    ) -> list[int]:
        """Append tombstones for the group's offsets of ``partitions`` (and, last, for the
        group itself), durably; the offsets the records got."""
        records: list[tuple[bytes, bytes | None]] = [
            (OffsetCommitKey(group_id, tp.topic, tp.partition).to_bytes(), None)
            for tp in partitions
        ]
        if group_too:
            records.append((GroupMetadataKey(group_id).to_bytes(), None))
        return await self.append(group_id, records)

    async def append_group_metadata(self, group: GroupMetadata) -> None:
        """Write the group's generation, protocol, leader and members (with their
        assignments) durably."""
        protocol = group.protocol_name
        value = GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            protocol,
            group.leader_id,
            group.current_state_timestamp,
            tuple(
                MemberMetadataValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(protocol) if protocol else b"",
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )
        key = GroupMetadataKey(group.group_id).to_bytes()
        await self.append(group.group_id, [(key, value.to_bytes())])

    # --- loading -----------------------------------------------------------------------------

    def load(self) -> Iterator[LoadedRecord | LoadedMarker]:
        """Every record and transaction marker of the topic, partition by partition, in log
        order. Blocking: run it on a thread at start-up. Records that do not decode are
        logged and skipped."""
        started = time.monotonic()
        count = 0
        partitions = self._log_manager.partitions(GROUP_METADATA_TOPIC_NAME)
        for tp in partitions:
            try:
                log = self._log_manager.get_log(tp)
            except KafkaError as error:
                logger.error("[%s] cannot load group state: %s", tp, error)
                continue
            for record in self._read_all(log, tp):
                count += 1
                yield record
        self.load_summary = LoadSummary(len(partitions), count, time.monotonic() - started)

    def _read_all(
        self, log: UnifiedLog, tp: TopicPartition
    ) -> Iterator[LoadedRecord | LoadedMarker]:
        offset = log.log_start_offset
        end = log.log_end_offset
        buffer_size = self._config.offsets_load_buffer_size
        while offset < end:
            info = log.read(offset, buffer_size, FetchIsolation.LOG_END, True)
            if info.records is None:
                break
            data = info.records.read_bytes()
            moved = False
            for batch in MemoryRecords(data).batches():
                if batch.is_control:
                    for record in batch.records():
                        if record.offset >= offset:
                            marker = _marker(tp, batch.producer_id, record.key, record.offset)
                            if marker is not None:
                                yield marker
                    offset = batch.next_offset
                    moved = True
                    continue
                producer_id = batch.producer_id if batch.is_transactional else NO_PRODUCER_ID
                for record in batch.records():
                    if record.offset < offset or record.key is None:
                        continue
                    loaded = _decode(tp, record.key, record.value, record.offset, producer_id)
                    if loaded is not None:
                        yield loaded
                offset = batch.next_offset
                moved = True
            if not moved:
                raise CoordinatorNotAvailableError(
                    f"[{tp}] cannot read the batch at offset {offset} while loading groups"
                )


def _next_sequence(log: UnifiedLog, producer_id: int, producer_epoch: int) -> int:
    """The sequence the producer's next batch in ``log`` takes: after its last at this epoch,
    0 for an epoch the log has not seen (a new epoch starts at 0)."""
    for producer in log.active_producers():
        if producer.producer_id == producer_id and producer.producer_epoch == producer_epoch:
            return (producer.last_sequence + 1) & MAX_SEQUENCE
    return 0


def _decode(
    tp: TopicPartition, key: bytes, value: bytes | None, offset: int, producer_id: int
) -> LoadedRecord | None:
    try:
        parsed = parse_key(key)
        if value is None:
            return LoadedRecord(parsed, None, offset, producer_id)
        if isinstance(parsed, OffsetCommitKey):
            return LoadedRecord(parsed, OffsetCommitValue.from_bytes(value), offset, producer_id)
        return LoadedRecord(parsed, GroupMetadataValue.from_bytes(value), offset, producer_id)
    except CorruptRecordError as error:
        logger.warning("[%s] skipping the record at offset %d: %s", tp, offset, error)
        return None


def _marker(
    tp: TopicPartition, producer_id: int, key: bytes | None, offset: int
) -> LoadedMarker | None:
    """The COMMIT or ABORT a control record says; None for any other control type."""
    try:
        control_type = ControlRecordType.of_key(key)
    except CorruptRecordError as error:
        logger.warning("[%s] skipping the control record at offset %d: %s", tp, offset, error)
        return None
    if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        return None
    return LoadedMarker(producer_id, control_type is ControlRecordType.COMMIT, offset, tp.partition)


def create_offsets_topic(create_topic: CreateTopic, config: BrokerConfig) -> None:
    """Create ``__consumer_offsets`` through the broker's topic-creation path, with Kafka's
    settings for it: compacted, ``offsets.topic.segment.bytes`` segments, codecs kept as
    produced."""
    overrides = {
        "cleanup.policy": "compact",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
        "compression.type": "producer",
    }
    try:
        create_topic(GROUP_METADATA_TOPIC_NAME, config.offsets_topic_num_partitions, overrides)
    except TopicAlreadyExistsError:
        pass
