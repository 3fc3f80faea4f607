"""KafkaProduceApis: Produce on Kafka's protocol (the general path; the one-partition produce
answered at once is KafkaRequestHandler's ``answer_at_once``).

A Produce v3+ is appended with the ReplicaManager's ``append_records``, the call the msgpack
protocol's produce makes (server/msgpack/produce.py), its partitions refused first without
Write on their topic (ApiAuthorization's Produce rule, ``handle_permitted_partitions``); a
transactional one is checked against its transaction first, and the partitions it refuses
are answered with their errors, in the request's order. Produce v0-2 (message format v0/v1,
which this broker does not store) and an acks other than -1, 0 or 1 are refused per partition.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Sequence
from typing import Any

from odradek.errors import InvalidRequiredAcksError, KafkaError, UnsupportedVersionError
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.api_versions import ADVERTISED
from odradek.protocol.kafka.message_codec import Payload
from odradek.protocol.kafka.produce_request import KafkaProduceRequest, read_produce_request
from odradek.protocol.values.produce import Acks, ProducePartitionData, ProducePartitionResponse
from odradek.record.record_batch import starts_transactional
from odradek.server.apis import ApiRouter
from odradek.server.kafka.request import KafkaHandler, KafkaRequest, handle_permitted_partitions
from odradek.server.kafka.transactions import KafkaTransactionApis
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext

PRODUCE = apis.PRODUCE
FIRST_SERVED_PRODUCE = ADVERTISED[apis.PRODUCE].min_served
ACKS = {acks.value: acks for acks in Acks}
# (Members at hand: looking one up on its enum class costs about a call, per request.)
_ACKS_NONE = Acks.NONE


class KafkaProduceApis:
    """Produce, appended by the ReplicaManager."""

    def __init__(
        self,
        router: ApiRouter,
        replica_manager: ReplicaManager,
        transactions: KafkaTransactionApis | None,
    ) -> None:
        self._apis = router
        self._append = replica_manager.append_records
        self._transactions = transactions

    def handlers(self) -> dict[int, KafkaHandler]:
        return {apis.PRODUCE: self._produce}

    async def _produce(self, request: KafkaRequest, context: RequestContext) -> Any:
        """The partitions' results (a sequence; fields for v0-2), None for acks=0."""
        body: KafkaProduceRequest = request.body
        entries = body.partitions
        acks_value = body.acks
        acks = ACKS.get(acks_value)
        legacy = request.api_version < FIRST_SERVED_PRODUCE
        refusal: KafkaError | None = None
        if legacy:
            refusal = UnsupportedVersionError(
                f"Produce v{request.api_version} carries message format v0/v1, which this "
                f"broker does not store; use Produce v3 or later (record batches v2)"
            )
        elif acks is None:
            refusal = InvalidRequiredAcksError(f"acks must be -1, 0 or 1, not {acks_value}")
        if refusal is not None:
            if acks_value == 0:
                return None
            results = [
                ProducePartitionResponse(
                    entry.topic, entry.partition, refusal.code, refusal.message
                )
                for entry in entries
            ]
            return results if not legacy else _produce_response(results)
        timeout_ms = body.timeout_ms
        transactions = self._transactions
        if transactions is not None and (
            body.transactional_id is not None
            or any(starts_transactional(entry.records) for entry in entries)
        ):
            refused = await transactions.check_produce(request, context)
            if refused:
                return await self._produce_checked(context, body, acks, refused)
        return await self._append_permitted(
            context, entries, acks, timeout_ms if timeout_ms > 0 else 0
        )

    def _append_permitted(
        self,
        context: RequestContext,
        entries: Sequence[ProducePartitionData],
        acks: Acks,
        timeout_ms: int,
    ) -> Awaitable[list[ProducePartitionResponse] | None]:
        """``entries`` appended, those the principal may not write refused; their errors
        counted."""
        return handle_permitted_partitions(
            self._apis,
            context,
            PRODUCE,
            entries,
            lambda allowed: self._append(context, allowed, acks, timeout_ms),
            _refused,
        )

    async def _produce_checked(
        self,
        context: RequestContext,
        body: KafkaProduceRequest,
        acks: Acks,
        refused: dict[int, KafkaError],
    ) -> Any:
        """Append the partitions not ``refused``; answer those with their errors, in the
        request's order."""
        entries = body.partitions
        kept = tuple(entry for index, entry in enumerate(entries) if index not in refused)
        appended: list[ProducePartitionResponse] = []
        if kept:
            timeout_ms = body.timeout_ms
            response = await self._append_permitted(
                context, kept, acks, timeout_ms if timeout_ms > 0 else 0
            )
            if response is not None:
                appended = response
        if acks is _ACKS_NONE:
            return None
        answers = iter(appended)
        return [
            ProducePartitionResponse(
                entry.topic, entry.partition, refused[index].code, refused[index].message
            )
            if index in refused
            else next(answers)
            for index, entry in enumerate(entries)
        ]


def _refused(entry: ProducePartitionData, denial: KafkaError) -> ProducePartitionResponse:
    return ProducePartitionResponse(entry.topic, entry.partition, denial.code, denial.message)


def _produce_response(results: list[ProducePartitionResponse]) -> dict[str, Any]:
    """A refused Produce v0-2's response as fields for the legacy writer."""
    topics: list[dict[str, Any]] = []
    for r in results:
        entry = {"index": r.partition, "error_code": r.error, "base_offset": r.base_offset}
        if topics and topics[-1]["name"] == r.topic:
            topics[-1]["partition_responses"].append(entry)
        else:
            topics.append({"name": r.topic, "partition_responses": [entry]})
    return {"responses": topics}


def read_legacy_produce(frame: memoryview, body_offset: int) -> KafkaProduceRequest:
    """A Produce v0-2 body: v3's layout without its leading transactional_id, so it is read
    as a v3 body with a null transactional id in front."""
    body = memoryview(b"\xff\xff" + bytes(frame[body_offset:]))
    return read_produce_request(body, 0, 3)


def write_legacy_produce_response(body: dict[str, Any], version: int) -> list[Payload]:
    """Produce v0-2 responses (not in the schema package): per partition index, error,
    base offset (v2: log append time), then (v1+) the throttle time."""
    out = bytearray()
    topics = body["responses"]
    out += struct.pack(">i", len(topics))
    for topic in topics:
        name = topic["name"].encode()
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(">i", len(topic["partition_responses"]))
        for p in topic["partition_responses"]:
            out += struct.pack(">ihq", p["index"], p["error_code"], p["base_offset"])
            if version >= 2:
                out += struct.pack(">q", -1)
    if version >= 1:
        out += struct.pack(">i", 0)
    return [bytes(out)]
