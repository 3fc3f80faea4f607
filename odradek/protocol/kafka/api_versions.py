"""The Kafka APIs and versions odradek's Kafka listener advertises, and which it serves.

Kafka's own ranges as of Kafka 4.x, except where noted. Produce advertises v0-2 although it
serves v3 and later only: librdkafka turns compression on only when Produce v0 is listed, and
v0-2 carry message format v0/v1 which odradek does not store (a v0-2 request is answered with
UNSUPPORTED_VERSION on every partition). The group APIs are the classic protocol's, with the
versions Kafka 4.x serves for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from odradek.protocol.kafka.message_codec import request_spec, response_spec


@dataclass(frozen=True)
class ApiRange:
    """One API: its key, Kafka's name, the versions advertised and the first one served."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    min_served: int


PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 18, 19, 20, 21
DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS = 32, 33, 37
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER, FIND_COORDINATOR = 44, 60, 10
INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 22, 23
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
DESCRIBE_LOG_DIRS, ELECT_LEADERS = 35, 43
DESCRIBE_PRODUCERS = 61
# Consumer groups (classic protocol).
OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
# Transactions.
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66

ADVERTISED: dict[int, ApiRange] = {
    r.api_key: r
    for r in (
        ApiRange(PRODUCE, "Produce", 0, 12, 3),
        ApiRange(FETCH, "Fetch", 4, 12, 4),
        ApiRange(LIST_OFFSETS, "ListOffsets", 1, 7, 1),
        ApiRange(METADATA, "Metadata", 0, 12, 0),
        ApiRange(API_VERSIONS, "ApiVersions", 0, 5, 0),
        ApiRange(CREATE_TOPICS, "CreateTopics", 2, 7, 2),
        ApiRange(DELETE_TOPICS, "DeleteTopics", 1, 6, 1),
        ApiRange(DELETE_RECORDS, "DeleteRecords", 0, 2, 0),
        ApiRange(DESCRIBE_CONFIGS, "DescribeConfigs", 1, 4, 1),
        ApiRange(ALTER_CONFIGS, "AlterConfigs", 0, 2, 0),
        ApiRange(INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1, 0),
        ApiRange(DESCRIBE_CLUSTER, "DescribeCluster", 0, 1, 0),
        ApiRange(CREATE_PARTITIONS, "CreatePartitions", 0, 3, 0),
        ApiRange(INIT_PRODUCER_ID, "InitProducerId", 0, 5, 0),
        ApiRange(OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 2, 4, 2),
        ApiRange(SASL_HANDSHAKE, "SaslHandshake", 0, 1, 0),
        ApiRange(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, 0),
        ApiRange(DESCRIBE_ACLS, "DescribeAcls", 1, 3, 1),
        ApiRange(CREATE_ACLS, "CreateAcls", 1, 3, 1),
        ApiRange(DELETE_ACLS, "DeleteAcls", 1, 3, 1),
        ApiRange(DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0, 0),
        ApiRange(ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0, 0),
        ApiRange(DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0, 1, 0),
        ApiRange(ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0, 1, 0),
        ApiRange(DESCRIBE_LOG_DIRS, "DescribeLogDirs", 1, 5, 1),
        ApiRange(ELECT_LEADERS, "ElectLeaders", 0, 2, 0),
        ApiRange(DESCRIBE_PRODUCERS, "DescribeProducers", 0, 0, 0),
        # Consumer groups (classic protocol).
        ApiRange(FIND_COORDINATOR, "FindCoordinator", 0, 6, 0),
        ApiRange(JOIN_GROUP, "JoinGroup", 0, 9, 0),
        ApiRange(SYNC_GROUP, "SyncGroup", 0, 5, 0),
        ApiRange(HEARTBEAT, "Heartbeat", 0, 4, 0),
        ApiRange(LEAVE_GROUP, "LeaveGroup", 0, 5, 0),
        ApiRange(OFFSET_COMMIT, "OffsetCommit", 2, 9, 2),
        ApiRange(OFFSET_FETCH, "OffsetFetch", 1, 8, 1),
        ApiRange(LIST_GROUPS, "ListGroups", 0, 4, 0),
        ApiRange(DESCRIBE_GROUPS, "DescribeGroups", 0, 5, 0),
        ApiRange(DELETE_GROUPS, "DeleteGroups", 0, 2, 0),
        ApiRange(OFFSET_DELETE, "OffsetDelete", 0, 0, 0),
        # Transactions.
        ApiRange(ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 5, 0),
        ApiRange(ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 4, 0),
        ApiRange(END_TXN, "EndTxn", 0, 5, 0),
        ApiRange(TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 6, 0),
        ApiRange(DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0, 0),
        ApiRange(LIST_TRANSACTIONS, "ListTransactions", 0, 2, 0),
    )
}


TRANSACTION_VERSION_FEATURE = "transaction.version"
FINALIZED_TRANSACTION_VERSION = 2
"""``transaction.version`` as ApiVersions (v3+) advertises it, supported 0..2 and finalized at
2 as Kafka 4.4 does: a Java client 4.x then uses transaction version 2 (KIP-890)."""
FINALIZED_FEATURES_EPOCH = 1
"""The features never change on this broker; a client takes finalized features only from an
epoch above the -1 it starts at."""


def api_name(api_key: int) -> str:
    """Kafka's name of an advertised API; "unknown" otherwise (metric labels stay few)."""
    found = ADVERTISED.get(api_key)
    return found.name if found is not None else "unknown"


def is_served(api_key: int, api_version: int) -> bool:
    found = ADVERTISED.get(api_key)
    return found is not None and found.min_version <= api_version <= found.max_version


def request_flexibility(api_key: int, api_version: int) -> bool | None:
    """Whether a served request version is flexible (``is_flexible_request``); None when the
    version is not served. One look-up for the usual request."""
    try:
        return _FLEXIBILITY[api_key, api_version]
    except KeyError:
        if not is_served(api_key, api_version):
            return None
        flexible = _FLEXIBILITY[api_key, api_version] = is_flexible_request(api_key, api_version)
        return flexible


_FLEXIBILITY: dict[tuple[int, int], bool] = {}
"""The served versions looked up so far (bounded by the versions served)."""


@cache
def is_flexible_request(api_key: int, api_version: int) -> bool:
    """Whether this request version uses compact fields, tagged fields and header v2."""
    if api_key == PRODUCE and api_version < 3:
        return False
    return request_spec(api_key, api_version).flexible


@cache
def response_header_version(api_key: int, api_version: int) -> int:
    """1 (with tagged fields) for flexible responses, except ApiVersions: always 0, so a
    client that does not know the broker's versions yet can read it."""
    if api_key == API_VERSIONS or (api_key == PRODUCE and api_version < 3):
        return 0
    return 1 if response_spec(api_key, api_version).flexible else 0
