"""TransactionMarkerChannelManager: ends a decided transaction on its partitions (Kafka's
``TransactionMarkerChannelManager`` and its completion handler).

Once PrepareCommit or PrepareAbort is durable, the COMMIT or ABORT marker is written to every
partition of the transaction through ``ReplicaManager.write_transaction_markers`` (this single
broker leads them all: no WriteTxnMarkers request goes out), retried until every partition has
it or is gone. The pending offsets of the transaction in ``__consumer_offsets`` partitions are
then completed by the group coordinator, and CompleteCommit or CompleteAbort is written. The
work belongs to the coordinator, not to the request that decided it, and runs to its end; a
broker stopped before it ends finds the transaction prepared at start-up and writes the
markers again.

The Complete record is appended only once every marker is durable (a Complete that survived a
power cut without its markers would leave the partitions' transaction open for ever), but the
transaction is taken as complete, and the producer's next transaction may start, as soon as
the record is appended, without waiting for its own fsync: no client is answered on it (EndTxn
was answered when the Prepare record was durable), and losing it to a power cut costs only
what the broker does at start-up for a Prepare without a Complete, and Kafka's coordinator on
loading one: writing the same markers again. It cannot be lost while anything built on it
stands: the next record of the same transactional id (the next transaction's Ongoing, an
InitProducerId's epoch) follows it in the same partition, and is waited for until fsync'ed,
which makes it durable too. Kafka takes the Complete once its replicas have it, never after an
fsync (on one broker: once it is in the page cache). One fsync a transaction fewer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Callable
from typing import Any

from odradek.errors import (
    InvalidProducerEpochError,
    KafkaError,
    TransactionCoordinatorFencedError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from odradek.server.group.coordinator_log import GROUP_METADATA_TOPIC_NAME
from odradek.server.replica_manager import ReplicaManager
from odradek.server.transaction import transaction_test_stop
from odradek.server.transaction.transaction_marker import TransactionMarker
from odradek.server.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from odradek.server.transaction.transaction_state_manager import (
    COORDINATOR_EPOCH,
    TransactionStateManager,
)
from odradek.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 5.0
GroupCompletion = Callable[[int, set[int], bool], Any]
"""``GroupCoordinator.handle_transaction_completion(producer_id, offsets_partitions,
committed)``: the transaction's pending offsets become committed, or are dropped."""
_DONE_FOR_GOOD = (
    UnknownTopicOrPartitionError,  # the topic was deleted: nothing left to end
    InvalidProducerEpochError,  # a later epoch of the producer already ended it
    TransactionCoordinatorFencedError,
)


class TransactionMarkerChannelManager:
    """Writes the markers of decided transactions, then completes them."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        state_manager: TransactionStateManager,
        group_completion: GroupCompletion | None = None,
    ) -> None:
        self._replica_manager = replica_manager
        self._state_manager = state_manager
        self._group_completion = group_completion
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False

    def add_txn_markers_to_send(
        self,
        metadata: TransactionMetadata,
        committed: bool,
        complete: TxnTransitMetadata,
        on_complete: Callable[[TransactionMetadata, bool], None] | None = None,
    ) -> asyncio.Task[None]:
        """End ``metadata``'s prepared transaction (its producer id and epoch as they are now)
        in the background; ``complete`` is its prepared CompleteCommit/CompleteAbort."""
        marker = TransactionMarker(
            metadata.producer_id,
            metadata.producer_epoch,
            COORDINATOR_EPOCH,
            committed,
            tuple(sorted(metadata.partitions)),
        )
        task = asyncio.get_running_loop().create_task(
            self._send_and_complete(metadata, marker, complete, on_complete)
        )
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("transaction markers: %s", task.exception(), exc_info=task.exception())

    async def _send_and_complete(
        self,
        metadata: TransactionMetadata,
        marker: TransactionMarker,
        complete: TxnTransitMetadata,
        on_complete: Callable[[TransactionMetadata, bool], None] | None,
    ) -> None:
        transactional_id = metadata.transactional_id
        written = await self._write_markers(transactional_id, marker)
        offsets_partitions = {
            tp.partition for tp in written if tp.topic == GROUP_METADATA_TOPIC_NAME
        }
        if offsets_partitions:
            await self._complete_offsets(transactional_id, marker, offsets_partitions)
        transaction_test_stop.stop_at(transaction_test_stop.BEFORE_COMPLETE)
        backoff = RETRY_BACKOFF_S
        while True:
            try:
                await self._state_manager.append_transaction_to_log(
                    metadata, complete, durable=False
                )
                break
            except KafkaError as error:
                if self._stopping:
                    raise
                logger.warning(
                    "transactional id %r: writing %s failed (%s); retrying",
                    transactional_id,
                    complete.state.state_name,
                    error,
                )
                # The failed append abandoned the transition: prepare it again.
                complete = metadata.prepare_complete(complete.last_update_timestamp_ms)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        logger.info(
            "transactional id %r: producer %d epoch %d %s on %d partitions",
            transactional_id,
            marker.producer_id,
            marker.producer_epoch,
            "committed" if marker.committed else "aborted",
            len(marker.partitions),
        )
        if on_complete is not None:
            on_complete(metadata, marker.committed)

    async def _write_markers(
        self, transactional_id: str, marker: TransactionMarker
    ) -> set[TopicPartition]:
        """Write ``marker`` to its partitions until each has it or is gone; the partitions
        that have it."""
        remaining = marker.partitions
        written: set[TopicPartition] = set()
        backoff = RETRY_BACKOFF_S
        while remaining:
            try:
                results = await self._replica_manager.write_transaction_markers(
                    [dataclasses.replace(marker, partitions=remaining)]
                )
            except KafkaError as error:
                results = {tp: error for tp in remaining}
            except Exception as error:  # noqa: BLE001 - never give up a decided transaction
                logger.exception("transactional id %r: writing markers failed", transactional_id)
                results = {tp: UnknownServerError(str(error)) for tp in remaining}
            retry = []
            for tp in remaining:
                error = results.get(tp)
                if error is None and tp in results:
                    written.add(tp)
                elif isinstance(error, _DONE_FOR_GOOD):
                    logger.warning(
                        "transactional id %r: no %s marker for %s: %s",
                        transactional_id,
                        "COMMIT" if marker.committed else "ABORT",
                        tp,
                        error,
                    )
                else:
                    retry.append(tp)
            remaining = tuple(retry)
            if remaining:
                logger.warning(
                    "transactional id %r: markers for %s not written (%s); retrying",
                    transactional_id,
                    ", ".join(map(str, remaining)),
                    "; ".join(str(results.get(tp)) for tp in remaining[:3]),
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_S)
        return written

    async def _complete_offsets(
        self, transactional_id: str, marker: TransactionMarker, offsets_partitions: set[int]
    ) -> None:
        completion = self._group_completion
        if completion is None:
            logger.warning(
                "transactional id %r: no group coordinator completes offsets of %s %s",
                transactional_id,
                GROUP_METADATA_TOPIC_NAME,
                sorted(offsets_partitions),
            )
            return
        outcome = completion(marker.producer_id, offsets_partitions, marker.committed)
        if inspect.isawaitable(outcome):
            await outcome

    async def shutdown(self) -> None:
        """Stop the work under way (a restart finds those transactions prepared and ends
        them)."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
