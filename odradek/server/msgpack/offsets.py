"""MsgpackOffsetApis: ListOffsets and DeleteRecords on odradek's msgpack protocol, mapped onto
the ReplicaManager's calls the Kafka protocol's handlers make (server/kafka/offsets.py).
ApiRouter authorizes their partitions first."""

from __future__ import annotations

from odradek.errors import KafkaError
from odradek.protocol.delete_records import (
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from odradek.protocol.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.file_records import TimestampAndOffset


class MsgpackOffsetApis:
    """The offset messages mapped onto the ReplicaManager."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self._replicas = replica_manager

    async def list_offsets(
        self, request: ListOffsetsRequest, _context: RequestContext
    ) -> ListOffsetsResponse:
        entries = request.partitions
        found = await self._replicas.list_offsets(
            [(entry.topic, entry.partition, entry.timestamp) for entry in entries],
            FetchIsolation(request.isolation.value),
        )
        return ListOffsetsResponse(
            tuple(_offset(entry, record) for entry, record in zip(entries, found, strict=True))
        )

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


def _offset(
    entry: ListOffsetsPartition, found: TimestampAndOffset | KafkaError | None
) -> ListOffsetsPartitionResponse:
    if isinstance(found, KafkaError):
        return ListOffsetsPartitionResponse(entry.topic, entry.partition, found.code, found.message)
    if found is None:
        return ListOffsetsPartitionResponse(entry.topic, entry.partition)
    return ListOffsetsPartitionResponse(
        entry.topic, entry.partition, offset=found.offset, timestamp=found.timestamp
    )
