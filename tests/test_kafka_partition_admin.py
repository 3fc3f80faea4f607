"""DescribeLogDirs and ElectLeaders where the reference Kafka comparison
(test_kafka_reference_parity.py) cannot stage it: a log directory gone offline (KAFKA_STORAGE_ERROR
with nothing in it, no replica to elect for its partitions, the other directory as before), and
a principal without the cluster permission each needs."""

from __future__ import annotations

import time
from pathlib import Path

from kafka_helpers import kafka_call
from security_helpers import address, secure_broker
from server_helpers import running_broker

from odradek.client.admin import Admin, NewTopic
from odradek.errors import (
    ClusterAuthorizationFailedError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    KafkaStorageError,
    PreferredLeaderNotAvailableError,
)
from odradek.topic_partition import TopicPartition


def test_an_offline_log_dir_in_describe_log_dirs_and_leader_elections(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    settings = {"log.dirs": ",".join(map(str, dirs))}
    with running_broker(tmp_path, settings) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("spread", 2)])
        log_manager = broker.broker.log_manager
        placed = {
            log.topic_partition.partition: log.log_dir
            for log in log_manager.all_logs()
            if log.topic_partition.topic == "spread"
        }
        assert sorted(placed.values()) == dirs  # one partition in each
        lost = placed[0]
        log_manager.failure_channel.maybe_add_offline_log_dir(lost, "test", OSError(5, "EIO"))
        deadline = time.monotonic() + 60
        while TopicPartition("spread", 0) in {
            log.topic_partition for log in log_manager.all_logs()
        }:
            assert time.monotonic() < deadline
            time.sleep(0.05)

        results = {
            r["log_dir"]: r
            for r in kafka_call(broker.bootstrap, 35, 4, {"topics": None})["results"]
        }
        assert results[str(lost)]["error_code"] == KafkaStorageError.code
        assert results[str(lost)]["topics"] == [] and results[str(lost)]["total_bytes"] == -1
        (kept,) = [r for d, r in results.items() if d != str(lost)]
        assert kept["error_code"] == 0 and kept["total_bytes"] >= kept["usable_bytes"] > 0
        assert [
            (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in kept["topics"]
        ] == [("spread", [1])]

        for election_type, offline_error in (
            (0, PreferredLeaderNotAvailableError),
            (1, EligibleLeadersNotAvailableError),
        ):
            body = {
                "election_type": election_type,
                "topic_partitions": [{"topic": "spread", "partitions": [0, 1]}],
                "timeout": 30_000,
            }
            answer = kafka_call(broker.bootstrap, 43, 2, body)["replica_election_results"]
            codes = [p["error_code"] for p in answer[0]["partition_result"]]
            assert codes == [offline_error.code, ElectionNotNeededError.code]


def test_both_need_their_cluster_permission(tmp_path: Path) -> None:
    """As Kafka: DescribeLogDirs needs Describe on the Cluster (refused: the top-level error
    and no directory), ElectLeaders needs Alter on it (refused: the top-level error and each
    asked partition's)."""
    settings = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with secure_broker(tmp_path, settings) as (broker, _certs):
        plaintext = address(broker, "PLAINTEXT")  # User:ANONYMOUS, no ACL
        described = kafka_call(plaintext, 35, 4, {"topics": None})
        assert (described["error_code"], described["results"]) == (
            ClusterAuthorizationFailedError.code,
            [],
        )
        body = {"topic_partitions": [{"topic": "t", "partitions": [0]}], "timeout": 1000}
        elected = kafka_call(plaintext, 43, 2, {"election_type": 0, **body})
        assert elected["error_code"] == ClusterAuthorizationFailedError.code
        (result,) = elected["replica_election_results"]
        assert [p["error_code"] for p in result["partition_result"]] == [
            ClusterAuthorizationFailedError.code
        ]
