"""KafkaPartitionAdminApis: DescribeLogDirs and ElectLeaders on Kafka's protocol, answered
as a single broker can (what ``kafka-log-dirs.sh`` and ``kafka-leader-election.sh`` ask).

DescribeLogDirs: each log directory with its partitions' sizes (offset lag 0: there are no
other replicas; no future logs: replicas never move between directories), its volume's total
and usable bytes, and KAFKA_STORAGE_ERROR for an offline one. ElectLeaders: the broker leads
every partition it holds and is its only replica, so no election is ever needed:
ELECTION_NOT_NEEDED per partition, UNKNOWN_TOPIC_OR_PARTITION for one that does not exist, and
for a partition whose directory is offline, no replica to elect. The all-partitions form
(null topics) answers each topic with no partition, as Kafka does when none needed electing.
Both need the cluster permission Kafka asks (Describe, Alter).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Any

from odradek.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    KafkaError,
    KafkaStorageError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.security.acl import AclOperation
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext
from odradek.storage.log_dir_description import LogDirDescription
from odradek.storage.log_manager import LogManager
from odradek.topic_partition import TopicPartition

PREFERRED = 0
"""ElectLeaders' election type for the preferred replica (1 is unclean)."""
ELECTION_NOT_NEEDED = ElectionNotNeededError(
    "Leader election not needed for topic partition."  # Kafka's words
)


class KafkaPartitionAdminApis:
    """The log-directory and leader-election APIs of Kafka's protocol."""

    def __init__(self, log_manager: LogManager, authorizer: Authorizer, executor: Executor) -> None:
        self._log_manager = log_manager
        self._authorizer = authorizer
        self._executor = executor

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.DESCRIBE_LOG_DIRS: self._describe_log_dirs,
            apis.ELECT_LEADERS: self._elect_leaders,
        }

    # --- DescribeLogDirs -------------------------------------------------------------------

    async def _describe_log_dirs(self, request: KafkaRequest, context: RequestContext) -> dict:
        denial = self._authorizer.cluster_denial(context, AclOperation.DESCRIBE)
        if denial is not None:
            return {"error_code": denial.code, "results": []}
        asked = request.body["topics"]
        wanted = (
            None
            if asked is None
            else {TopicPartition(t["topic"], p) for t in asked for p in t["partitions"]}
        )
        loop = asyncio.get_running_loop()
        described = await loop.run_in_executor(self._executor, self._log_manager.describe_log_dirs)
        return {"error_code": 0, "results": [_log_dir_result(d, wanted) for d in described]}

    # --- ElectLeaders ----------------------------------------------------------------------

    async def _elect_leaders(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        asked = body["topic_partitions"]
        denial = self._authorizer.cluster_denial(context, AclOperation.ALTER)
        if denial is not None:
            return {
                "error_code": denial.code,
                "replica_election_results": [
                    {
                        "topic": topic["topic"],
                        "partition_result": [
                            _partition_result(number, denial) for number in topic["partitions"]
                        ],
                    }
                    for topic in asked or ()
                ],
            }
        if asked is None:  # every partition: none needs an election, so none is reported
            return {
                "error_code": 0,
                "replica_election_results": [
                    {"topic": topic, "partition_result": []} for topic in self._log_manager.topics()
                ],
            }
        unclean = body.get("election_type", PREFERRED) != PREFERRED
        return {
            "error_code": 0,
            "replica_election_results": [
                {
                    "topic": topic["topic"],
                    "partition_result": [
                        _partition_result(number, self._election(topic["topic"], number, unclean))
                        for number in topic["partitions"]
                    ],
                }
                for topic in asked
            ],
        }

    def _election(self, topic: str, number: int, unclean: bool) -> KafkaError:
        """Why ``topic-number`` gets no new leader."""
        partitions = self._log_manager.partitions(topic)
        if not partitions:
            return UnknownTopicOrPartitionError(f"No such topic as {topic}")
        tp = TopicPartition(topic, number)
        if tp not in partitions:
            return UnknownTopicOrPartitionError(f"No such partition as {tp}")
        try:
            self._log_manager.get_log(tp)
        except KafkaStorageError:
            message = f"{tp}: its only replica is in an offline log directory"
            if unclean:
                return EligibleLeadersNotAvailableError(message)
            return PreferredLeaderNotAvailableError(message)
        return ELECTION_NOT_NEEDED


def _partition_result(number: int, error: KafkaError) -> dict[str, Any]:
    return {"partition_id": number, "error_code": error.code, "error_message": error.message}


def _log_dir_result(
    described: LogDirDescription, wanted: set[TopicPartition] | None
) -> dict[str, Any]:
    """One directory's entry; ``wanted`` the partitions asked (None: all)."""
    result: dict[str, Any] = {"log_dir": str(described.log_dir), "topics": []}
    if not described.online:
        result["error_code"] = KafkaStorageError.code
        return result
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, size in described.partition_sizes:
        if wanted is None or tp in wanted:
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "partition_size": size,
                    "offset_lag": 0,
                    "is_future_key": False,
                }
            )
    result.update(
        error_code=0,
        topics=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        total_bytes=described.total_bytes,
        usable_bytes=described.usable_bytes,
    )
    return result
