"""MsgpackProduceApis: Produce on odradek's msgpack protocol, its ProduceRequest mapped onto
the ReplicaManager's ``append_records``, the call Kafka's protocol makes
(server/kafka/produce.py). ApiRouter authorizes its partitions, counts it against the quotas
and checks a transactional produce against its transaction first."""

from __future__ import annotations

from odradek.protocol.produce import ProduceRequest, ProduceResponse
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext


class MsgpackProduceApis:
    """The produce message mapped onto the ReplicaManager."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self._append = replica_manager.append_records

    async def produce(
        self, request: ProduceRequest, context: RequestContext
    ) -> ProduceResponse | None:
        """Each partition's result, in the request's order; None for acks=0."""
        results = await self._append(context, request.partitions, request.acks, request.timeout_ms)
        return None if results is None else ProduceResponse(tuple(results))
