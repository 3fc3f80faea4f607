"""ListOffsets for the consumer and the admin client: offsets by time, first and last offsets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.client.network_client import NetworkClient
from odradek.errors import error_for_code
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.list_offsets import ListOffsetsPartition, ListOffsetsRequest
from odradek.topic_partition import TopicPartition


@dataclass(frozen=True)
class OffsetAndTimestamp:
    """An offset and the timestamp of its record (-1 when the lookup was not by time)."""

    offset: int
    timestamp: int


async def list_offsets(
    client: NetworkClient,
    timestamps: Mapping[TopicPartition, int],
    isolation: IsolationLevel = IsolationLevel.HIGH_WATERMARK,
) -> dict[TopicPartition, OffsetAndTimestamp]:
    """For each partition, the first offset whose record's timestamp is >= the target.

    Targets may also be ``EARLIEST_TIMESTAMP`` (-2) or ``LATEST_TIMESTAMP`` (-1). An offset of
    -1 means no record is that recent. The first partition error is raised.
    """
    request = ListOffsetsRequest(
        tuple(ListOffsetsPartition(tp.topic, tp.partition, ts) for tp, ts in timestamps.items()),
        isolation,
    )
    response = await client.send(request)
    found = {}
    for entry in response.partitions:
        if entry.error:
            raise error_for_code(entry.error, entry.message or "")
        tp = TopicPartition(entry.topic, entry.partition)
        found[tp] = OffsetAndTimestamp(entry.offset, entry.timestamp)
    return found
