"""KafkaFetchApis: Fetch on Kafka's protocol (the general path; a one-partition fetch finding
nothing new is answered at once by KafkaRequestHandler's ``answer_at_once``).

Read with the ReplicaManager's ``fetch_messages``, the call the msgpack protocol's fetch makes
(server/msgpack/fetch.py), its partitions refused first without Read on their topic
(ApiAuthorization's Fetch rule, ``handle_permitted_partitions``) and its size held to one quota
window (``ApiRouter.fetch_max_bytes``). Fetch sessions are answered as sessionless (id 0); a
follower's fetch needs ClusterAction on the cluster; a partition that fails carries the partition's
offsets, as Kafka answers it.
"""

from __future__ import annotations

import dataclasses

from odradek.errors import FetchSessionIdNotFoundError, KafkaError, TopicAuthorizationFailedError
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.fetch_request import (
    READ_COMMITTED,
    KafkaFetchRequest,
    KafkaFetchResponse,
)
from odradek.protocol.values.fetch import FetchPartition, FetchPartitionResponse
from odradek.security.acl import AclOperation
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import KafkaHandler, KafkaRequest, handle_permitted_partitions
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext

FETCH = apis.FETCH
TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailedError.code
FETCH_SESSION_ID_NOT_FOUND = FetchSessionIdNotFoundError.code


class KafkaFetchApis:
    """Fetch, read by the ReplicaManager."""

    def __init__(
        self, router: ApiRouter, replica_manager: ReplicaManager, authorizer: Authorizer
    ) -> None:
        self._apis = router
        self._replicas = replica_manager
        self._authorizer = authorizer

    def handlers(self) -> dict[int, KafkaHandler]:
        return {apis.FETCH: self._fetch}

    async def _fetch(self, request: KafkaRequest, context: RequestContext) -> KafkaFetchResponse:
        body: KafkaFetchRequest = request.body
        if body.session_id != 0:
            # Sessions are answered as sessionless (id 0); an incremental fetch in a session
            # this broker never created gets Kafka's error, and the client starts over.
            return KafkaFetchResponse((), FETCH_SESSION_ID_NOT_FOUND)
        if body.replica_id >= 0 and self._authorizer.enabled:
            # A follower's fetch (Kafka's isFromFollower) needs ClusterAction on the cluster.
            denial = self._authorizer.cluster_denial(context, AclOperation.CLUSTER_ACTION)
            if denial is not None:
                refused = [
                    FetchPartitionResponse(p.topic, p.partition, TOPIC_AUTHORIZATION_FAILED)
                    for p in body.partitions
                ]
                return KafkaFetchResponse(refused, 0)
        router = self._apis
        max_bytes = router.fetch_max_bytes(context, body.max_bytes)
        fetch = self._replicas.fetch_messages
        partitions = await handle_permitted_partitions(
            router,
            context,
            FETCH,
            body.partitions,
            lambda allowed: fetch(
                context, allowed, body.max_wait_ms, body.min_bytes, max_bytes, body.isolation
            ),
            _refused,
        )
        for p in partitions:
            if p.error:
                partitions = [self._with_offsets(p) if p.error else p for p in partitions]
                break
        return KafkaFetchResponse(partitions, 0, 0, body.isolation_level == READ_COMMITTED)

    def _with_offsets(self, p: FetchPartitionResponse) -> FetchPartitionResponse:
        """A partition's failed read with the partition's offsets, as Kafka answers them."""
        if p.error == TOPIC_AUTHORIZATION_FAILED:
            return p
        high_watermark, last_stable, log_start = self._offsets(p.topic, p.partition)
        return dataclasses.replace(
            p,
            high_watermark=high_watermark,
            last_stable_offset=last_stable,
            log_start_offset=log_start,
        )

    def _offsets(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(high watermark, last stable offset, log start offset), -1s when unknown."""
        try:
            log = self._replicas.partition(topic, partition).log
        except KafkaError:
            return -1, -1, -1
        return log.high_watermark, log.last_stable_offset, log.log_start_offset


def _refused(entry: FetchPartition, denial: KafkaError) -> FetchPartitionResponse:
    return FetchPartitionResponse(entry.topic, entry.partition, denial.code, denial.message)
