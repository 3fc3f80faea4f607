"""TransactionStateManager: every transactional id's TransactionMetadata, kept in the compacted
``__transaction_state`` topic (Kafka's ``TransactionStateManager``).

A transactional id lives in partition ``abs(hashCode(id)) % transaction.state.log.num.partitions``
of the topic, as in Kafka (the same hash as ``__consumer_offsets``). Every change is written
there in Kafka's record layouts before it is taken (and before the client is answered): the
write goes through the partition's append queue and is done only once fsync'ed (except a
transaction's completion, which no answer waits for: ``append_transaction_to_log``). At start-up
the topic is read back and the latest record of each id rebuilds its state (a tombstone
removes it). The topic is created the first time a transactional id needs it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.config.broker_config import BrokerConfig
from odradek.errors import (
    CorruptRecordError,
    KafkaError,
)
from odradek.protocol.values.produce import Acks
from odradek.record.record_batch_builder import RecordBatchBuilder
from odradek.server.coordinator_topic import CoordinatorTopic, CreateTopic, coordinator_error
from odradek.server.replica_manager import ReplicaManager
from odradek.server.transaction.transaction_log import key_to_bytes, read_key, read_value
from odradek.server.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from odradek.server.transaction.transaction_state import TransactionState
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
TRANSACTION_LOG_VALUE_VERSION = 1
"""The value version written: 1 (flexible), as Kafka 4 writes once transaction.version >= 1,
which this broker always finalizes."""
COORDINATOR_EPOCH = 0
"""This broker leads every ``__transaction_state`` partition in epoch 0 for ever (as every
partition: docs/kafka-compatibility.md, "Leader epochs"); markers carry it."""
APPEND_TIMEOUT_S = 30.0
"""How long a state change waits for its record to be fsync'ed (Kafka waits its
request.timeout.ms, 30 s by default) before it fails with COORDINATOR_NOT_AVAILABLE."""
S = TransactionState


@dataclass(frozen=True)
class TransactionalIdAndProducerIdEpoch:
    """A transaction the coordinator found timed out: whose, and at which producer epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class TransactionStateManager:
    """The transactional ids of this broker and their durable state."""

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
            TRANSACTION_STATE_TOPIC_NAME,
            config.transaction_state_log_num_partitions,
            # Kafka's settings: compacted, small segments, records uncompressed.
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
                "compression.type": "uncompressed",
            },
            log_manager,
            replica_manager,
            io_executor,
            create_topic,
        )
        self._metadata: dict[str, TransactionMetadata] = {}
        self.loaded = False

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self._config.transaction_max_timeout_ms

    # --- the cache ---------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._metadata.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """``metadata``, or the one already known for its id."""
        return self._metadata.setdefault(metadata.transactional_id, metadata)

    def all(self) -> list[TransactionMetadata]:
        """Every transactional id known now (a copy: safe while the cache changes)."""
        return list(self._metadata.values())

    def timed_out_transactions(self, now_ms: int) -> list[TransactionalIdAndProducerIdEpoch]:
        """Open transactions older than their timeout and not being changed (Kafka's
        ``timedOutTransactions``)."""
        return [
            TransactionalIdAndProducerIdEpoch(m.transactional_id, m.producer_id, m.producer_epoch)
            for m in self._metadata.values()
            if m.state is S.ONGOING
            and not m.pending_transition_in_progress
            and m.start_timestamp_ms + m.transaction_timeout_ms < now_ms
        ]

    def expired_transactional_ids(self, now_ms: int) -> list[TransactionMetadata]:
        """Ids with no open transaction, idle longer than transactional.id.expiration.ms."""
        expiration_ms = self._config.transactional_id_expiration_ms
        return [
            m
            for m in self._metadata.values()
            if m.state.expiration_allowed
            and not m.pending_transition_in_progress
            and m.last_update_timestamp_ms + expiration_ms <= now_ms
        ]

    # --- writes ------------------------------------------------------------------------------

    async def append_transaction_to_log(
        self, metadata: TransactionMetadata, transit: TxnTransitMetadata, durable: bool = True
    ) -> None:
        """Write ``transit`` (prepared on ``metadata``) durably, then take it; a tombstone for
        a transition to Dead, which forgets the id. On failure the transition is abandoned and
        the KafkaError a client gets is raised (COORDINATOR_NOT_AVAILABLE for a timeout or a
        storage failure, as Kafka maps them).

        ``durable=False`` takes the transition once the record is appended, before it is
        fsync'ed: only for a record no answer depends on and whose loss a restart repairs
        (CompleteCommit/CompleteAbort, see TransactionMarkerChannelManager). It becomes
        durable with the partition's next flush, which the next record of the same
        transactional id (in the same partition, after it) waits for."""
        transactional_id = metadata.transactional_id
        value = (
            None
            if transit.state is S.DEAD
            else transit.to_log_value().to_bytes(TRANSACTION_LOG_VALUE_VERSION)
        )
        try:
            await self._append(transactional_id, key_to_bytes(transactional_id), value, durable)
        except KafkaError as error:
            metadata.abandon_transition()
            logger.warning(
                "transactional id %r: writing %s to %s failed: %s",
                transactional_id,
                transit.state.state_name,
                TRANSACTION_STATE_TOPIC_NAME,
                error,
            )
            raise coordinator_error(error) from None
        except BaseException:
            metadata.abandon_transition()
            raise
        if transit.state is S.DEAD:
            metadata.pending_state = None
            metadata.state = S.DEAD
            if self._metadata.get(transactional_id) is metadata:
                del self._metadata[transactional_id]
            return
        metadata.complete_transition(transit)

    async def _append(
        self, transactional_id: str, key: bytes, value: bytes | None, durable: bool
    ) -> None:
        partition = await self.topic.partition_of(transactional_id)
        builder = RecordBatchBuilder()
        builder.append(self._clock.milliseconds(), key, value)
        info = await partition.append(builder.build(), Acks.ALL)
        if not durable:
            return
        await self.topic.wait_durable(
            partition,
            info.last_offset,
            APPEND_TIMEOUT_S,
            f"the record of transactional id {transactional_id!r}",
            f"{APPEND_TIMEOUT_S:.0f} s",
        )

    # --- loading -----------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild every transactional id from ``__transaction_state`` (the latest record of
        each wins; a tombstone removes it). Blocking: run it on a thread at start-up."""
        started = time.monotonic()
        records = 0
        partitions = self.topic.partitions()
        for tp in partitions:
            for transactional_id, value, offset in self._read_all(tp):
                records += 1
                if value is None:
                    self._metadata.pop(transactional_id, None)
                    continue
                try:
                    state = read_value(value)
                except CorruptRecordError as error:
                    logger.warning("[%s] skipping the record at offset %d: %s", tp, offset, error)
                    continue
                if state is None:
                    self._metadata.pop(transactional_id, None)
                else:
                    self._metadata[transactional_id] = TransactionMetadata.from_log_value(
                        transactional_id, state
                    )
        self.loaded = True
        if partitions:
            logger.info(
                "loaded %d transactional ids from %d records of %s in %.3f s",
                len(self._metadata),
                records,
                TRANSACTION_STATE_TOPIC_NAME,
                time.monotonic() - started,
            )

    def _read_all(self, tp: TopicPartition) -> Iterator[tuple[str, bytes | None, int]]:
        buffer_size = self._config.transaction_state_log_load_buffer_size
        for batch, offset in self.topic.batches(tp, buffer_size):
            if batch.is_control:
                continue
            for record in batch.records():
                if record.offset < offset or record.key is None:
                    continue
                try:
                    transactional_id = read_key(record.key)
                except CorruptRecordError as error:
                    logger.warning(
                        "[%s] skipping the record at offset %d: %s", tp, record.offset, error
                    )
                    continue
                if transactional_id is not None:
                    value = None if record.value is None else bytes(record.value)
                    yield transactional_id, value, record.offset
