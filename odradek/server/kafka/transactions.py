"""KafkaTransactionApis: the transaction APIs of Kafka's protocol (InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions), answered by the TransactionCoordinator, and the check of a Produce's
transactional batches against it.

Each is authorized as Kafka's KafkaApis does: InitProducerId, AddPartitionsToTxn (v0-3),
AddOffsetsToTxn, EndTxn and a transactional Produce need Write on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), AddPartitionsToTxn also Write on each topic,
AddOffsetsToTxn Read on the group; AddPartitionsToTxn v4+ (brokers' batched form, with
verify_only) needs ClusterAction; DescribeTransactions needs Describe on each id (and shows
only the topics the principal may describe); ListTransactions lists the ids the principal may
describe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from odradek.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.produce_request import KafkaProduceRequest
from odradek.record.record_batch import transactional_producer
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.group.coordinator_log import GROUP_METADATA_TOPIC_NAME, CoordinatorLog
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext
from odradek.server.transaction.transaction_coordinator import (
    TRANSACTION_VERSION_0,
    ProducerIdAndEpoch,
    TransactionCoordinator,
)
from odradek.server.transaction.transaction_metadata import TRANSACTION_VERSION_2
from odradek.topic_partition import TopicPartition

READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
FIRST_BATCHED_ADD_PARTITIONS = 4  # AddPartitionsToTxn v4+: transactions[], verify_only
FIRST_TRANSACTION_V2_END_TXN = 5  # EndTxn v5+: the client bumps its epoch per transaction
FIRST_TRANSACTION_V2_PRODUCE = 12  # Produce v12+: the broker adds partitions (KIP-890)
FIRST_ABORTABLE_PRODUCE = 11  # Produce v11+: the client knows TRANSACTION_ABORTABLE
FIRST_PRODUCER_FENCED = {  # KIP-588: older versions are answered INVALID_PRODUCER_EPOCH
    apis.INIT_PRODUCER_ID: 4,
    apis.ADD_PARTITIONS_TO_TXN: 2,
    apis.ADD_OFFSETS_TO_TXN: 2,
    apis.END_TXN: 2,
}
ADD_PARTITIONS_RETRY_BACKOFF_S = 0.02  # add.partitions.to.txn.retry.backoff.ms
ADD_PARTITIONS_RETRY_MAX_S = 0.1  # add.partitions.to.txn.retry.backoff.max.ms
_RETRIABLE_VERIFICATION = (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
)


class KafkaTransactionApis:
    """The transaction APIs of Kafka's protocol, one handler each."""

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        group_log: CoordinatorLog,
        partition_exists: Callable[[TopicPartition], bool],
        verification_enabled: bool = True,
        authorizer: Authorizer | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._group_log = group_log
        self._partition_exists = partition_exists
        self._verification_enabled = verification_enabled
        self._authorizer = authorizer or Authorizer()
        self._produce_order: dict[str, asyncio.Future[None]] = {}
        """Per transactional id, the check of its last produce request (see check_produce)."""

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.ADD_PARTITIONS_TO_TXN: self._add_partitions_to_txn,
            apis.ADD_OFFSETS_TO_TXN: self._add_offsets_to_txn,
            apis.END_TXN: self._end_txn,
            apis.DESCRIBE_TRANSACTIONS: self._describe_transactions,
            apis.LIST_TRANSACTIONS: self._list_transactions,
        }

    def _denial(
        self, context: RequestContext, operation: AclOperation, transactional_id: str
    ) -> KafkaError | None:
        return self._authorizer.transactional_id_denial(context, operation, transactional_id)

    # --- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(self, request: KafkaRequest, context: RequestContext) -> dict:
        """InitProducerId with a transactional id (the handler of the Kafka request passes
        the others on to the producer id manager)."""
        body = request.body
        transactional_id = body["transactional_id"]
        try:
            denial = self._denial(context, WRITE, transactional_id)
            if denial is not None:
                raise denial
            producer_id, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
            expected = ProducerIdAndEpoch(producer_id, epoch) if producer_id >= 0 else None
            result = await self._coordinator.init_producer_id(
                transactional_id, _milliseconds(body["transaction_timeout"]), expected
            )
        except KafkaError as error:
            code = _code(error, request)
            return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
        return {
            "error_code": 0,
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }

    # --- AddPartitionsToTxn ------------------------------------------------------------------

    async def _add_partitions_to_txn(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        if request.api_version < FIRST_BATCHED_ADD_PARTITIONS:
            topics = body["v3_and_below_topics"]
            results = await self._add_partitions(
                context,
                body["v3_and_below_transactional_id"],
                body["v3_and_below_producer_id"],
                body["v3_and_below_producer_epoch"],
                topics,
            )
            return {"results_by_topic_v3_and_below": _by_topic(topics, results, request)}
        denial = self._authorizer.cluster_denial(context, AclOperation.CLUSTER_ACTION)
        if denial is not None:
            return {"error_code": denial.code, "results_by_transaction": []}
        answers = []
        for txn in body["transactions"]:
            topics = txn["topics"]
            partitions = _partitions(topics)
            if txn.get("verify_only", False):
                results = self._coordinator.verify_partitions_in_transaction(
                    txn["transactional_id"], txn["producer_id"], txn["producer_epoch"], partitions
                )
            else:
                results = await self._add(
                    txn["transactional_id"], txn["producer_id"], txn["producer_epoch"], partitions
                )
            answers.append(
                {
                    "transactional_id": txn["transactional_id"],
                    "topic_results": _by_topic(topics, results, request),
                }
            )
        return {"error_code": 0, "results_by_transaction": answers}

    async def _add_partitions(
        self,
        context: RequestContext,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topics: Sequence[dict[str, Any]],
    ) -> dict[TopicPartition, KafkaError | None]:
        """A client's AddPartitionsToTxn (v0-3): authorized, every partition known, then added;
        when any partition fails the others are OPERATION_NOT_ATTEMPTED, as in Kafka."""
        partitions = _partitions(topics)
        denial = self._denial(context, WRITE, transactional_id)
        if denial is not None:
            return dict.fromkeys(partitions, denial)
        failed: dict[TopicPartition, KafkaError | None] = {}
        for topic in dict.fromkeys(tp.topic for tp in partitions):
            topic_denial = self._authorizer.topic_denial(context, WRITE, topic)
            if topic_denial is not None:
                failed.update((tp, topic_denial) for tp in partitions if tp.topic == topic)
        for tp in partitions:
            if tp not in failed and not self._partition_exists(tp):
                failed[tp] = UnknownTopicOrPartitionError(f"{tp} does not exist")
        if failed:
            not_attempted = OperationNotAttemptedError(
                "not added: another partition of the request failed"
            )
            return {tp: failed.get(tp, not_attempted) for tp in partitions}
        return await self._add(transactional_id, producer_id, producer_epoch, partitions)

    async def _add(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, KafkaError | None]:
        try:
            await self._add_once_ended(transactional_id, producer_id, producer_epoch, partitions)
        except KafkaError as error:
            return dict.fromkeys(partitions, error)
        return dict.fromkeys(partitions)

    async def _add_once_ended(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> None:
        """Add ``partitions`` to the producer's transaction; while its last transaction is
        still being ended (CONCURRENT_TRANSACTIONS: the markers of a commit just answered),
        try again as soon as a transaction completes, for at most
        add.partitions.to.txn.retry.backoff.max.ms, as for a transactional Produce. A client
        adding the first partition of its next transaction is answered once it can go on, not
        told to retry after a backoff of its own (Kafka's Java client waits 20 ms, odradek's
        and librdkafka's 100)."""
        waited = 0.0
        while True:
            try:
                await self._coordinator.add_partitions_to_transaction(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    partitions,
                    TRANSACTION_VERSION_0,
                )
                return
            except ConcurrentTransactionsError:
                if waited >= ADD_PARTITIONS_RETRY_MAX_S:
                    raise
            started = time.monotonic()
            await self._coordinator.wait_for_a_completion(ADD_PARTITIONS_RETRY_BACKOFF_S)
            waited += time.monotonic() - started

    # --- AddOffsetsToTxn ---------------------------------------------------------------------

    async def _add_offsets_to_txn(self, request: KafkaRequest, context: RequestContext) -> dict:
        """The group's ``__consumer_offsets`` partition joins the transaction (its offsets are
        committed by TxnOffsetCommit, completed with the markers)."""
        body = request.body
        transactional_id, group_id = body["transactional_id"], body["group_id"]
        try:
            denial = self._denial(context, WRITE, transactional_id)
            if denial is None:
                denial = self._authorizer.group_denial(context, READ, group_id)
            if denial is not None:
                raise denial
            await self._group_log.topic.ensure()
            partition = TopicPartition(
                GROUP_METADATA_TOPIC_NAME, self._group_log.topic.partition_for(group_id)
            )
            await self._add_once_ended(
                transactional_id, body["producer_id"], body["producer_epoch"], [partition]
            )
        except KafkaError as error:
            return {"error_code": _code(error, request)}
        return {"error_code": 0}

    # --- EndTxn ------------------------------------------------------------------------------

    async def _end_txn(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        transactional_id = body["transactional_id"]
        version = (
            TRANSACTION_VERSION_2
            if request.api_version >= FIRST_TRANSACTION_V2_END_TXN
            else TRANSACTION_VERSION_0
        )
        try:
            denial = self._denial(context, WRITE, transactional_id)
            if denial is not None:
                raise denial
            result = await self._coordinator.end_transaction(
                transactional_id,
                body["producer_id"],
                body["producer_epoch"],
                bool(body["committed"]),
                version,
            )
        except KafkaError as error:
            code = _code(error, request)
            return {"error_code": code, "producer_id": -1, "producer_epoch": -1}
        return {
            "error_code": 0,
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }

    # --- DescribeTransactions, ListTransactions ----------------------------------------------

    async def _describe_transactions(self, request: KafkaRequest, context: RequestContext) -> dict:
        return {
            "transaction_states": [
                self._describe(context, transactional_id)
                for transactional_id in request.body["transactional_ids"]
            ]
        }

    def _describe(self, context: RequestContext, transactional_id: str) -> dict[str, Any]:
        try:
            denial = self._denial(context, DESCRIBE, transactional_id)
            if denial is not None:
                raise denial
            metadata = self._coordinator.describe_transaction(transactional_id)
        except KafkaError as error:
            return {
                "error_code": error.code,
                "transactional_id": transactional_id,
                "transaction_state": "",
                "transaction_timeout": 0,
                "transaction_start_time": -1,
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
        topics: dict[str, list[int]] = {}
        for tp in sorted(metadata.partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        authorizer = self._authorizer
        return {
            "error_code": 0,
            "transactional_id": transactional_id,
            "transaction_state": metadata.state.state_name,
            "transaction_timeout": metadata.transaction_timeout_ms,
            "transaction_start_time": metadata.start_timestamp_ms,
            "producer_id": metadata.producer_id,
            "producer_epoch": metadata.producer_epoch,
            "topics": [
                {"topic": topic, "partitions": ids}
                for topic, ids in topics.items()
                if authorizer.may(context, DESCRIBE, topic, ResourceType.TOPIC)
            ],
        }

    async def _list_transactions(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        try:
            unknown, listings = self._coordinator.list_transactions(
                body.get("state_filters", ()),
                body.get("producer_id_filters", ()),
                body.get("duration_filter", -1),
                body.get("transactional_id_pattern"),
            )
        except KafkaError as error:
            return {"error_code": error.code, "unknown_state_filters": [], "transaction_states": []}
        authorizer = self._authorizer
        return {
            "error_code": 0,
            "unknown_state_filters": unknown,
            "transaction_states": [
                {
                    "transactional_id": listing.transactional_id,
                    "producer_id": listing.producer_id,
                    "transaction_state": listing.state.state_name,
                }
                for listing in listings
                if authorizer.may(
                    context, DESCRIBE, listing.transactional_id, ResourceType.TRANSACTIONAL_ID
                )
            ],
        }

    # --- Produce -----------------------------------------------------------------------------

    async def check_produce(
        self, request: KafkaRequest, context: RequestContext
    ) -> dict[int, KafkaError]:
        """The partitions (by index in the request) a transactional Produce may not append
        to, with the error each is answered: the transactional id needs Write; a transactional
        batch is appended only to a partition of its producer's open transaction (TV1:
        verified, when transaction.partition.verification.enable; TV2, Produce v12+: added to
        it, KIP-890). A transactional batch without a transactional id is refused as Kafka
        refuses it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
        body: KafkaProduceRequest = request.body
        return await self.check_transactional_produce(
            context, body.transactional_id, body.partitions, request.api_version
        )

    async def check_transactional_produce(
        self,
        context: RequestContext,
        transactional_id: str | None,
        entries: Sequence[Any],
        version: int = FIRST_TRANSACTION_V2_PRODUCE - 1,
    ) -> dict[int, KafkaError]:
        """What :meth:`check_produce` answers, for any protocol's produce: ``entries`` have
        ``topic``, ``partition`` and ``records``; ``version`` is the Kafka Produce version
        whose rules apply (by default the last one before implicit adds: odradek's protocol
        adds partitions with AddPartitionsToTxn)."""
        if transactional_id is None:
            refusal = TransactionalIdAuthorizationFailedError(
                "a transactional batch needs the request's transactional id"
            )
            return dict.fromkeys(range(len(entries)), refusal)
        denial = self._denial(context, WRITE, transactional_id)
        if denial is not None:
            return dict.fromkeys(range(len(entries)), denial)
        implicit_add = version >= FIRST_TRANSACTION_V2_PRODUCE
        if not implicit_add and not self._verification_enabled:
            return {}
        # A producer's requests are appended in the order they came (its sequence numbers
        # follow each other): one waiting for the coordinator (its partition being added)
        # holds those behind it until its append has started, as the append queue would.
        order = self._produce_order
        ahead = order.get(transactional_id)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        order[transactional_id] = mine
        try:
            if ahead is not None and not ahead.done():
                await asyncio.shield(ahead)
            return await self._check_batches(entries, version, transactional_id, implicit_add)
        finally:
            # Set before this request's append starts; the next one runs once this task
            # yields, which is after its append took its place in the partitions' queues.
            mine.set_result(None)
            if order.get(transactional_id) is mine:
                del order[transactional_id]

    async def _check_batches(
        self, entries: Sequence[Any], version: int, transactional_id: str, implicit_add: bool
    ) -> dict[int, KafkaError]:
        by_producer: dict[tuple[int, int], list[int]] = {}
        for index, entry in enumerate(entries):
            producer = transactional_producer(entry.records)
            if producer is not None:
                by_producer.setdefault(producer, []).append(index)
        refused: dict[int, KafkaError] = {}
        for (producer_id, epoch), indexes in by_producer.items():
            partitions = [TopicPartition(entries[i].topic, entries[i].partition) for i in indexes]
            results = await self._verify(
                transactional_id, producer_id, epoch, partitions, implicit_add
            )
            for index, tp in zip(indexes, partitions, strict=True):
                error = results.get(tp)
                if error is not None:
                    refused[index] = _produce_error(error, version)
        return refused

    async def _verify(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: list[TopicPartition],
        implicit_add: bool,
    ) -> dict[TopicPartition, KafkaError | None]:
        """As the coordinator answers, retrying a transaction still being ended for a short
        while (Kafka's add.partitions.to.txn.retry.backoff.max.ms) before answering."""
        waited = 0.0
        while True:
            results = await self._coordinator.verify_or_add_partitions(
                transactional_id, producer_id, epoch, partitions, implicit_add
            )
            busy = any(isinstance(e, ConcurrentTransactionsError) for e in results.values())
            if not busy or waited >= ADD_PARTITIONS_RETRY_MAX_S:
                return results
            started = time.monotonic()
            await self._coordinator.wait_for_a_completion(ADD_PARTITIONS_RETRY_BACKOFF_S)
            waited += time.monotonic() - started


def _produce_error(error: KafkaError, version: int) -> KafkaError:
    """What a Produce is answered for a failed check, as Kafka translates it: a coordinator
    still busy becomes the retriable NOT_ENOUGH_REPLICAS (clients retry it without a metadata
    refresh), a fenced producer INVALID_PRODUCER_EPOCH, a partition outside the transaction
    INVALID_TXN_STATE for clients before TRANSACTION_ABORTABLE."""
    if isinstance(error, _RETRIABLE_VERIFICATION):
        return NotEnoughReplicasError(
            f"unable to verify the partition has been added to the transaction: {error}"
        )
    if isinstance(error, ProducerFencedError):
        return InvalidProducerEpochError(error.message)
    if isinstance(error, TransactionAbortableError) and version < FIRST_ABORTABLE_PRODUCE:
        return InvalidTxnStateError(error.message)
    return error


def _partitions(topics: Sequence[dict[str, Any]]) -> list[TopicPartition]:
    return [TopicPartition(t["name"], p) for t in topics for p in t["partitions"]]


def _by_topic(
    topics: Sequence[dict[str, Any]],
    results: dict[TopicPartition, KafkaError | None],
    request: KafkaRequest,
) -> list[dict[str, Any]]:
    return [
        {
            "name": t["name"],
            "results_by_partition": [
                {
                    "partition_index": p,
                    "partition_error_code": _code(
                        results.get(TopicPartition(t["name"], p)), request
                    ),
                }
                for p in t["partitions"]
            ],
        }
        for t in topics
    ]


def _code(error: KafkaError | None, request: KafkaRequest) -> int:
    """The wire code of ``error`` at the request's version: PRODUCER_FENCED is
    INVALID_PRODUCER_EPOCH to versions before it existed (KIP-588)."""
    if error is None:
        return 0
    if isinstance(error, ProducerFencedError) and request.api_version < FIRST_PRODUCER_FENCED.get(
        request.api_key, 0
    ):
        return InvalidProducerEpochError.code
    return error.code


def _milliseconds(value: Any) -> int:
    """A duration field as decoded (a timedelta, or an int) in whole milliseconds."""
    if hasattr(value, "total_seconds"):
        return int(value.total_seconds() * 1000)
    return int(value)
