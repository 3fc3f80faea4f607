"""MsgpackFetchApis: Fetch on odradek's msgpack protocol, its FetchRequest mapped onto the
ReplicaManager's ``fetch_messages``, the call Kafka's protocol makes (server/kafka/fetch.py).
ApiRouter authorizes its partitions and counts it against the quotas (a fetch asks for one
quota window at most)."""

from __future__ import annotations

from odradek.protocol.fetch import FetchRequest, FetchResponse
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext


class MsgpackFetchApis:
    """The fetch message mapped onto the ReplicaManager."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self._fetch = replica_manager.fetch_messages

    async def fetch(self, request: FetchRequest, context: RequestContext) -> FetchResponse:
        """Each partition's read, in the request's order."""
        results = await self._fetch(
            context,
            request.partitions,
            request.max_wait_ms,
            request.min_bytes,
            request.max_bytes,
            request.isolation,
        )
        return FetchResponse(tuple(results))
