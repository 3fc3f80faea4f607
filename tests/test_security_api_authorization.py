"""Every served API's authorization, on both protocols, against Kafka's rules (KafkaApis,
ControllerApis, AuthHelper): one table, one row (or more) per API.

Each row says what Kafka requires (the ACLs: resource, name, operation) and what a principal
without them gets (the error, and where). The table is checked against the APIs the broker's
routers serve, so an API served without a row fails here. Every row runs twice on a broker
with StandardAuthorizer semantics, as ``alice`` over SASL/PLAIN: without any ACL (refused as
Kafka refuses) and with exactly the ACLs the row names (no authorization error left).
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from security_helpers import (
    ADMIN,
    ADMIN_PASSWORD,
    PASSWORD,
    USER,
    address,
    kafka_request,
    secure_broker,
)
from server_helpers import RawClient, RunningBroker, batch

from odradek.cli.main import cli
from odradek.client import Consumer
from odradek.errors import GroupAuthorizationFailedError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.client_quotas import (
    AlterClientQuotasEntry,
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    QuotaEntityPart,
    QuotaOp,
)
from odradek.protocol.configs import (
    AlterableTopicConfigs,
    AlterConfigsRequest,
    DescribeConfigsRequest,
)
from odradek.protocol.delete_groups import DeleteGroupsRequest
from odradek.protocol.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from odradek.protocol.describe_groups import DescribeGroupsRequest
from odradek.protocol.describe_topic_partitions import DescribeTopicPartitionsRequest
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.find_coordinator import FindCoordinatorRequest
from odradek.protocol.heartbeat import HeartbeatRequest
from odradek.protocol.init_producer_id import InitProducerIdRequest
from odradek.protocol.join_group import JoinGroupProtocol, JoinGroupRequest
from odradek.protocol.kafka.api_versions import ADVERTISED
from odradek.protocol.kafka_data import KafkaData, kafka_data_request, to_wire
from odradek.protocol.leave_group import LeaveGroupRequest, LeavingMember
from odradek.protocol.list_groups import ListGroupsRequest
from odradek.protocol.list_offsets import ListOffsetsPartition, ListOffsetsRequest
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_delete import OffsetDeleteRequest
from odradek.protocol.offset_fetch import GroupPartition, OffsetFetchGroup, OffsetFetchRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from odradek.protocol.schema import Message
from odradek.protocol.sync_group import SyncGroupRequest
from odradek.protocol.topics import (
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from odradek.protocol.values.fetch import FetchPartition
from odradek.protocol.values.produce import ProducePartitionData
from odradek.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.security.acl_store import AclStore

TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNKNOWN_TOPIC_ID = 100
AUTHORIZATION_ERRORS = {
    TOPIC_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:{ADMIN}",
}
TOPIC, DOOMED, GROUP = "secret", "doomed", "secret-group"
"""A topic with one record, a topic only the by-id DeleteTopics row may delete, and a group
with a committed offset for the topic's partition 0."""
TXN = "secret-txn"
"""A transactional id with a producer."""
TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE = 2, 4, 32
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
X = ResourceType.TRANSACTIONAL_ID
Op = AclOperation
KAFKA_NAMES = {
    **{int(key): key.display_name for key in ApiKey},
    **{key: served.name for key, served in ADVERTISED.items()},
}


@dataclass(frozen=True)
class World:
    """What the rows' requests name that only the running broker knows."""

    topic_id: uuid.UUID
    doomed_id: uuid.UUID


@dataclass(frozen=True)
class Row:
    """One API (``case`` tells several rows of one API apart): what Kafka requires, the
    request on each protocol (None: not served there) and what a refused principal gets."""

    api: ApiKey | int
    case: str
    needs: tuple[tuple[ResourceType, str, AclOperation], ...]
    """The ACLs (LITERAL ALLOWs) that let the request through; () for none."""
    refused: int | None
    """The one authorization error a principal without ``needs`` gets; None: the request is
    answered without one (see ``refused_check``)."""
    kafka: Callable[[World], tuple[int, dict[str, Any]]] | None = None
    msgpack: Callable[[World], Message] | None = None
    refused_check: Callable[[dict[str, Any], World], None] | None = None
    allowed_check: Callable[[dict[str, Any], World], None] | None = None
    checks_on: tuple[str, ...] = ("kafka", "msgpack")
    """The protocols whose responses have what the checks look at."""
    why: str = ""

    @property
    def id(self) -> str:
        return f"{KAFKA_NAMES[int(self.api)]}-{self.case}"


def _partitions(name: str, key: str = "partitions", **fields: Any) -> dict[str, Any]:
    return {"name": name, key: [{"partition_index": 0, **fields}]}


def _metadata_name_hidden(response: dict[str, Any], world: World) -> None:
    (topic,) = response["topics"]
    assert (topic["error_code"], topic["name"], topic["topic_id"]) == (
        TOPIC_AUTHORIZATION_FAILED,
        None,
        world.topic_id,
    ), topic


def _configs_withheld(response: dict[str, Any], _world: World) -> None:
    (topic,) = response["topics"]
    assert (topic["error_code"], topic["topic_config_error_code"]) == (
        0,
        TOPIC_AUTHORIZATION_FAILED,
    ), topic
    assert (topic["configs"], topic["num_partitions"]) == ([], -1), topic


def _metadata_cluster_operations(response: dict[str, Any], expected: int) -> None:
    assert response["cluster_authorized_operations"] == expected, response


def _group_not_listed(response: dict[str, Any], _world: World | None = None) -> None:
    assert GROUP not in [g["group_id"] for g in response["groups"]], response


def _group_listed(response: dict[str, Any], _world: World | None = None) -> None:
    assert GROUP in [g["group_id"] for g in response["groups"]], response


def _answered(response: dict[str, Any], _world: World | None = None) -> None:
    assert not set(error_codes(response)) & AUTHORIZATION_ERRORS, response


def _cluster_operations(expected: int) -> Callable[[dict[str, Any]], None]:
    def check(response: dict[str, Any], _world: World) -> None:
        assert response["error_code"] == 0, response
        assert response["cluster_authorized_operations"] == expected, response

    return check


def _group_operations(error: int, expected: int) -> Callable[[dict[str, Any]], None]:
    def check(response: dict[str, Any], _world: World) -> None:
        (group,) = response["groups"]
        assert (group["error_code"], group["authorized_operations"]) == (error, expected), group

    return check


def _topic_operations(expected: int) -> Callable[[dict[str, Any]], None]:
    def check(response: dict[str, Any], _world: World) -> None:
        (topic,) = response["topics"]
        assert (topic["error_code"], topic["name"]) == (0, TOPIC), topic
        assert topic["topic_authorized_operations"] == expected, topic

    return check


def _bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


def _names_exclude(response: dict[str, Any], name: str) -> None:
    assert name not in [t["name"] for t in response["topics"]], response


def _names_include(response: dict[str, Any], name: str) -> None:
    assert name in [t["name"] for t in response["topics"]], response


def _transaction_not_listed(response: dict[str, Any], _world: World | None = None) -> None:
    assert TXN not in [t["transactional_id"] for t in response["transaction_states"]], response


def _transaction_listed(response: dict[str, Any], _world: World | None = None) -> None:
    assert TXN in [t["transactional_id"] for t in response["transaction_states"]], response


def _deleted_name_hidden(response: dict[str, Any], world: World) -> None:
    (topic,) = response["responses"]
    assert (topic["error_code"], topic["name"], topic["topic_id"]) == (
        TOPIC_AUTHORIZATION_FAILED,
        None,
        world.doomed_id,
    ), topic


def _kafka_data(api_key: ApiKey, data: dict[str, Any], version: int = 0) -> KafkaData:
    """A msgpack Kafka-data request (protocol/kafka_data.py): Kafka's request data, as the
    Kafka rows give it, the rest at its defaults."""
    message_type = kafka_data_request(api_key, version)
    return message_type.from_header(to_wire(message_type.spec, data))


PLAIN_TOKEN = f"\0{USER}\0{PASSWORD}"
JOIN_PROTOCOLS = [{"name": "range", "metadata": b""}]

# fmt: off
TABLE: tuple[Row, ...] = (
    # --- records ------------------------------------------------------------------------------
    Row(
        ApiKey.PRODUCE, "write", ((T, TOPIC, Op.WRITE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (9, {"transactional_id": None, "acks": -1, "timeout": 5000,
                              "topic_data": [{"name": TOPIC, "partition_data": [
                                  {"index": 0, "records": batch(1)}]}]}),
        msgpack=lambda w: ProduceRequest((ProducePartitionData(TOPIC, 0, batch(1)),)),
    ),
    Row(
        ApiKey.FETCH, "read", ((T, TOPIC, Op.READ),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0,
                               "max_bytes": 1 << 20, "session_epoch": -1,
                               "topics": [{"topic": TOPIC, "partitions": [
                                   {"partition": 0, "fetch_offset": 0,
                                    "partition_max_bytes": 1 << 20}]}]}),
        msgpack=lambda w: FetchRequest((FetchPartition(TOPIC, 0, 0),), max_wait_ms=0),
    ),
    Row(
        ApiKey.FETCH, "follower", ((C, CLUSTER_NAME, Op.CLUSTER_ACTION), (T, TOPIC, Op.READ)),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (12, {"replica_id": 1, "max_wait": 0, "min_bytes": 0,
                               "max_bytes": 1 << 20, "session_epoch": -1,
                               "topics": [{"topic": TOPIC, "partitions": [
                                   {"partition": 0, "fetch_offset": 0,
                                    "partition_max_bytes": 1 << 20}]}]}),
        why="a follower's fetch needs ClusterAction (Kafka then asks no topic ACL; odradek, "
        "which has no followers, still asks Read)",
    ),
    Row(
        ApiKey.LIST_OFFSETS, "describe", ((T, TOPIC, Op.DESCRIBE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (7, {"replica_id": -1, "topics": [
            _partitions(TOPIC, timestamp=-1)]}),
        msgpack=lambda w: ListOffsetsRequest((ListOffsetsPartition(TOPIC, 0, -1),)),
    ),
    Row(
        61, "read", ((T, TOPIC, Op.READ),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (0, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}),
        msgpack=lambda w: _kafka_data(
            ApiKey.DESCRIBE_PRODUCERS, {"topics": [{"name": TOPIC, "partition_indexes": [0]}]}),
        why="DescribeProducers: Read on the topic, refused per partition (KafkaApis)",
    ),
    Row(
        ApiKey.LIST_OFFSETS, "max-timestamp", ((T, TOPIC, Op.DESCRIBE),),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (7, {"replica_id": -1, "topics": [
            _partitions(TOPIC, timestamp=-3)]}),
    ),
    Row(
        ApiKey.DELETE_RECORDS, "delete", ((T, TOPIC, Op.DELETE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (2, {"topics": [_partitions(TOPIC, offset=0)], "timeout": 5000}),
        msgpack=lambda w: DeleteRecordsRequest((DeleteRecordsPartition(TOPIC, 0, 0),)),
    ),
    Row(
        ApiKey.INIT_PRODUCER_ID, "idempotent", ((C, CLUSTER_NAME, Op.IDEMPOTENT_WRITE),),
        CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"transactional_id": None, "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1}),
        msgpack=lambda w: InitProducerIdRequest(),
        why="or Write on some topic (authorizeByResourceType): see the InitProducerId tests",
    ),
    Row(
        ApiKey.INIT_PRODUCER_ID, "write-on-a-topic", ((T, TOPIC, Op.WRITE),),
        CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"transactional_id": None, "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1}),
        msgpack=lambda w: InitProducerIdRequest(),
    ),
    Row(
        23, "describe", ((T, TOPIC, Op.DESCRIBE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
        why="OffsetForLeaderEpoch: Describe on the topic (or ClusterAction on the cluster)",
    ),
    # --- metadata and topics ------------------------------------------------------------------
    Row(
        ApiKey.METADATA, "by-name", ((T, TOPIC, Op.DESCRIBE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (12, {"topics": [{"topic_id": None, "name": TOPIC}],
                               "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": True}),
        msgpack=lambda w: MetadataRequest((TOPIC,), allow_auto_topic_creation=False),
        allowed_check=_topic_operations(_bits(Op.DESCRIBE)),
        checks_on=("kafka",),
    ),
    Row(
        ApiKey.METADATA, "by-id", ((T, TOPIC, Op.DESCRIBE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (12, {"topics": [{"topic_id": w.topic_id, "name": None}],
                               "allow_auto_topic_creation": False}),
        refused_check=_metadata_name_hidden,
    ),
    Row(
        ApiKey.METADATA, "all", ((T, TOPIC, Op.DESCRIBE),), None,
        kafka=lambda w: (12, {"topics": None, "allow_auto_topic_creation": False}),
        msgpack=lambda w: MetadataRequest(None),
        refused_check=lambda r, w: _names_exclude(r, TOPIC),
        allowed_check=lambda r, w: _names_include(r, TOPIC),
        why="all topics: those not describable are left out",
    ),
    Row(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS, "describe", ((T, TOPIC, Op.DESCRIBE),),
        TOPIC_AUTHORIZATION_FAILED,
        msgpack=lambda w: DescribeTopicPartitionsRequest((TOPIC,)),
    ),
    Row(
        ApiKey.CREATE_TOPICS, "create", ((T, "alice-new", Op.CREATE),),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (7, {"topics": [{"name": "alice-new", "num_partitions": 1,
                                          "replication_factor": -1}], "timeout": 5000,
                              "validate_only": True}),
        msgpack=lambda w: CreateTopicsRequest((CreatableTopic("alice-new", 1),),
                                              validate_only=True),
    ),
    Row(
        ApiKey.CREATE_TOPICS, "created-without-describe-configs",
        ((T, "alice-made", Op.CREATE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (7, {"topics": [{"name": "alice-made", "num_partitions": 1,
                                          "replication_factor": -1}], "timeout": 5000}),
        allowed_check=_configs_withheld,
        why="created, but its configs are not told without DescribeConfigs",
    ),
    Row(
        ApiKey.CREATE_TOPICS, "create-on-cluster", ((C, CLUSTER_NAME, Op.CREATE),),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (7, {"topics": [{"name": "alice-new", "num_partitions": 1,
                                          "replication_factor": -1}], "timeout": 5000,
                              "validate_only": True}),
        msgpack=lambda w: CreateTopicsRequest((CreatableTopic("alice-new", 1),),
                                              validate_only=True),
    ),
    Row(
        ApiKey.DELETE_TOPICS, "by-name", ((T, "never-created", Op.DELETE),),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (6, {"topics": [{"name": "never-created", "topic_id": None}],
                              "timeout": 5000}),
        msgpack=lambda w: DeleteTopicsRequest(("never-created",)),
    ),
    Row(
        ApiKey.DELETE_TOPICS, "delete-on-cluster", ((C, CLUSTER_NAME, Op.DELETE),),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (6, {"topics": [{"name": "never-created", "topic_id": None}],
                              "timeout": 5000}),
        msgpack=lambda w: DeleteTopicsRequest(("never-created",)),
    ),
    Row(
        ApiKey.DELETE_TOPICS, "by-id", ((T, DOOMED, Op.DELETE),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (6, {"topics": [{"name": None, "topic_id": w.doomed_id}],
                              "timeout": 5000}),
        refused_check=_deleted_name_hidden,
        why="without Describe the name is not told (null); the id is not secret",
    ),
    Row(
        ApiKey.CREATE_PARTITIONS, "alter", ((T, TOPIC, Op.ALTER),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (3, {"topics": [{"name": TOPIC, "count": 1, "assignments": None}],
                              "timeout": 5000, "validate_only": True}),
        msgpack=lambda w: CreatePartitionsRequest((CreatePartitionsTopic(TOPIC, 1),),
                                                  validate_only=True),
    ),
    # --- configs --------------------------------------------------------------------------------
    Row(
        ApiKey.DESCRIBE_CONFIGS, "topic", ((T, TOPIC, Op.DESCRIBE_CONFIGS),),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"resources": [{"resource_type": TOPIC_RESOURCE,
                                             "resource_name": TOPIC,
                                             "configuration_keys": None}]}),
        msgpack=lambda w: DescribeConfigsRequest((TOPIC,)),
    ),
    Row(
        ApiKey.DESCRIBE_CONFIGS, "broker", ((C, CLUSTER_NAME, Op.DESCRIBE_CONFIGS),),
        CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"resources": [{"resource_type": BROKER_RESOURCE,
                                             "resource_name": "0",
                                             "configuration_keys": ["log.dirs"]}]}),
    ),
    Row(
        ApiKey.ALTER_CONFIGS, "topic", ((T, TOPIC, Op.ALTER_CONFIGS),),
        TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (2, {"resources": [{"resource_type": TOPIC_RESOURCE,
                                             "resource_name": TOPIC, "configs": []}],
                              "validate_only": True}),
        msgpack=lambda w: AlterConfigsRequest((AlterableTopicConfigs(TOPIC, {}),),
                                              validate_only=True),
    ),
    Row(
        44, "topic", ((T, TOPIC, Op.ALTER_CONFIGS),), TOPIC_AUTHORIZATION_FAILED,
        kafka=lambda w: (1, {"resources": [{"resource_type": TOPIC_RESOURCE,
                                             "resource_name": TOPIC, "configs": []}],
                              "validate_only": True}),
        why="IncrementalAlterConfigs",
    ),
    Row(
        ApiKey.DESCRIBE_CONFIGS, "group", ((G, GROUP, Op.DESCRIBE_CONFIGS),),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"resources": [{"resource_type": GROUP_RESOURCE,
                                             "resource_name": GROUP,
                                             "configuration_keys": None}]}),
        why="a group's configs: DescribeConfigs on the group",
    ),
    Row(
        ApiKey.ALTER_CONFIGS, "group", ((G, GROUP, Op.ALTER_CONFIGS),),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (2, {"resources": [{"resource_type": GROUP_RESOURCE,
                                             "resource_name": GROUP, "configs": [
                                                 {"name": "consumer.session.timeout.ms",
                                                  "value": "50000"}]}],
                              "validate_only": True}),
        why="AlterConfigs on the group, then refused (read-only) as INVALID_REQUEST",
    ),
    Row(
        44, "group", ((G, GROUP, Op.ALTER_CONFIGS),), GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (1, {"resources": [{"resource_type": GROUP_RESOURCE,
                                             "resource_name": GROUP, "configs": [
                                                 {"name": "consumer.session.timeout.ms",
                                                  "config_operation": 0, "value": "50000"}]}],
                              "validate_only": True}),
        why="IncrementalAlterConfigs: AlterConfigs on the group, then refused (read-only)",
    ),
    Row(
        ApiKey.DESCRIBE_CONFIGS, "broker-logger", ((C, CLUSTER_NAME, Op.DESCRIBE_CONFIGS),),
        CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"resources": [{"resource_type": 8, "resource_name": "0",
                                             "configuration_keys": None}]}),
    ),
    Row(
        ApiKey.ALTER_CONFIGS, "broker", ((C, CLUSTER_NAME, Op.ALTER_CONFIGS),),
        CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (2, {"resources": [{"resource_type": BROKER_RESOURCE,
                                             "resource_name": "0", "configs": []}],
                              "validate_only": True}),
    ),
    Row(
        44, "broker", ((C, CLUSTER_NAME, Op.ALTER_CONFIGS),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (1, {"resources": [{"resource_type": BROKER_RESOURCE,
                                             "resource_name": "0", "configs": []}],
                              "validate_only": True}),
    ),
    Row(
        ApiKey.METADATA, "cluster-operations", ((C, CLUSTER_NAME, Op.DESCRIBE),), None,
        kafka=lambda w: (10, {"topics": [], "allow_auto_topic_creation": False,
                               "include_cluster_authorized_operations": True}),
        refused_check=lambda r, w: _metadata_cluster_operations(r, 0),
        allowed_check=lambda r, w: _metadata_cluster_operations(r, _bits(Op.DESCRIBE)),
        why="Metadata v8-10: the cluster's operations only with Describe on it",
    ),
    # --- cluster ----------------------------------------------------------------------------
    Row(
        60, "operations", ((C, CLUSTER_NAME, Op.DESCRIBE),), None,
        kafka=lambda w: (1, {"include_cluster_authorized_operations": True,
                              "endpoint_type": 1}),
        msgpack=lambda w: _kafka_data(
            ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True}),
        refused_check=_cluster_operations(0),
        allowed_check=_cluster_operations(_bits(Op.DESCRIBE)),
        why="DescribeCluster: answered to anyone; its operations only with Describe",
    ),
    Row(
        35, "all-dirs", ((C, CLUSTER_NAME, Op.DESCRIBE),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"topics": None}),
        why="DescribeLogDirs: Describe on the cluster; refused as a whole (error_code, no dirs)",
    ),
    Row(
        43, "preferred", ((C, CLUSTER_NAME, Op.ALTER),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (2, {"election_type": 0, "timeout_ms": 5000,
                              "topic_partitions": [{"topic": TOPIC, "partitions": [0]}]}),
        why="ElectLeaders: Alter on the cluster; every partition refused",
    ),
    Row(
        29, "describe", ((C, CLUSTER_NAME, Op.DESCRIBE),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (3, {"resource_type_filter": 1, "resource_name_filter": None,
                              "pattern_type_filter": 1, "principal_filter": None,
                              "host_filter": None, "operation": 1, "permission_type": 1}),
        why="DescribeAcls",
    ),
    Row(
        30, "alter", ((C, CLUSTER_NAME, Op.ALTER),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (3, {"creations": [{"resource_type": 2, "resource_name": "nothing",
                                             "resource_pattern_type": 3,
                                             "principal": "User:nobody", "host": "*",
                                             "operation": 3, "permission_type": 3}]}),
        why="CreateAcls",
    ),
    Row(
        31, "alter", ((C, CLUSTER_NAME, Op.ALTER),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (3, {"filters": [{"resource_type_filter": 2,
                                           "resource_name_filter": "nothing",
                                           "pattern_type_filter": 3,
                                           "principal_filter": "User:nobody",
                                           "host_filter": None, "operation": 1,
                                           "permission_type": 1}]}),
        why="DeleteAcls",
    ),
    Row(
        50, "describe", ((C, CLUSTER_NAME, Op.DESCRIBE),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (0, {"users": None}),
        why="DescribeUserScramCredentials",
    ),
    Row(
        51, "alter", ((C, CLUSTER_NAME, Op.ALTER),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (0, {"deletions": [{"name": "nobody", "mechanism": 1}],
                              "upsertions": []}),
        why="AlterUserScramCredentials",
    ),
    Row(
        ApiKey.DESCRIBE_CLIENT_QUOTAS, "describe-configs",
        ((C, CLUSTER_NAME, Op.DESCRIBE_CONFIGS),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (1, {"components": [], "strict": False}),
        msgpack=lambda w: DescribeClientQuotasRequest(),
    ),
    Row(
        ApiKey.ALTER_CLIENT_QUOTAS, "alter-configs", ((C, CLUSTER_NAME, Op.ALTER_CONFIGS),),
        CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (1, {"entries": [{"entity": [{"entity_type": "user",
                                                       "entity_name": "nobody"}],
                                          "ops": [{"key": "producer_byte_rate",
                                                   "value": 1024.0, "remove": False}]}],
                              "validate_only": True}),
        msgpack=lambda w: AlterClientQuotasRequest(
            (AlterClientQuotasEntry((QuotaEntityPart("user", "nobody"),),
                                    (QuotaOp("producer_byte_rate", 1024.0),)),),
            validate_only=True),
    ),
    # --- transactions -------------------------------------------------------------------------
    Row(
        ApiKey.FIND_COORDINATOR, "transactional-id", ((X, TXN, Op.DESCRIBE),),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"key_type": 1, "coordinator_keys": [TXN]}),
        msgpack=lambda w: FindCoordinatorRequest((TXN,), key_type=1),
    ),
    Row(
        ApiKey.FIND_COORDINATOR, "share-state", ((C, CLUSTER_NAME, Op.CLUSTER_ACTION),),
        CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (6, {"key_type": 2, "coordinator_keys": ["g:AAAAAAAAAAAAAAAAAAAAAA:0"]}),
        why="FindCoordinator v6 share-group state keys (brokers'): ClusterAction, then "
            "INVALID_REQUEST (no share coordinator)",
    ),
    Row(
        ApiKey.FIND_COORDINATOR, "transactional-id-kafka-data", ((X, TXN, Op.DESCRIBE),),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        msgpack=lambda w: _kafka_data(
            ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": [TXN]}, version=1),
        why="msgpack FindCoordinator v1: Kafka's request data",
    ),
    Row(
        ApiKey.INIT_PRODUCER_ID, "transactional", ((X, TXN, Op.WRITE),),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (5, {"transactional_id": TXN, "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1}),
        msgpack=lambda w: _kafka_data(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": TXN, "transaction_timeout": 60000}, version=1),
    ),
    Row(
        ApiKey.PRODUCE, "transactional", ((X, TXN, Op.WRITE), (T, TOPIC, Op.WRITE)),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (9, {"transactional_id": TXN, "acks": -1, "timeout": 5000,
                              "topic_data": [{"name": TOPIC, "partition_data": [
                                  {"index": 0, "records": batch(1)}]}]}),
        msgpack=lambda w: ProduceRequest(
            (ProducePartitionData(TOPIC, 0, batch(1)),), transactional_id=TXN),
    ),
    Row(
        24, "client", ((X, TXN, Op.WRITE), (T, TOPIC, Op.WRITE)),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (3, {"v3_and_below_transactional_id": TXN,
                              "v3_and_below_producer_id": 1 << 40,
                              "v3_and_below_producer_epoch": 0,
                              "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}),
        msgpack=lambda w: _kafka_data(ApiKey.ADD_PARTITIONS_TO_TXN, {
            "v3_and_below_transactional_id": TXN, "v3_and_below_producer_id": 1 << 40,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]}),
        why="AddPartitionsToTxn v0-3: Write on the transactional id and on each topic",
    ),
    Row(
        24, "brokers", ((C, CLUSTER_NAME, Op.CLUSTER_ACTION),), CLUSTER_AUTHORIZATION_FAILED,
        kafka=lambda w: (5, {"transactions": [{
            "transactional_id": TXN, "producer_id": 1 << 40, "producer_epoch": 0,
            "verify_only": True, "topics": [{"name": TOPIC, "partitions": [0]}]}]}),
        why="AddPartitionsToTxn v4+ (brokers' batched form): ClusterAction",
    ),
    Row(
        25, "write", ((X, TXN, Op.WRITE), (G, GROUP, Op.READ)),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"transactional_id": TXN, "producer_id": 1 << 40,
                              "producer_epoch": 0, "group_id": GROUP}),
        msgpack=lambda w: _kafka_data(ApiKey.ADD_OFFSETS_TO_TXN, {
            "transactional_id": TXN, "producer_id": 1 << 40, "producer_epoch": 0,
            "group_id": GROUP}),
        why="AddOffsetsToTxn: Write on the transactional id, Read on the group",
    ),
    Row(
        26, "write", ((X, TXN, Op.WRITE),), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (5, {"transactional_id": TXN, "producer_id": 1 << 40,
                              "producer_epoch": 0, "committed": True}),
        msgpack=lambda w: _kafka_data(ApiKey.END_TXN, {
            "transactional_id": TXN, "producer_id": 1 << 40, "producer_epoch": 0,
            "committed": True}),
        why="EndTxn",
    ),
    Row(
        65, "describe", ((X, TXN, Op.DESCRIBE),), TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (0, {"transactional_ids": [TXN]}),
        msgpack=lambda w: _kafka_data(
            ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [TXN]}),
        why="DescribeTransactions",
    ),
    Row(
        66, "describe", ((X, TXN, Op.DESCRIBE),), None,
        kafka=lambda w: (2, {"state_filters": [], "producer_id_filters": [],
                              "duration_filter": -1, "transactional_id_pattern": None}),
        msgpack=lambda w: _kafka_data(ApiKey.LIST_TRANSACTIONS, {}),
        refused_check=_transaction_not_listed,
        allowed_check=_transaction_listed,
        why="ListTransactions lists the transactional ids the principal may describe",
    ),
    # --- groups -------------------------------------------------------------------------------
    Row(
        ApiKey.FIND_COORDINATOR, "describe", ((G, GROUP, Op.DESCRIBE),),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"key_type": 0, "coordinator_keys": [GROUP]}),
        msgpack=lambda w: FindCoordinatorRequest((GROUP,)),
    ),
    Row(
        ApiKey.JOIN_GROUP, "read", ((G, GROUP, Op.READ),), GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (9, {"group_id": GROUP, "session_timeout": 10000,
                              "rebalance_timeout": 10000, "member_id": "",
                              "protocol_type": "consumer", "protocols": JOIN_PROTOCOLS}),
        msgpack=lambda w: JoinGroupRequest(GROUP, 10000, "consumer",
                                           (JoinGroupProtocol("range", b""),), 10000),
    ),
    Row(
        ApiKey.SYNC_GROUP, "read", ((G, GROUP, Op.READ),), GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (5, {"group_id": GROUP, "generation_id": 1, "member_id": "m",
                              "protocol_type": "consumer", "protocol_name": "range",
                              "assignments": []}),
        msgpack=lambda w: SyncGroupRequest(GROUP, 1, "m"),
    ),
    Row(
        ApiKey.HEARTBEAT, "read", ((G, GROUP, Op.READ),), GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"group_id": GROUP, "generation_id": 1, "member_id": "m"}),
        msgpack=lambda w: HeartbeatRequest(GROUP, 1, "m"),
    ),
    Row(
        ApiKey.LEAVE_GROUP, "read", ((G, GROUP, Op.READ),), GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (5, {"group_id": GROUP, "members": [{"member_id": "m"}]}),
        msgpack=lambda w: LeaveGroupRequest(GROUP, (LeavingMember("m"),)),
    ),
    Row(
        ApiKey.OFFSET_COMMIT, "read", ((G, GROUP, Op.READ), (T, TOPIC, Op.READ)),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (9, {"group_id": GROUP, "generation_id_or_member_epoch": -1,
                              "member_id": "", "topics": [
                                  _partitions(TOPIC, committed_offset=0)]}),
        msgpack=lambda w: OffsetCommitRequest(GROUP, (OffsetCommitPartition(TOPIC, 0, 0),)),
    ),
    Row(
        ApiKey.OFFSET_FETCH, "describe", ((G, GROUP, Op.DESCRIBE), (T, TOPIC, Op.DESCRIBE)),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (8, {"groups": [{"group_id": GROUP, "topics": [
            {"name": TOPIC, "partition_indexes": [0]}]}], "require_stable": False}),
        msgpack=lambda w: OffsetFetchRequest(
            (OffsetFetchGroup(GROUP, (GroupPartition(TOPIC, 0),)),)),
    ),
    Row(
        28, "read", ((X, TXN, Op.WRITE), (G, GROUP, Op.READ), (T, TOPIC, Op.READ)),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        kafka=lambda w: (4, {"transactional_id": TXN, "group_id": GROUP,
                              "producer_id": 0, "producer_epoch": 0, "generation_id": -1,
                              "member_id": "", "group_instance_id": None, "topics": [
                                  _partitions(TOPIC, committed_offset=0,
                                              committed_metadata=None)]}),
        msgpack=lambda w: _kafka_data(ApiKey.TXN_OFFSET_COMMIT, {
            "transactional_id": TXN, "group_id": GROUP, "producer_id": 0,
            "producer_epoch": 0, "topics": [_partitions(TOPIC, committed_offset=0)]}),
        why="TxnOffsetCommit: Write on the transactional id, Read on the group, then Read on "
            "each topic (KafkaApis)",
    ),
    Row(
        ApiKey.OFFSET_DELETE, "delete", ((G, GROUP, Op.DELETE), (T, TOPIC, Op.READ)),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (0, {"group_id": GROUP, "topics": [_partitions(TOPIC)]}),
        msgpack=lambda w: OffsetDeleteRequest(GROUP, (GroupPartition(TOPIC, 0),)),
    ),
    Row(
        ApiKey.LIST_GROUPS, "describe", ((G, GROUP, Op.DESCRIBE),), None,
        kafka=lambda w: (4, {"states_filter": []}),
        msgpack=lambda w: ListGroupsRequest(),
        refused_check=_group_not_listed,
        allowed_check=_group_listed,
        why="lists the groups the principal may describe (all with Describe on the cluster)",
    ),
    Row(
        ApiKey.DESCRIBE_GROUPS, "describe", ((G, GROUP, Op.DESCRIBE),),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (5, {"groups": [GROUP], "include_authorized_operations": True}),
        msgpack=lambda w: DescribeGroupsRequest((GROUP,)),
        refused_check=_group_operations(GROUP_AUTHORIZATION_FAILED, AUTHORIZED_OPERATIONS_OMITTED),
        allowed_check=_group_operations(0, _bits(Op.DESCRIBE)),
        checks_on=("kafka",),
    ),
    Row(
        ApiKey.DELETE_GROUPS, "delete", ((G, "never-joined", Op.DELETE),),
        GROUP_AUTHORIZATION_FAILED,
        kafka=lambda w: (2, {"groups_names": ["never-joined"]}),
        msgpack=lambda w: DeleteGroupsRequest(("never-joined",)),
    ),
    # --- no authorization -----------------------------------------------------------------------
    Row(
        ApiKey.API_VERSIONS, "none", (), None,
        kafka=lambda w: (3, {"client_software_name": "t", "client_software_version": "1"}),
        msgpack=lambda w: ApiVersionsRequest(),
        refused_check=_answered,
    ),
    Row(
        ApiKey.SASL_HANDSHAKE, "none", (), None,
        kafka=lambda w: (1, {"mechanism": "PLAIN"}),
        msgpack=lambda w: SaslHandshakeRequest("PLAIN"),
        refused_check=_answered,
        why="after authentication: ILLEGAL_SASL_STATE, as Kafka answers",
    ),
    Row(
        ApiKey.SASL_AUTHENTICATE, "none", (), None,
        kafka=lambda w: (2, {"auth_bytes": PLAIN_TOKEN.encode()}),
        msgpack=lambda w: SaslAuthenticateRequest(PLAIN_TOKEN),
        refused_check=_answered,
        why="after authentication: ILLEGAL_SASL_STATE, as Kafka answers",
    ),
)
# fmt: on


def error_codes(value: Any) -> Iterator[int]:
    """Every error code anywhere in a decoded response (dicts, lists, dataclasses)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("error_code", "error", "partition_error_code") and isinstance(item, int):
                yield item
            else:
                yield from error_codes(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from error_codes(item)


# --- the two protocols' clients ------------------------------------------------------------------


def kafka_call(
    broker: RunningBroker, api_key: int, version: int, body: dict[str, Any], auth: str
) -> dict[str, Any]:
    """One Kafka-protocol request as the principal of ``auth`` (a PLAIN token)."""
    return kafka_request(address(broker, "SASL_PLAINTEXT"), api_key, version, body, auth)


def msgpack_call(broker: RunningBroker, request: Message, auth: str) -> dict[str, Any]:
    """One msgpack request on a new connection authenticated with ``auth``; its response as
    a dict (with the request-level error as ``error_code``)."""
    host, port = address(broker, "SASL_PLAINTEXT").split(":")
    with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
        client.call(SaslHandshakeRequest("PLAIN"))
        client.call(SaslAuthenticateRequest(auth))
        client.send(request)
        header, body = client.read_response(request)
    return {"error_code": header.error, **(_plain(body) if body is not None else {})}


def _plain(value: Any) -> Any:
    """A msgpack response as the Kafka responses are decoded: dicts, lists and values."""
    if isinstance(value, KafkaData):
        return dict(value.data)  # Kafka's data already
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


# --- the broker --------------------------------------------------------------------------------


@dataclass
class Secured:
    broker: RunningBroker
    world: World
    acls: AclStore = field(init=False)

    def __post_init__(self) -> None:
        self.acls = AclStore(self.broker.data_dir)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secure_broker(tmp_path_factory.mktemp("api-authorization"), AUTHORIZER) as running:
        broker, _ = running
        admin = f"\0{ADMIN}\0{ADMIN_PASSWORD}"
        for name in (TOPIC, DOOMED):
            created = msgpack_call(broker, CreateTopicsRequest((CreatableTopic(name, 1),)), admin)
            assert created["topics"][0]["error"] == 0, created
        produced = msgpack_call(
            broker, ProduceRequest((ProducePartitionData(TOPIC, 0, batch(1)),)), admin
        )
        assert produced["partitions"][0]["error"] == 0, produced
        committed = msgpack_call(
            broker, OffsetCommitRequest(GROUP, (OffsetCommitPartition(TOPIC, 0, 1),)), admin
        )
        assert committed["partitions"][0]["error"] == 0, committed
        initialized = kafka_call(
            broker,
            22,
            5,
            {
                "transactional_id": TXN,
                "transaction_timeout": 60000,
                "producer_id": -1,
                "producer_epoch": -1,
            },
            admin,
        )
        assert initialized["error_code"] == 0, initialized
        metadata = kafka_call(
            broker, 3, 12, {"topics": None, "allow_auto_topic_creation": False}, admin
        )
        ids = {t["name"]: t["topic_id"] for t in metadata["topics"]}
        yield Secured(broker, World(ids[TOPIC], ids[DOOMED]))


@pytest.fixture
def alice(secured: Secured) -> Iterator[Secured]:
    """The broker with no ACL for alice, and none left after the test."""
    everything_of_alice = AclBindingFilter(principal=f"User:{USER}")
    secured.acls.remove([everything_of_alice])
    yield secured
    secured.acls.remove([everything_of_alice])


def _grant(secured: Secured, needs: tuple[tuple[ResourceType, str, AclOperation], ...]) -> None:
    secured.acls.add(
        AclBinding(kind, name, PatternType.LITERAL, f"User:{USER}", "*", op, PermissionType.ALLOW)
        for kind, name, op in needs
    )


def _ask(secured: Secured, row: Row, protocol: str) -> dict[str, Any]:
    if protocol == "kafka":
        version, body = row.kafka(secured.world)
        return kafka_call(secured.broker, int(row.api), version, body, PLAIN_TOKEN)
    return msgpack_call(secured.broker, row.msgpack(secured.world), PLAIN_TOKEN)


CASES = [
    pytest.param(row, protocol, id=f"{protocol}-{row.id}")
    for row in TABLE
    for protocol in ("kafka", "msgpack")
    if getattr(row, protocol) is not None
]


# --- the tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["kafka", "msgpack"])
def test_every_served_api_has_a_row(secured: Secured, protocol: str) -> None:
    served = secured.broker.broker.served_api_keys[protocol]
    rows = {int(row.api) for row in TABLE if getattr(row, protocol) is not None}
    assert sorted(served - rows) == [], f"served on {protocol} without an authorization row"
    assert sorted(rows - served) == [], f"rows for APIs {protocol} does not serve"


@pytest.mark.parametrize(("row", "protocol"), CASES)
def test_refused_without_the_acls_kafka_requires(alice: Secured, row: Row, protocol: str) -> None:
    response = _ask(alice, row, protocol)
    if row.refused is not None:
        assert set(error_codes(response)) - {0} == {row.refused}, response
    if row.refused_check is not None and protocol in row.checks_on:
        row.refused_check(response, alice.world)


@pytest.mark.parametrize(("row", "protocol"), [c for c in CASES if c.values[0].needs])
def test_allowed_with_exactly_the_acls_kafka_requires(
    alice: Secured, row: Row, protocol: str
) -> None:
    _grant(alice, row.needs)
    response = _ask(alice, row, protocol)
    assert not set(error_codes(response)) & AUTHORIZATION_ERRORS, response
    if row.allowed_check is not None and protocol in row.checks_on:
        row.allowed_check(response, alice.world)


def test_an_unknown_topic_id_is_unknown_to_anyone(alice: Secured) -> None:
    """Metadata v12 and DeleteTopics v6 by an id no topic has: UNKNOWN_TOPIC_ID and no name,
    whatever the principal may do (an id of a topic it may not describe: see the table)."""
    stranger = uuid.uuid4()
    _grant(alice, ((C, CLUSTER_NAME, Op.DELETE), (T, "*", Op.DESCRIBE)))
    metadata = kafka_call(
        alice.broker,
        3,
        12,
        {"topics": [{"topic_id": stranger, "name": None}], "allow_auto_topic_creation": False},
        PLAIN_TOKEN,
    )
    assert [(t["error_code"], t["name"], t["topic_id"]) for t in metadata["topics"]] == [
        (UNKNOWN_TOPIC_ID, None, stranger)
    ]
    deleted = kafka_call(
        alice.broker, 20, 6, {"topics": [{"name": None, "topic_id": stranger}]}, PLAIN_TOKEN
    )
    assert [(t["error_code"], t["name"], t["topic_id"]) for t in deleted["responses"]] == [
        (UNKNOWN_TOPIC_ID, None, stranger)
    ]


def test_a_topic_id_is_named_to_a_principal_that_may_describe_it(alice: Secured) -> None:
    """Describe without Delete: DeleteTopics by id names the topic it refuses (Kafka's
    ControllerApis); Metadata by id answers it in full."""
    _grant(alice, ((T, TOPIC, Op.DESCRIBE),))
    deleted = kafka_call(
        alice.broker,
        20,
        6,
        {"topics": [{"name": None, "topic_id": alice.world.topic_id}]},
        PLAIN_TOKEN,
    )
    assert [(t["error_code"], t["name"]) for t in deleted["responses"]] == [
        (TOPIC_AUTHORIZATION_FAILED, TOPIC)
    ]
    metadata = kafka_call(
        alice.broker,
        3,
        12,
        {
            "topics": [{"topic_id": alice.world.topic_id, "name": None}],
            "allow_auto_topic_creation": False,
        },
        PLAIN_TOKEN,
    )
    assert [(t["error_code"], t["name"]) for t in metadata["topics"]] == [(0, TOPIC)]


LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY


@pytest.mark.parametrize(
    ("bindings", "allowed"),
    [
        ([(PREFIXED, "orders-", ALLOW), (PREFIXED, "orders-", DENY)], False),
        ([(PREFIXED, "orders-", ALLOW), (PREFIXED, "ord", DENY)], False),
        ([(LITERAL, "orders-x", ALLOW), (PREFIXED, "orders-", DENY)], False),
        ([(LITERAL, "orders-x", ALLOW), (LITERAL, "orders-x", DENY)], False),
        ([(LITERAL, "orders-x", ALLOW), (LITERAL, "*", DENY)], False),
        ([(LITERAL, "orders-x", ALLOW), (LITERAL, "orders-y", DENY)], True),
        ([(PREFIXED, "orders-", ALLOW), (PREFIXED, "orders-x", DENY)], True),
        ([(PREFIXED, "orders-", ALLOW), (LITERAL, "orders-", DENY)], True),
        ([(LITERAL, "*", ALLOW), (PREFIXED, "orders-", DENY)], True),
        ([(PREFIXED, "hard", ALLOW)], True),  # Kafka asks about a topic named "hardcode" first
    ],
    ids=lambda value: (
        "+".join(f"{p.name}-{kind.name}:{name}".lower() for kind, name, p in value)
        if isinstance(value, list)
        else ("allowed" if value else "refused")
    ),
)
def test_init_producer_id_follows_kafkas_authorize_by_resource_type(
    alice: Secured, bindings: list[tuple[PatternType, str, PermissionType]], allowed: bool
) -> None:
    """Without IdempotentWrite on the cluster, an idempotent InitProducerId needs Write on
    some topic, which Kafka's ``authorizeByResourceType`` decides: a DENY overrides an
    ALLOW it dominates (a LITERAL of the same name, a PREFIXED of a prefix of it)."""
    alice.acls.add(
        AclBinding(T, name, pattern, f"User:{USER}", "*", Op.WRITE, permission)
        for pattern, name, permission in bindings
    )
    expected = 0 if allowed else CLUSTER_AUTHORIZATION_FAILED
    body = {"transactional_id": None, "transaction_timeout": 60000}
    answer = kafka_call(
        alice.broker, 22, 4, {**body, "producer_id": -1, "producer_epoch": -1}, PLAIN_TOKEN
    )
    assert answer["error_code"] == expected, answer
    assert (
        msgpack_call(alice.broker, InitProducerIdRequest(), PLAIN_TOKEN)["error_code"] == expected
    )
    # IdempotentWrite on the cluster is enough whatever the topics' ACLs say.
    _grant(alice, ((C, CLUSTER_NAME, Op.IDEMPOTENT_WRITE),))
    assert msgpack_call(alice.broker, InitProducerIdRequest(), PLAIN_TOKEN)["error_code"] == 0


def _client_settings(secured: Secured) -> dict[str, str]:
    return {
        "bootstrap_servers": address(secured.broker, "SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": USER,
        "sasl_password": PASSWORD,
    }


REFUSED_GROUP = f"GROUP_AUTHORIZATION_FAILED: Not authorized to access group: {GROUP}"


def test_odradeks_consumer_raises_when_refused_its_group(alice: Secured) -> None:
    """As Kafka's consumer raises GroupAuthorizationException: not an empty poll for ever."""
    _grant(alice, ((T, TOPIC, Op.READ),))
    with Consumer(**_client_settings(alice), group_id=GROUP, request_timeout_ms=10000) as consumer:
        consumer.subscribe([TOPIC])
        with pytest.raises(GroupAuthorizationFailedError) as raised:
            for _ in range(20):
                consumer.poll(500)
    assert str(raised.value) == REFUSED_GROUP


def test_odradek_consume_group_exits_non_zero_when_refused(alice: Secured, tmp_path: Path) -> None:
    _grant(alice, ((T, TOPIC, Op.READ),))
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{USER}" password="{PASSWORD}";\n'
    )
    consumed = CliRunner().invoke(
        cli,
        [
            "consume", TOPIC, "--group", GROUP, "--from-beginning", "--timeout-ms", "5000",
            "--bootstrap", address(alice.broker, "SASL_PLAINTEXT"),
            "--command-config", str(config),
        ],
    )  # fmt: skip
    assert consumed.exit_code != 0, consumed.output
    assert REFUSED_GROUP in consumed.output, consumed.output


@pytest.mark.parametrize("protocol", ["kafka", "msgpack"])
def test_metadata_auto_creates_only_what_the_principal_may_create(
    alice: Secured, protocol: str
) -> None:
    """Describe without Create: a missing topic is refused, not UNKNOWN_TOPIC_OR_PARTITION
    (Kafka's ``unauthorizedForCreateTopics``); with Create it is created."""
    name = f"auto-{protocol}"
    _grant(alice, ((T, name, Op.DESCRIBE),))

    def ask() -> tuple[int, str | None]:
        if protocol == "kafka":
            body = {"topics": [{"topic_id": None, "name": name}], "allow_auto_topic_creation": True}
            (topic,) = kafka_call(alice.broker, 3, 12, body, PLAIN_TOKEN)["topics"]
            return topic["error_code"], topic["name"]
        (topic,) = msgpack_call(alice.broker, MetadataRequest((name,)), PLAIN_TOKEN)["topics"]
        return topic["error"], topic["name"]

    assert ask() == (TOPIC_AUTHORIZATION_FAILED, name)
    assert name not in alice.broker.broker.log_manager.topics()
    _grant(alice, ((T, name, Op.CREATE),))
    assert ask() == (0, name)
    assert name in alice.broker.broker.log_manager.topics()


@pytest.mark.parametrize("protocol", ["kafka", "msgpack"])
def test_delete_topics_tells_a_describer_what_does_not_exist(alice: Secured, protocol: str) -> None:
    """Describe without Delete: a missing topic is UNKNOWN_TOPIC_OR_PARTITION and an existing
    one TOPIC_AUTHORIZATION_FAILED (Kafka's ControllerApis.deleteTopics)."""
    _grant(alice, ((T, "never-created", Op.DESCRIBE), (T, TOPIC, Op.DESCRIBE)))
    names = ["never-created", TOPIC]
    if protocol == "kafka":
        body = {"topics": [{"name": n, "topic_id": None} for n in names], "timeout": 5000}
        answers = kafka_call(alice.broker, 20, 6, body, PLAIN_TOKEN)["responses"]
        found = {(t["name"], t["error_code"]) for t in answers}
    else:
        answers = msgpack_call(alice.broker, DeleteTopicsRequest(tuple(names)), PLAIN_TOKEN)
        found = {(t["name"], t["error"]) for t in answers["topics"]}
    assert found == {("never-created", 3), (TOPIC, TOPIC_AUTHORIZATION_FAILED)}


def test_a_follower_fetch_needs_cluster_action(alice: Secured) -> None:
    """Read on the topic is not enough for a fetch that says it comes from a replica."""
    _grant(alice, ((T, TOPIC, Op.READ),))
    body = {"replica_id": 1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "session_epoch": -1, "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}  # fmt: skip
    (topic,) = kafka_call(alice.broker, 1, 12, body, PLAIN_TOKEN)["responses"]
    assert [p["error_code"] for p in topic["partitions"]] == [TOPIC_AUTHORIZATION_FAILED]
    as_consumer = kafka_call(alice.broker, 1, 12, {**body, "replica_id": -1}, PLAIN_TOKEN)
    assert [p["error_code"] for p in as_consumer["responses"][0]["partitions"]] == [0]
