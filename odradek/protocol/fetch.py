"""Fetch (key 1): read record batches from partitions, waiting up to ``max_wait_ms`` for data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from odradek.int_limits import INT32_MAX, INT64_MAX, INT64_MIN
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.isolation import IsolationLevel
from odradek.protocol.schema import EMPTY_PAYLOAD, Message, decode_message
from odradek.protocol.values.fetch import (
    DEFAULT_PARTITION_MAX_BYTES,
    FetchPartition,
    FetchPartitionResponse,
)
from odradek.protocol.values.wire_types import (
    NonNegativeInt32,
    Payload,
    stored_at_once,
)

DEFAULT_MAX_WAIT_MS = 500
DEFAULT_MIN_BYTES = 1
DEFAULT_MAX_BYTES = 50 * 1024 * 1024

_ISOLATION = {level.value: level for level in IsolationLevel}
_DEFAULT_ISOLATION = IsolationLevel.HIGH_WATERMARK.value


@stored_at_once
@dataclass(frozen=True)
class FetchRequest(Message):
    """Answer when ``min_bytes`` are available or ``max_wait_ms`` have passed."""

    api_key: ClassVar[ApiKey] = ApiKey.FETCH
    partitions: tuple[FetchPartition, ...]
    max_wait_ms: NonNegativeInt32 = DEFAULT_MAX_WAIT_MS
    min_bytes: NonNegativeInt32 = DEFAULT_MIN_BYTES
    max_bytes: NonNegativeInt32 = DEFAULT_MAX_BYTES
    isolation: IsolationLevel = IsolationLevel.HIGH_WATERMARK

    @classmethod
    def from_header(
        cls, header: Mapping[str, Any], payload: memoryview = EMPTY_PAYLOAD
    ) -> FetchRequest:
        """As ``Message.from_header``: a request of the common shape (every field well typed
        and in range, no payload) is read directly, anything else by the schema, which names
        what is wrong."""
        request = _common_shape(header, payload)
        return request if request is not None else decode_message(cls, header, payload)


def _common_shape(header: Mapping[str, Any], payload: memoryview) -> FetchRequest | None:
    """The request ``header`` and ``payload`` make if nothing in them is unusual, else None."""
    fields = read_fetch(header, payload)
    if fields is None:
        return None
    entries, max_wait_ms, min_bytes, max_bytes, isolation = fields
    partitions = []
    for entry in entries:
        partitions.append(
            FetchPartition(
                entry["topic"],
                entry["partition"],
                entry["fetch_offset"],
                entry.get("partition_max_bytes", DEFAULT_PARTITION_MAX_BYTES),
            )
        )
    return FetchRequest(tuple(partitions), max_wait_ms, min_bytes, max_bytes, isolation)


def read_fetch(
    header: Mapping[str, Any], payload: memoryview, at_once: bool = False
) -> tuple[list[dict[str, Any]], int, int, int, IsolationLevel] | None:
    """A fetch of the common shape (every field well typed and in range, no payload): its
    ``partitions`` entries, known good, then ``max_wait_ms``, ``min_bytes``, ``max_bytes`` and
    ``isolation``. None for anything else, which the schema reads. With ``at_once``, None too
    unless it is one partition's and may not wait (``max_wait_ms`` or ``min_bytes`` 0): a
    consumer's poll that, finding nothing new, a broker answers at once
    (``immediate.write_nothing_new``), reading the entry as it is, with no objects made."""
    if type(header) is not dict or len(payload):
        return None
    entries = header.get("partitions")
    max_wait_ms = header.get("max_wait_ms", DEFAULT_MAX_WAIT_MS)
    min_bytes = header.get("min_bytes", DEFAULT_MIN_BYTES)
    max_bytes = header.get("max_bytes", DEFAULT_MAX_BYTES)
    isolation = header.get("isolation", _DEFAULT_ISOLATION)
    if (
        type(entries) is not list
        or type(max_wait_ms) is not int
        or type(min_bytes) is not int
        or type(max_bytes) is not int
        or type(isolation) is not str
        or not 0 <= max_wait_ms <= INT32_MAX
        or not 0 <= min_bytes <= INT32_MAX
        or not 0 <= max_bytes <= INT32_MAX
        or isolation not in _ISOLATION
        or (at_once and ((max_wait_ms and min_bytes) or len(entries) != 1))
    ):
        return None
    for entry in entries:
        if type(entry) is not dict:
            return None
        topic = entry.get("topic")
        partition = entry.get("partition")
        fetch_offset = entry.get("fetch_offset")
        partition_max_bytes = entry.get("partition_max_bytes", DEFAULT_PARTITION_MAX_BYTES)
        if (
            type(topic) is not str
            or type(partition) is not int
            or type(fetch_offset) is not int
            or type(partition_max_bytes) is not int
            or not 0 <= partition <= INT32_MAX
            or not INT64_MIN <= fetch_offset <= INT64_MAX
            or not 0 <= partition_max_bytes <= INT32_MAX
        ):
            return None
    return entries, max_wait_ms, min_bytes, max_bytes, _ISOLATION[isolation]


@stored_at_once
@dataclass(frozen=True)
class FetchResponse(Message):
    """One entry per partition of the request, in the request's order; ``throttle_time_ms``:
    how long a client over its quota must wait (its connection is muted that long)."""

    api_key: ClassVar[ApiKey] = ApiKey.FETCH
    partitions: tuple[FetchPartitionResponse, ...]
    throttle_time_ms: NonNegativeInt32 = 0

    def encode(self, parts: list[Payload]) -> dict[str, Any]:
        """As ``Message.encode``, built directly (a broker answers every fetch so); empty
        records add no payload piece."""
        entries = []
        for p in self.partitions:
            size = len(p.records)
            if size:
                parts.append(p.records)
            entry = {
                "topic": p.topic,
                "partition": p.partition,
                "error": p.error,
                "message": p.message,
                "high_watermark": p.high_watermark,
                "log_start_offset": p.log_start_offset,
                "last_stable_offset": p.last_stable_offset,
                "size": size,
            }
            if p.aborted_transactions:
                entry["aborted_transactions"] = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset}
                    for a in p.aborted_transactions
                ]
            entries.append(entry)
        return {"partitions": entries, "throttle_time_ms": self.throttle_time_ms}
