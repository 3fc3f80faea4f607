"""MsgpackOffsetApis: ListOffsets and DeleteRecords on odradek's msgpack protocol;
DeleteRecords is mapped onto the ReplicaManager's call the Kafka protocol's handler makes
(server/kafka/offsets.py). ApiRouter authorizes their partitions first."""

from __future__ import annotations

from odradek.errors import KafkaError
from odradek.protocol.delete_records import (
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from odradek.protocol.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext


class MsgpackOffsetApis:
    """The offset messages mapped onto the ReplicaManager."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self._replicas = replica_manager

    async def list_offsets(
        self, request: ListOffsetsRequest, _context: RequestContext
    ) -> ListOffsetsResponse:
        return await self._replicas.list_offsets(request)

    async def delete_records(
        self, request: DeleteRecordsRequest, _context: RequestContext
    ) -> DeleteRecordsResponse:
        entries = request.partitions
        outcomes = await self._replicas.delete_records(
            [(entry.topic, entry.partition, entry.offset) for entry in entries]
        )
        return DeleteRecordsResponse(
            tuple(
                DeleteRecordsPartitionResponse(
                    entry.topic, entry.partition, outcome.code, outcome.message
                )
                if isinstance(outcome, KafkaError)
                else DeleteRecordsPartitionResponse(
                    entry.topic, entry.partition, low_watermark=outcome
                )
                for entry, outcome in zip(entries, outcomes, strict=True)
            )
        )
