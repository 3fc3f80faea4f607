"""KafkaGroupApis: the consumer-group APIs of Kafka's protocol (FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups, OffsetDelete), answered by the GroupCoordinator.

Each is authorized as Kafka's KafkaApis does before the coordinator sees it: FindCoordinator
(group keys) and DescribeGroups and OffsetFetch need Describe on the group; JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and TxnOffsetCommit need Read on it (the
two commits also Read on each topic, OffsetFetch Describe on each; TxnOffsetCommit first Write
on its transactional id); DeleteGroups and
OffsetDelete need Delete on it (OffsetDelete also Read on each topic). ListGroups lists the
groups the principal may describe (all of them with Describe on the cluster). A refusal is
GROUP_AUTHORIZATION_FAILED (or TOPIC_AUTHORIZATION_FAILED for a topic), audit-logged by the
Authorizer.

Each handler reads the request's fields by their kio names, calls the coordinator the msgpack
protocol's handlers call, and writes the fields of the response version asked for: fields a
version lacks are simply not written, so one answer serves every version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from odradek.errors import (
    CoordinatorNotAvailableError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicIdError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.security.acl import AUTHORIZED_OPERATIONS_OMITTED, AclOperation, ResourceType
from odradek.server.admin.topic_ids import TopicIds
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.authorization.group_authorization import GroupAuthorization
from odradek.server.group.coordinator_log import CoordinatorLog
from odradek.server.group.coordinator_results import (
    ErrorInfo,
    MemberIdentity,
    OffsetCommitEntry,
    PartitionResult,
)
from odradek.server.group.group_coordinator import GroupCoordinator
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext, client_host
from odradek.server.transaction.transaction_coordinator_keys import TransactionCoordinatorKeys

GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE = 0, 1, 2
FIRST_SHARE_KEY_TYPE = 6  # FindCoordinator v6+: share-group state keys (KIP-932)
FIRST_JOIN_WITH_MEMBER_ID_REQUIRED = 4  # JoinGroup v4+: MEMBER_ID_REQUIRED round trip
FIRST_BATCHED_LEAVE = 3  # LeaveGroup v3+: members[]
FIRST_OFFSET_FETCH_GROUP_ERROR = 2  # OffsetFetch v2+: a top-level error_code
FIRST_OFFSET_FETCH_GROUPS = 8  # OffsetFetch v8+: groups[]
FIRST_NULLABLE_PROTOCOL_NAME = 7  # JoinGroup v7+
FIRST_IMPLICIT_TXN_OFFSETS = 5  # TxnOffsetCommit v5+: transaction version 2 (KIP-890)
FIRST_TXN_OFFSETS_BY_TOPIC_ID = 6  # TxnOffsetCommit v6+: topics named by id
READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE
WRITE = AclOperation.WRITE


class KafkaGroupApis:
    """The group APIs of Kafka's protocol, one handler each."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        manager: CoordinatorLog,
        node_id: int,
        endpoint: Callable[[RequestContext], tuple[str, int]],
        topic_ids: TopicIds,
        authorizer: Authorizer | None = None,
        transaction_keys: TransactionCoordinatorKeys | None = None,
    ) -> None:
        """``endpoint``: the host and port the client of a request reaches this broker at
        (what Metadata tells it), which FindCoordinator names; ``topic_ids`` names the topics
        of a request that gives their ids; ``transaction_keys`` answers for transactional
        ids."""
        self._coordinator = coordinator
        self._transaction_keys = transaction_keys
        self._topic_ids = topic_ids
        self._manager = manager
        self._node_id = node_id
        self._endpoint = endpoint
        self._authorization = GroupAuthorization(authorizer or Authorizer())

    def handlers(self) -> dict[int, KafkaHandler]:
        return {
            apis.FIND_COORDINATOR: self._find_coordinator,
            apis.JOIN_GROUP: self._join_group,
            apis.SYNC_GROUP: self._sync_group,
            apis.HEARTBEAT: self._heartbeat,
            apis.LEAVE_GROUP: self._leave_group,
            apis.OFFSET_COMMIT: self._offset_commit,
            apis.TXN_OFFSET_COMMIT: self._txn_offset_commit,
            apis.OFFSET_FETCH: self._offset_fetch,
            apis.LIST_GROUPS: self._list_groups,
            apis.DESCRIBE_GROUPS: self._describe_groups,
            apis.DELETE_GROUPS: self._delete_groups,
            apis.OFFSET_DELETE: self._offset_delete,
        }

    # --- FindCoordinator ---------------------------------------------------------------------

    async def _find_coordinator(self, request: KafkaRequest, context: RequestContext) -> dict:
        """This broker for every group key (creating ``__consumer_offsets`` on first use, as
        Kafka does) and every transactional id (creating ``__transaction_state``); other key
        types are invalid. Share-group state keys (v6+, asked by brokers) need ClusterAction,
        then are INVALID_REQUEST, as Kafka answers them without a share coordinator."""
        body = request.body
        key_type = body.get("key_type", GROUP_KEY_TYPE)
        error: KafkaError | None = None
        transaction_keys = self._transaction_keys
        if key_type == SHARE_KEY_TYPE and request.api_version >= FIRST_SHARE_KEY_TYPE:
            error = self._authorization.authorizer.cluster_denial(
                context, AclOperation.CLUSTER_ACTION
            ) or InvalidRequestError("this broker has no share coordinator")
        elif key_type == TRANSACTION_KEY_TYPE:
            if transaction_keys is None:
                error = InvalidRequestError("this broker has no transaction coordinator")
            else:
                error = await transaction_keys.ready()
        elif key_type != GROUP_KEY_TYPE:
            error = InvalidRequestError(f"unknown coordinator key type {key_type}")
        else:
            try:
                await self._manager.topic.ensure()
            except KafkaError as failure:
                error = CoordinatorNotAvailableError(f"cannot create the offsets topic: {failure}")
        host, port = self._endpoint(context)

        def found(key: str) -> dict[str, Any]:
            refusal = error
            if refusal is None and key_type == GROUP_KEY_TYPE:
                refusal = self._authorization.group_denial(context, DESCRIBE, key)
            elif refusal is None and transaction_keys is not None:
                refusal = transaction_keys.denial(context, key)
            if refusal is None:
                return {"node_id": self._node_id, "host": host, "port": port, "error_code": 0}
            return {
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": refusal.code,
                "error_message": refusal.message,
            }

        if "coordinator_keys" in body:  # v4+: one answer per key
            return {"coordinators": [{"key": k, **found(k)} for k in body["coordinator_keys"]]}
        return found(body.get("key", ""))

    # --- membership --------------------------------------------------------------------------

    async def _join_group(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        version = request.api_version
        denial = self._authorization.group_denial(context, READ, body["group_id"])
        if denial is not None:
            return {
                "error_code": denial.code,
                "generation_id": -1,
                "protocol_type": None,
                "protocol_name": None if version >= FIRST_NULLABLE_PROTOCOL_NAME else "",
                "leader": "",
                "member_id": body["member_id"],
                "members": [],
            }
        result = await self._coordinator.join_group(
            body["group_id"],
            body["member_id"],
            body.get("group_instance_id"),
            version >= FIRST_JOIN_WITH_MEMBER_ID_REQUIRED,
            request.client_id or "",
            client_host(context),
            body.get("rebalance_timeout", -1),
            body["session_timeout"],
            body["protocol_type"],
            [(p["name"], p["metadata"]) for p in body["protocols"]],
            body.get("reason"),
        )
        protocol_name = result.protocol_name
        if protocol_name is None and version < FIRST_NULLABLE_PROTOCOL_NAME:
            protocol_name = ""
        return {
            "error_code": result.error.error_code,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": protocol_name,
            "leader": result.leader,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in result.members
            ],
        }

    async def _sync_group(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        denial = self._authorization.group_denial(context, READ, body["group_id"])
        if denial is not None:
            return {"error_code": denial.code, "assignment": b""}
        result = await self._coordinator.sync_group(
            body["group_id"],
            body["generation_id"],
            body["member_id"],
            body.get("group_instance_id"),
            body.get("protocol_type"),
            body.get("protocol_name"),
            {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]},
        )
        return {
            "error_code": result.error.error_code,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        }

    async def _heartbeat(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        denial = self._authorization.group_denial(context, READ, body["group_id"])
        if denial is not None:
            return {"error_code": denial.code}
        error = await self._coordinator.heartbeat(
            body["group_id"],
            body["member_id"],
            body.get("group_instance_id"),
            body["generation_id"],
        )
        return {"error_code": error.error_code}

    async def _leave_group(self, request: KafkaRequest, context: RequestContext) -> dict:
        """v0-2 name one member and get one error (the member's when the group's is none);
        v3+ name several, each with its own outcome."""
        body = request.body
        denial = self._authorization.group_denial(context, READ, body["group_id"])
        if denial is not None:
            return {"error_code": denial.code, "members": []}
        if request.api_version < FIRST_BATCHED_LEAVE:
            identities = [MemberIdentity(body["member_id"])]
        else:
            identities = [
                MemberIdentity(m["member_id"], m.get("group_instance_id")) for m in body["members"]
            ]
        result = await self._coordinator.leave_group(body["group_id"], identities)
        error_code = result.error.error_code
        if request.api_version < FIRST_BATCHED_LEAVE and not error_code and result.members:
            error_code = result.members[0].error.error_code
        return {
            "error_code": error_code,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": m.error.error_code,
                }
                for m in result.members
            ],
        }

    # --- offsets -----------------------------------------------------------------------------

    async def _offset_commit(self, request: KafkaRequest, context: RequestContext) -> dict:
        """Answered once the commit is durable. ``retention_time`` (v2-4) is not honoured:
        offsets expire by ``offsets.retention.minutes`` alone, as since Kafka 2.1 for v5+.
        Without Read on the group every partition is refused; partitions of a topic it may
        not read are refused alone."""
        body = request.body
        topics = body["topics"]
        denial = self._authorization.group_denial(context, READ, body["group_id"])
        if denial is not None:
            return {"topics": _refused_partitions(topics, {t["name"]: denial for t in topics})}
        denials = self._authorization.topic_denials(context, READ, (t["name"] for t in topics))
        if denials:
            allowed = [t for t in topics if t["name"] not in denials]
            body = {**body, "topics": allowed}
            answered = (await self._offset_commit_authorized(body))["topics"] if allowed else []
            return {"topics": _merge_refused(topics, answered, denials)}
        return await self._offset_commit_authorized(body)

    async def _offset_commit_authorized(self, body: dict[str, Any]) -> dict:
        topics = body["topics"]
        results = await self._coordinator.commit_offsets(
            body["group_id"],
            body["generation_id_or_member_epoch"],
            body["member_id"],
            body.get("group_instance_id"),
            _offset_commit_entries(topics),
        )
        return {"topics": _partition_errors(topics, results)}

    async def _txn_offset_commit(self, request: KafkaRequest, context: RequestContext) -> dict:
        """A transaction's offsets (KIP-98; KIP-447's generation, member and instance id from
        v3), answered once durable and held pending until the transaction ends. Without Write
        on the transactional id, or Read on the group, every partition is refused; partitions
        of a topic it may not read are refused alone (Kafka's ``handleTxnOffsetCommitRequest``)."""
        body = request.body
        by_id = request.api_version >= FIRST_TXN_OFFSETS_BY_TOPIC_ID
        topics = await self._named_topics(body["topics"]) if by_id else body["topics"]
        denial = self._authorization.transactional_id_denial(
            context, WRITE, body["transactional_id"]
        ) or self._authorization.group_denial(context, READ, body["group_id"])
        if denial is not None:
            answer = _refused_partitions(topics, {t["name"]: denial for t in topics})
        else:
            implicit_add = request.api_version >= FIRST_IMPLICIT_TXN_OFFSETS
            named = (t["name"] for t in topics if t["name"] is not None)
            denials = {**self._authorization.topic_denials(context, READ, named)}
            if any(t["name"] is None for t in topics):
                denials[None] = UnknownTopicIdError("no topic has this id")
            allowed = [t for t in topics if t["name"] not in denials]
            answered = await self._txn_offset_commit_authorized(body, allowed, implicit_add)
            answer = _merge_refused(topics, answered, denials)
        if by_id:  # the answer names each topic by the id it was asked by
            answer = [
                {"topic_id": t["topic_id"], "partitions": a["partitions"]}
                for t, a in zip(topics, answer, strict=True)
            ]
        return {"topics": answer}

    async def _named_topics(self, topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The topics of a request naming them by id (TxnOffsetCommit v6+), each with its
        name (None: no topic has the id)."""
        return [{**t, "name": await self._topic_ids.resolve(t["topic_id"])} for t in topics]

    async def _txn_offset_commit_authorized(
        self, body: dict[str, Any], topics: list[dict[str, Any]], implicit_add: bool
    ) -> list[dict[str, Any]]:
        if not topics:
            return []
        results = await self._coordinator.commit_transactional_offsets(
            body["transactional_id"],
            body["group_id"],
            body["producer_id"],
            body["producer_epoch"],
            body.get("generation_id", -1),
            body.get("member_id", ""),
            body.get("group_instance_id"),
            _offset_commit_entries(topics),
            implicit_add,
        )
        return _partition_errors(topics, results)

    async def _offset_fetch(self, request: KafkaRequest, context: RequestContext) -> dict:
        """``require_stable`` (v7+): a partition a transaction holds an offset for is answered
        UNSTABLE_OFFSET_COMMIT (KIP-447)."""
        body = request.body
        version = request.api_version
        stable = bool(body.get("require_stable", False))
        if version >= FIRST_OFFSET_FETCH_GROUPS:
            return {
                "groups": [self._fetch_group(g, version, context, stable) for g in body["groups"]]
            }
        return self._fetch_group(body, version, context, stable)

    def _fetch_group(
        self,
        group: dict[str, Any],
        version: int,
        context: RequestContext,
        require_stable: bool = False,
    ) -> dict[str, Any]:
        """One group's committed offsets, by topic; ``topics`` null (v2+) asks for every
        partition the group has an offset for (those of topics the principal may not
        describe left out). Needs Describe on the group; a named topic the principal may
        not describe is answered TOPIC_AUTHORIZATION_FAILED."""
        topics = group["topics"]
        wanted = (
            None
            if topics is None
            else [(t["name"], index) for t in topics for index in t["partition_indexes"]]
        )
        denial = self._authorization.group_denial(context, DESCRIBE, group["group_id"])
        if denial is not None:
            refused = [
                (
                    name,
                    {
                        "partition_index": index,
                        "committed_offset": -1,
                        "metadata": "",
                        "error_code": denial.code,
                    },
                )
                for name, index in (wanted or [])
                if version < FIRST_OFFSET_FETCH_GROUP_ERROR
            ]
            return {
                "group_id": group["group_id"],
                "error_code": denial.code,
                "topics": [{"name": n, "partitions": e} for n, e in _by_topic(refused)],
            }
        denials: dict[str, KafkaError] = {}
        if wanted is not None:
            denials = self._authorization.topic_denials(context, DESCRIBE, (t for t, _ in wanted))
            wanted = [(t, index) for t, index in wanted if t not in denials]
        result = self._coordinator.fetch_offsets(group["group_id"], wanted, require_stable)
        found = result.partitions
        if topics is None and self._authorization.authorizer.enabled:
            found = [p for p in found if self._authorization.may_describe_topic(context, p.topic)]
        partitions = [
            (
                p.topic,
                {
                    "partition_index": p.partition,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": p.committed_leader_epoch,
                    "metadata": p.metadata,
                    "error_code": p.error.error_code,
                },
            )
            for p in found
        ]
        partitions += [
            (
                name,
                {
                    "partition_index": index,
                    "committed_offset": -1,
                    "metadata": "",
                    "error_code": denials[name].code,
                },
            )
            for t in topics or []
            if (name := t["name"]) in denials
            for index in t["partition_indexes"]
        ]
        error_code = result.error.error_code
        if error_code and version < FIRST_OFFSET_FETCH_GROUP_ERROR:
            # v1 has no group-level error: every partition asked for carries it.
            partitions = [
                (
                    name,
                    {
                        "partition_index": index,
                        "committed_offset": -1,
                        "metadata": "",
                        "error_code": error_code,
                    },
                )
                for name, index in wanted or []
            ]
        return {
            "group_id": group["group_id"],
            "error_code": error_code,
            "topics": [
                {"name": name, "partitions": entries} for name, entries in _by_topic(partitions)
            ],
        }

    async def _offset_delete(self, request: KafkaRequest, context: RequestContext) -> dict:
        """Needs Delete on the group; partitions of a topic the principal may not read are
        refused alone."""
        body = request.body
        topics = body["topics"]
        denial = self._authorization.group_denial(context, DELETE, body["group_id"])
        if denial is not None:
            return {"error_code": denial.code, "topics": []}
        denials = self._authorization.topic_denials(context, READ, (t["name"] for t in topics))
        allowed = [t for t in topics if t["name"] not in denials]
        error, results = await self._coordinator.delete_offsets(
            body["group_id"],
            [(t["name"], p["partition_index"]) for t in allowed for p in t["partitions"]],
        )
        if error.error_code:
            return {"error_code": error.error_code, "topics": []}
        answered = _partition_errors(allowed, results)
        return {"error_code": 0, "topics": _merge_refused(topics, answered, denials)}

    # --- administration ----------------------------------------------------------------------

    async def _list_groups(self, request: KafkaRequest, context: RequestContext) -> dict:
        listings = self._coordinator.list_groups(request.body.get("states_filter", ()))
        if self._authorization.authorizer.enabled:
            visible = self._authorization.describable(context, (g.group_id for g in listings))
            listings = [g for g in listings if g.group_id in visible]
        return {
            "error_code": 0,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.group_state,
                }
                for g in listings
            ],
        }

    async def _describe_groups(self, request: KafkaRequest, context: RequestContext) -> dict:
        body = request.body
        with_operations = body.get("include_authorized_operations", False)
        groups = []
        for group_id in body["groups"]:
            denial = self._authorization.group_denial(context, DESCRIBE, group_id)
            if denial is not None:
                groups.append(_refused_group(group_id, denial))
                continue
            group = self._coordinator.describe_group(group_id)
            operations = AUTHORIZED_OPERATIONS_OMITTED
            if with_operations and not group.error.error_code:
                operations = self._authorization.authorizer.authorized_operations(
                    context, ResourceType.GROUP, group_id
                )
            groups.append(
                {
                    "error_code": group.error.error_code,
                    "group_id": group.group_id,
                    "group_state": group.group_state,
                    "protocol_type": group.protocol_type,
                    "protocol_data": group.protocol_data,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.member_metadata,
                            "member_assignment": m.member_assignment,
                        }
                        for m in group.members
                    ],
                    "authorized_operations": operations,
                }
            )
        return {"groups": groups}

    async def _delete_groups(self, request: KafkaRequest, context: RequestContext) -> dict:
        names = request.body["groups_names"]
        denials = {
            name: denial
            for name in dict.fromkeys(names)
            if (denial := self._authorization.group_denial(context, DELETE, name)) is not None
        }
        allowed = [name for name in names if name not in denials]
        results = await self._coordinator.delete_groups(allowed) if allowed else []
        return {
            "results": [{"group_id": r.group_id, "error_code": r.error.error_code} for r in results]
            + [{"group_id": name, "error_code": d.code} for name, d in denials.items()]
        }


def _offset_commit_entries(topics: list[dict[str, Any]]) -> list[OffsetCommitEntry]:
    """OffsetCommit's and TxnOffsetCommit's topics, as the coordinator takes them."""
    return [
        OffsetCommitEntry(
            topic["name"],
            p["partition_index"],
            p["committed_offset"],
            p.get("committed_leader_epoch", -1),
            p["committed_metadata"],
        )
        for topic in topics
        for p in topic["partitions"]
    ]


def _partition_errors(
    topics: list[dict[str, Any]], results: Iterable[PartitionResult]
) -> list[dict[str, Any]]:
    """Per-partition outcomes (in request order) in the request's topics."""
    found = iter(results)
    return [
        {
            "name": topic["name"],
            "partitions": [
                _partition_error(p["partition_index"], next(found).error)
                for p in topic["partitions"]
            ],
        }
        for topic in topics
    ]


def _refused_partitions(
    topics: list[dict[str, Any]], denials: dict[str, KafkaError]
) -> list[dict[str, Any]]:
    """Every partition of ``topics`` answered with its topic's refusal."""
    return [
        {
            "name": topic["name"],
            "partitions": [
                {"partition_index": p["partition_index"], "error_code": denials[topic["name"]].code}
                for p in topic["partitions"]
            ],
        }
        for topic in topics
    ]


def _merge_refused(
    topics: list[dict[str, Any]], answered: list[dict[str, Any]], denials: dict[str, KafkaError]
) -> list[dict[str, Any]]:
    """The request's topics in order: the refused ones refused, the others as answered."""
    answers = iter(answered)
    return [
        _refused_partitions([topic], denials)[0] if topic["name"] in denials else next(answers)
        for topic in topics
    ]


def _refused_group(group_id: str, denial: KafkaError) -> dict[str, Any]:
    return {
        "error_code": denial.code,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _partition_error(partition: int, error: ErrorInfo) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": error.error_code}


def _by_topic(entries: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, list[dict]]]:
    """Consecutive entries of one topic gathered under it, order kept."""
    topics: list[tuple[str, list[dict]]] = []
    for name, entry in entries:
        if topics and topics[-1][0] == name:
            topics[-1][1].append(entry)
        else:
            topics.append((name, [entry]))
    return topics
