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
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    CorruptRecordError,
)
from odradek.int_limits import INT32_MAX
from odradek.protocol.values.produce import Acks
from odradek.record.control_record import ControlRecordType
from odradek.record.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, RecordBatch
from odradek.record.record_batch_builder import RecordBatchBuilder
from odradek.server.coordinator_topic import CoordinatorTopic, CreateTopic
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
from odradek.storage.log_manager import LogManager
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


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
        self._clock = clock
        self.topic = CoordinatorTopic(
            GROUP_METADATA_TOPIC_NAME,
            config.offsets_topic_num_partitions,
            # Kafka's settings: compacted, offsets.topic.segment.bytes segments, codecs kept.
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
                "compression.type": "producer",
            },
            log_manager,
            replica_manager,
            io_executor,
            create_topic,
        )
        self._transactional_appends = asyncio.Lock()
        self.load_summary: LoadSummary | None = None

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
        partition = await self.topic.partition_of(group_id)
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
        timeout_ms = self._config.offsets_commit_timeout_ms
        await self.topic.wait_durable(
            partition,
            info.last_offset,
            timeout_ms / 1000,
            f"the append of group {group_id}",
            f"offsets.commit.timeout.ms={timeout_ms}",
        )
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
        partitions = self.topic.partitions()
        buffer_size = self._config.offsets_load_buffer_size
        for tp in partitions:
            for batch, offset in self.topic.batches(tp, buffer_size):
                for loaded in _loaded(tp, batch, offset):
                    count += 1
                    yield loaded
        self.load_summary = LoadSummary(len(partitions), count, time.monotonic() - started)


def _loaded(
    tp: TopicPartition, batch: RecordBatch, offset: int
) -> Iterator[LoadedRecord | LoadedMarker]:
    """The records of ``batch`` from ``offset`` on, decoded; a control batch's marker."""
    if batch.is_control:
        for record in batch.records():
            if record.offset >= offset:
                marker = _marker(tp, batch.producer_id, record.key, record.offset)
                if marker is not None:
                    yield marker
        return
    producer_id = batch.producer_id if batch.is_transactional else NO_PRODUCER_ID
    for record in batch.records():
        if record.offset < offset or record.key is None:
            continue
        loaded = _decode(tp, record.key, record.value, record.offset, producer_id)
        if loaded is not None:
            yield loaded


def _next_sequence(log: UnifiedLog, producer_id: int, producer_epoch: int) -> int:
    """The sequence the producer's next batch in ``log`` takes: after its last at this epoch,
    0 for an epoch the log has not seen (a new epoch starts at 0)."""
    for producer in log.active_producers():
        if producer.producer_id == producer_id and producer.producer_epoch == producer_epoch:
            return (producer.last_sequence + 1) & INT32_MAX  # sequences wrap at int32
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
