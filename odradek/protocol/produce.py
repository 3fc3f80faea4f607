"""Produce (key 0): append record batches to partitions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from odradek.int_limits import INT32_MAX
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import EMPTY_PAYLOAD, Message, decode_message
from odradek.protocol.values.produce import Acks, ProducePartitionData, ProducePartitionResponse
from odradek.protocol.values.wire_types import (
    OMITTED_AT_DEFAULT,
    NonNegativeInt32,
    Payload,
    stored_at_once,
)

DEFAULT_TIMEOUT_MS = 30000

_ACKS = {acks.value: acks for acks in Acks}


@stored_at_once
@dataclass(frozen=True)
class ProduceRequest(Message):
    """Batches for one or more partitions. With ``acks`` NONE the broker sends no response."""

    api_key: ClassVar[ApiKey] = ApiKey.PRODUCE
    partitions: tuple[ProducePartitionData, ...]
    acks: Acks = Acks.ALL
    timeout_ms: NonNegativeInt32 = DEFAULT_TIMEOUT_MS
    transactional_id: str | None = field(default=None, metadata={OMITTED_AT_DEFAULT: True})
    """A transactional producer's id, with its transactional batches (left out otherwise)."""

    @classmethod
    def from_header(
        cls, header: Mapping[str, Any], payload: memoryview = EMPTY_PAYLOAD
    ) -> ProduceRequest:
        """As ``Message.from_header``: a request of the common shape (every field well typed
        and in range, sizes covering the payload) is read directly, anything else by the
        schema, which names what is wrong."""
        request = _common_shape(header, payload)
        return request if request is not None else decode_message(cls, header, payload)


def _common_shape(header: Mapping[str, Any], payload: memoryview) -> ProduceRequest | None:
    """The request ``header`` and ``payload`` make if nothing in them is unusual, else None."""
    fields = read_produce(header, payload)
    if fields is None:
        return None
    transactional_id = header.get("transactional_id")
    if transactional_id is not None and type(transactional_id) is not str:
        return None
    entries, acks, timeout_ms = fields
    partitions = []
    position = 0
    for entry in entries:
        end = position + entry["size"]
        partitions.append(
            ProducePartitionData(entry["topic"], entry["partition"], payload[position:end])
        )
        position = end
    return ProduceRequest(tuple(partitions), acks, timeout_ms, transactional_id)


def read_produce(
    header: Mapping[str, Any], payload: memoryview, at_once: bool = False
) -> tuple[list[dict[str, Any]], Acks, int] | None:
    """A produce of the common shape (every field well typed and in range, sizes covering the
    payload, each entry's records the next ``size`` bytes of it): its ``partitions`` entries,
    known good, then ``acks`` and ``timeout_ms``. None for anything else, which the schema
    reads. With ``at_once``, None too unless it is one partition's (the whole payload its
    records) without a transactional id: one a broker may append at once and answer at once
    (acks 0 or 1) or once fsync'ed (acks=all) with ``immediate.write_appended``, reading the
    entry as it is, with no objects made."""
    if type(header) is not dict:
        return None
    entries = header.get("partitions")
    acks = header.get("acks", -1)
    timeout_ms = header.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if (
        type(entries) is not list
        or type(acks) is not int
        or acks not in _ACKS
        or type(timeout_ms) is not int
        or not 0 <= timeout_ms <= INT32_MAX
        or (at_once and (len(entries) != 1 or "transactional_id" in header))
    ):
        return None
    total = 0
    for entry in entries:
        if type(entry) is not dict:
            return None
        topic = entry.get("topic")
        partition = entry.get("partition")
        size = entry.get("size")
        if (
            type(topic) is not str
            or type(partition) is not int
            or type(size) is not int
            or not 0 <= partition <= INT32_MAX
            or not 0 <= size <= INT32_MAX
        ):
            return None
        total += size
    if total != len(payload):
        return None
    return entries, _ACKS[acks], timeout_ms


@stored_at_once
@dataclass(frozen=True)
class ProduceResponse(Message):
    """One entry per partition of the request, in the request's order; ``throttle_time_ms``:
    how long a client over its quota must wait (its connection is muted that long)."""

    api_key: ClassVar[ApiKey] = ApiKey.PRODUCE
    partitions: tuple[ProducePartitionResponse, ...]
    throttle_time_ms: NonNegativeInt32 = 0

    def encode(self, parts: list[Payload]) -> dict[str, Any]:
        """As ``Message.encode``, built directly (a broker answers every produce so)."""
        return {
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "error": p.error,
                    "message": p.message,
                    "base_offset": p.base_offset,
                    "log_append_time_ms": p.log_append_time_ms,
                    "log_start_offset": p.log_start_offset,
                }
                for p in self.partitions
            ],
            "throttle_time_ms": self.throttle_time_ms,
        }
