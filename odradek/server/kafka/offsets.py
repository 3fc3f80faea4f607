"""KafkaOffsetApis: ListOffsets, OffsetForLeaderEpoch and DeleteRecords on Kafka's protocol:
where a partition's offsets are (by time, by leader epoch) and moving its log start.

ListOffsets and DeleteRecords ask the ReplicaManager with Kafka's data, refusing first what
ApiAuthorization's rules refuse (Describe, Delete on each topic), as the msgpack protocol's
handlers do (server/msgpack/offsets.py); the max-timestamp lookup (ListOffsets v7) and
OffsetForLeaderEpoch, which only Kafka's protocol has, read the partition's log here and are
authorized here.
"""

from __future__ import annotations

from typing import Any

from odradek.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    KafkaError,
    UnknownLeaderEpochError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.fetch_request import READ_COMMITTED
from odradek.protocol.values.list_offsets import MAX_TIMESTAMP
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.apis import ApiRouter
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import (
    LEADER_EPOCH,
    KafkaHandler,
    KafkaRequest,
    handle_permitted,
)
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import RequestContext
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.file_records import TimestampAndOffset

INVALID_REQUEST = InvalidRequestError.code
FENCED_LEADER_EPOCH = FencedLeaderEpochError.code
UNKNOWN_LEADER_EPOCH = UnknownLeaderEpochError.code


class KafkaOffsetApis:
    """The offset lookups and DeleteRecords of Kafka's protocol."""

    def __init__(
        self, router: ApiRouter, replica_manager: ReplicaManager, authorizer: Authorizer
    ) -> None:
        self._apis = router
        self._replicas = replica_manager
        self._authorizer = authorizer

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.LIST_OFFSETS: self._list_offsets,
            apis.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            apis.DELETE_RECORDS: self._delete_records,
        }

    async def _list_offsets(self, request: KafkaRequest, context: RequestContext) -> dict:
        """Each partition's offset for its timestamp from the ReplicaManager, refused first
        without Describe on its topic (ApiAuthorization's ListOffsets rule); the record with
        the largest timestamp (v7) is looked up here, and a timestamp below -3 is invalid."""
        body = request.body
        wanted = []
        special: dict[int, dict[str, Any]] = {}
        for topic in body["topics"]:
            for partition in topic["partitions"]:
                timestamp = partition["timestamp"]
                index = len(wanted) + len(special)
                if timestamp == MAX_TIMESTAMP:
                    denial = self._authorizer.topic_denial(
                        context, AclOperation.DESCRIBE, topic["name"]
                    )
                    special[index] = (
                        {"partition_index": partition["partition_index"], "error_code": denial.code}
                        if denial is not None
                        else self._max_timestamp(topic["name"], partition["partition_index"])
                    )
                elif timestamp < MAX_TIMESTAMP:
                    special[index] = {
                        "partition_index": partition["partition_index"],
                        "error_code": INVALID_REQUEST,
                    }
                else:
                    wanted.append((index, (topic["name"], partition["partition_index"], timestamp)))
        results: dict[int, dict[str, Any]] = dict(special)
        if wanted:
            # read_committed's latest offset is the last stable offset (Kafka's).
            isolation = (
                FetchIsolation.TXN_COMMITTED
                if body.get("isolation_level") == READ_COMMITTED
                else FetchIsolation.HIGH_WATERMARK
            )
            targets = [target for _, target in wanted]
            found = await handle_permitted(
                self._apis,
                context,
                apis.LIST_OFFSETS,
                [topic for topic, _, _ in targets],
                targets,
                lambda allowed: self._replicas.list_offsets(allowed, isolation),
            )
            for (index, (_, partition, _)), record in zip(wanted, found, strict=True):
                results[index] = _offset_entry(partition, record)
        topics: list[dict[str, Any]] = []
        index = 0
        for topic in body["topics"]:
            entries = []
            for _ in topic["partitions"]:
                entries.append(results[index])
                index += 1
            topics.append({"name": topic["name"], "partitions": entries})
        return {"topics": topics}

    def _max_timestamp(self, topic: str, partition: int) -> dict[str, Any]:
        """The offset and timestamp of the record with the largest timestamp (ListOffsets v7)."""
        try:
            log = self._replicas.partition(topic, partition).log
        except KafkaError as error:
            return {"partition_index": partition, "error_code": error.code}
        best = log.max_timestamp_record()
        if best is None:
            return {"partition_index": partition, "error_code": 0}
        return {
            "partition_index": partition,
            "error_code": 0,
            "timestamp": best.timestamp,
            "offset": best.offset,
        }

    async def _delete_records(self, request: KafkaRequest, context: RequestContext) -> dict:
        """Each partition's new low watermark from the ReplicaManager; a topic the principal
        may not delete from is refused first (ApiAuthorization's DeleteRecords rule)."""
        topics = request.body["topics"]
        entries = [
            (topic["name"], p["partition_index"], p["offset"])
            for topic in topics
            for p in topic["partitions"]
        ]
        outcomes = await handle_permitted(
            self._apis,
            context,
            apis.DELETE_RECORDS,
            [topic for topic, _, _ in entries],
            entries,
            self._replicas.delete_records,
        )
        results = iter(zip(entries, outcomes, strict=True))
        return {
            "topics": [
                {
                    "name": topic["name"],
                    "partitions": [
                        _delete_records_entry(*next(results)) for _ in topic["partitions"]
                    ],
                }
                for topic in topics
            ]
        }

    async def _offset_for_leader_epoch(
        self, request: KafkaRequest, context: RequestContext
    ) -> dict:
        """Where each asked epoch ends (Kafka's ``lastOffsetForLeaderEpoch``): the log end
        for the current epoch, the start of the next epoch for an older one. A topic needs
        Describe (or the cluster ClusterAction, as a follower has), else its partitions are
        answered TOPIC_AUTHORIZATION_FAILED and nothing else."""
        topics = request.body["topics"]
        denials: dict[str, KafkaError] = {}
        authorizer = self._authorizer
        if authorizer.enabled and not authorizer.may(
            context, AclOperation.CLUSTER_ACTION, "", ResourceType.CLUSTER
        ):
            for name in dict.fromkeys(topic["topic"] for topic in topics):
                denial = authorizer.topic_denial(context, AclOperation.DESCRIBE, name)
                if denial is not None:
                    denials[name] = denial
        return {
            "topics": [
                {
                    "topic": topic["topic"],
                    "partitions": [
                        {"partition": p["partition"], "error_code": denials[topic["topic"]].code}
                        if topic["topic"] in denials
                        else self._epoch_end_offset(topic["topic"], p)
                        for p in topic["partitions"]
                    ],
                }
                for topic in topics
            ]
        }

    def _epoch_end_offset(self, topic: str, entry: dict[str, Any]) -> dict[str, Any]:
        number = entry["partition"]
        current = entry.get("current_leader_epoch", -1)
        if current > LEADER_EPOCH:
            return {"partition": number, "error_code": UNKNOWN_LEADER_EPOCH}
        if 0 <= current < LEADER_EPOCH:
            return {"partition": number, "error_code": FENCED_LEADER_EPOCH}
        try:
            log = self._replicas.partition(topic, number).log
        except KafkaError as error:
            return {"partition": number, "error_code": error.code}
        found = log.end_offset_for_epoch(entry["leader_epoch"], LEADER_EPOCH)
        return {
            "partition": number,
            "error_code": 0,
            "leader_epoch": found.epoch,
            "end_offset": found.start_offset,
        }


def _offset_entry(partition: int, found: TimestampAndOffset | KafkaError | None) -> dict[str, Any]:
    if isinstance(found, KafkaError):
        return {
            "partition_index": partition,
            "error_code": found.code,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
    return {
        "partition_index": partition,
        "error_code": 0,
        "timestamp": found.timestamp if found is not None else -1,
        "offset": found.offset if found is not None else -1,
        "leader_epoch": LEADER_EPOCH,
    }


def _delete_records_entry(entry: tuple[str, int, int], outcome: int | KafkaError) -> dict[str, Any]:
    if isinstance(outcome, KafkaError):
        return {"partition_index": entry[1], "low_watermark": -1, "error_code": outcome.code}
    return {"partition_index": entry[1], "low_watermark": outcome, "error_code": 0}
