"""KafkaProducerApis: InitProducerId and DescribeProducers on Kafka's protocol.

InitProducerId: a transactional id's producer comes from the transaction coordinator
(KafkaTransactionApis), an idempotent producer's from the ProducerIdManager, as the msgpack
protocol's does (server/msgpack/producers.py), after ApiAuthorization's check (IdempotentWrite
on the cluster or Write on some topic).

DescribeProducers (what ``kafka-transactions.sh describe-producers`` asks): each partition's
active producers, from its producer state, as Kafka's KafkaApis answers it: Read on the
topic, refused per partition with TOPIC_AUTHORIZATION_FAILED; a partition the broker does not
lead gets its error (UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR) and no producers. Each
producer: its epoch, last sequence and timestamp, the coordinator epoch of its last marker
(-1: none) and the first offset of its open transaction (-1: none).
"""

from __future__ import annotations

from typing import Any

from odradek.errors import KafkaError, UnsupportedVersionError
from odradek.protocol.kafka import api_versions as apis
from odradek.security.acl import AclOperation
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.kafka.transactions import KafkaTransactionApis
from odradek.server.producer_id_manager import ProducerIdManager
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext
from odradek.storage.active_producer import ActiveProducer


class KafkaProducerApis:
    """Producer ids handed out, and the partitions' producer state described."""

    def __init__(
        self,
        router: ApiRouter,
        producer_ids: ProducerIdManager,
        replica_manager: ReplicaManager,
        authorizer: Authorizer,
        transactions: KafkaTransactionApis | None = None,
    ) -> None:
        self._apis = router
        self._producer_ids = producer_ids
        self._replicas = replica_manager
        self._authorizer = authorizer
        self._transactions = transactions

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.INIT_PRODUCER_ID: self._init_producer_id,
            apis.DESCRIBE_PRODUCERS: self._describe_producers,
        }

    async def _init_producer_id(self, request: KafkaRequest, context: RequestContext) -> dict:
        """A transactional id's producer from the transaction coordinator; an idempotent
        producer's (no transactional id) from the producer id manager, refused first without
        IdempotentWrite (ApiAuthorization's InitProducerId rule, the msgpack protocol's too)."""
        body = request.body
        try:
            if body["transactional_id"] is not None:
                if self._transactions is None:
                    raise UnsupportedVersionError("transactions are not served by this broker")
                return await self._transactions.init_producer_id(request, context)
            self._apis.authorization.check_idempotent_write(context)
            producer_id, epoch = await self._producer_ids.init_producer_id(
                body.get("producer_id", -1), body.get("producer_epoch", -1), context
            )
        except KafkaError as error:
            return {"error_code": error.code, "producer_id": -1, "producer_epoch": -1}
        return {"error_code": 0, "producer_id": producer_id, "producer_epoch": epoch}

    async def _describe_producers(self, request: KafkaRequest, context: RequestContext) -> dict:
        topics = []
        for topic in request.body["topics"]:
            name = topic["name"]
            denial = self._authorizer.topic_denial(context, AclOperation.READ, name)
            topics.append(
                {
                    "name": name,
                    "partitions": [
                        _refused(index, denial)
                        if denial is not None
                        else self._partition_producers(name, index)
                        for index in topic["partition_indexes"]
                    ],
                }
            )
        return {"topics": topics}

    def _partition_producers(self, topic: str, index: int) -> dict[str, Any]:
        try:
            producers = self._replicas.partition(topic, index).log.active_producers()
        except KafkaError as error:
            return _refused(index, error)
        return {
            "partition_index": index,
            "error_code": 0,
            "error_message": None,
            "active_producers": [_producer_state(producer) for producer in producers],
        }


def _refused(index: int, error: KafkaError) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": error.code,
        "error_message": None,
        "active_producers": [],
    }


def _producer_state(producer: ActiveProducer) -> dict[str, int]:
    return {
        "producer_id": producer.producer_id,
        "producer_epoch": producer.producer_epoch,
        "last_sequence": producer.last_sequence,
        "last_timestamp": producer.last_timestamp,
        "coordinator_epoch": producer.coordinator_epoch,
        "current_txn_start_offset": producer.current_txn_start_offset,
    }
