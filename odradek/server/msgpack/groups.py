"""MsgpackGroupApis: the group APIs of odradek's msgpack protocol, translated field by field
to the GroupCoordinator's calls and back (Kafka's ``handleJoinGroupRequest`` and siblings).

Authorized as on Kafka's protocol (KafkaGroupApis says the rules): a refusal is
GROUP_AUTHORIZATION_FAILED, or TOPIC_AUTHORIZATION_FAILED for a topic's partitions.
"""

from __future__ import annotations

from odradek.errors import CoordinatorNotAvailableError, InvalidRequestError, KafkaError
from odradek.protocol.delete_groups import DeletedGroup, DeleteGroupsRequest, DeleteGroupsResponse
from odradek.protocol.describe_groups import (
    DescribedGroupEntry,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from odradek.protocol.find_coordinator import (
    GROUP_KEY_TYPE,
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from odradek.protocol.heartbeat import HeartbeatRequest, HeartbeatResponse
from odradek.protocol.join_group import JoinGroupMemberEntry, JoinGroupRequest, JoinGroupResponse
from odradek.protocol.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeavingMemberResponse,
)
from odradek.protocol.list_groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from odradek.protocol.offset_commit import (
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from odradek.protocol.offset_delete import (
    OffsetDeletePartitionResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from odradek.protocol.offset_fetch import (
    OffsetFetchGroupResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from odradek.protocol.sync_group import SyncGroupRequest, SyncGroupResponse
from odradek.protocol.values.broker_metadata import BrokerMetadata
from odradek.security.acl import AclOperation
from odradek.server.authorization.authorizer import Authorizer
from odradek.server.authorization.group_authorization import GroupAuthorization
from odradek.server.group.coordinator_log import CoordinatorLog
from odradek.server.group.coordinator_results import MemberIdentity, OffsetCommitEntry
from odradek.server.group.group_coordinator import GroupCoordinator
from odradek.server.request_context import RequestContext, client_host
from odradek.server.transaction.transaction_coordinator_keys import TransactionCoordinatorKeys

READ, DESCRIBE, DELETE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE


class MsgpackGroupApis:
    """One method per group API; each takes the decoded request and its context."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        manager: CoordinatorLog,
        broker: BrokerMetadata,
        authorizer: Authorizer | None = None,
        transaction_keys: TransactionCoordinatorKeys | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._transaction_keys = transaction_keys
        self._manager = manager
        self._broker = broker
        self._authorization = GroupAuthorization(authorizer or Authorizer())

    async def find_coordinator(
        self, request: FindCoordinatorRequest, context: RequestContext
    ) -> FindCoordinatorResponse:
        """This broker for every group key (creating ``__consumer_offsets`` on first use, as
        Kafka does) and every transactional id (creating ``__transaction_state``)."""
        transaction_keys = self._transaction_keys
        error: KafkaError | None
        if request.key_type != GROUP_KEY_TYPE:
            if transaction_keys is None:
                error = InvalidRequestError("this broker has no transaction coordinator")
            else:
                error = await transaction_keys.ready()
        else:
            error = None
            try:
                await self._manager.topic.ensure()
            except KafkaError as failure:
                error = CoordinatorNotAvailableError(f"cannot create the offsets topic: {failure}")
        broker = self._broker

        def found(key: str) -> Coordinator:
            refusal = error
            if refusal is None and request.key_type == GROUP_KEY_TYPE:
                refusal = self._authorization.group_denial(context, DESCRIBE, key)
            elif refusal is None and transaction_keys is not None:
                refusal = transaction_keys.denial(context, key)
            if refusal is not None:
                return Coordinator(key, error=refusal.code, message=refusal.message)
            return Coordinator(key, broker.node_id, broker.host, broker.port)

        return FindCoordinatorResponse(tuple(found(key) for key in request.coordinator_keys))

    async def join_group(
        self, request: JoinGroupRequest, context: RequestContext
    ) -> JoinGroupResponse:
        denial = self._authorization.group_denial(context, READ, request.group_id)
        if denial is not None:
            return JoinGroupResponse(denial.code, denial.message, member_id=request.member_id)
        result = await self._coordinator.join_group(
            request.group_id,
            request.member_id,
            request.group_instance_id,
            True,
            context.header.client_id or "",
            client_host(context),
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            [(protocol.name, protocol.metadata) for protocol in request.protocols],
            request.reason,
        )
        return JoinGroupResponse(
            result.error.error_code,
            result.error.error_message,
            result.generation_id,
            result.protocol_type,
            result.protocol_name,
            result.leader,
            result.skip_assignment,
            result.member_id,
            tuple(
                JoinGroupMemberEntry(m.member_id, m.group_instance_id, m.metadata)
                for m in result.members
            ),
        )

    async def sync_group(
        self, request: SyncGroupRequest, context: RequestContext
    ) -> SyncGroupResponse:
        denial = self._authorization.group_denial(context, READ, request.group_id)
        if denial is not None:
            return SyncGroupResponse(denial.code, denial.message)
        result = await self._coordinator.sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id,
            request.protocol_type,
            request.protocol_name,
            {entry.member_id: entry.assignment for entry in request.assignments},
        )
        return SyncGroupResponse(
            result.error.error_code,
            result.error.error_message,
            result.protocol_type,
            result.protocol_name,
            result.assignment,
        )

    async def heartbeat(
        self, request: HeartbeatRequest, context: RequestContext
    ) -> HeartbeatResponse:
        denial = self._authorization.group_denial(context, READ, request.group_id)
        if denial is not None:
            return HeartbeatResponse(denial.code, denial.message)
        error = await self._coordinator.heartbeat(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id
        )
        return HeartbeatResponse(error.error_code, error.error_message)

    async def leave_group(
        self, request: LeaveGroupRequest, context: RequestContext
    ) -> LeaveGroupResponse:
        denial = self._authorization.group_denial(context, READ, request.group_id)
        if denial is not None:
            return LeaveGroupResponse(denial.code, denial.message)
        result = await self._coordinator.leave_group(
            request.group_id,
            [MemberIdentity(m.member_id, m.group_instance_id) for m in request.members],
        )
        return LeaveGroupResponse(
            result.error.error_code,
            result.error.error_message,
            tuple(
                LeavingMemberResponse(
                    m.member_id, m.group_instance_id, m.error.error_code, m.error.error_message
                )
                for m in result.members
            ),
        )

    async def offset_commit(
        self, request: OffsetCommitRequest, context: RequestContext
    ) -> OffsetCommitResponse:
        """Needs Read on the group (else every partition is refused) and on each topic."""
        partitions = request.partitions
        denial = self._authorization.group_denial(context, READ, request.group_id)
        if denial is not None:
            denials = {p.topic: denial for p in partitions}
        else:
            denials = self._authorization.topic_denials(
                context, READ, (p.topic for p in partitions)
            )
        allowed = [p for p in partitions if p.topic not in denials]
        results = []
        if allowed:
            results = await self._coordinator.commit_offsets(
                request.group_id,
                request.generation_id,
                request.member_id,
                request.group_instance_id,
                [
                    OffsetCommitEntry(
                        p.topic,
                        p.partition,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata,
                    )
                    for p in allowed
                ],
            )
        answered = iter(
            OffsetCommitPartitionResponse(
                r.topic, r.partition, r.error.error_code, r.error.error_message
            )
            for r in results
        )
        return OffsetCommitResponse(
            tuple(
                OffsetCommitPartitionResponse(
                    p.topic, p.partition, denials[p.topic].code, denials[p.topic].message
                )
                if p.topic in denials
                else next(answered)
                for p in partitions
            )
        )

    async def offset_fetch(
        self, request: OffsetFetchRequest, context: RequestContext
    ) -> OffsetFetchResponse:
        """Needs Describe on each group; a named topic the principal may not describe is
        refused, and asking for all leaves such topics out."""
        groups = []
        authorization = self._authorization
        for group in request.groups:
            denial = authorization.group_denial(context, DESCRIBE, group.group_id)
            if denial is not None:
                groups.append(
                    OffsetFetchGroupResponse(group.group_id, denial.code, denial.message, ())
                )
                continue
            wanted = (
                None
                if group.partitions is None
                else [(p.topic, p.partition) for p in group.partitions]
            )
            denials = authorization.topic_denials(context, DESCRIBE, (t for t, _ in wanted or ()))
            if denials:
                wanted = [(t, p) for t, p in wanted if t not in denials]
            result = self._coordinator.fetch_offsets(group.group_id, wanted)
            found = result.partitions
            if wanted is None and authorization.authorizer.enabled:
                found = [p for p in found if authorization.may_describe_topic(context, p.topic)]
            refused = tuple(
                OffsetFetchPartitionResponse(
                    p.topic,
                    p.partition,
                    error=denials[p.topic].code,
                    message=denials[p.topic].message,
                )
                for p in group.partitions or ()
                if p.topic in denials
            )
            groups.append(
                OffsetFetchGroupResponse(
                    result.group_id,
                    result.error.error_code,
                    result.error.error_message,
                    tuple(
                        OffsetFetchPartitionResponse(
                            p.topic,
                            p.partition,
                            p.committed_offset,
                            p.committed_leader_epoch,
                            p.metadata,
                            p.error.error_code,
                            p.error.error_message,
                        )
                        for p in found
                    )
                    + refused,
                )
            )
        return OffsetFetchResponse(tuple(groups))

    async def list_groups(
        self, request: ListGroupsRequest, context: RequestContext
    ) -> ListGroupsResponse:
        listings = self._coordinator.list_groups(request.states_filter)
        if self._authorization.authorizer.enabled:
            visible = self._authorization.describable(context, (g.group_id for g in listings))
            listings = [g for g in listings if g.group_id in visible]
        return ListGroupsResponse(
            groups=tuple(ListedGroup(g.group_id, g.protocol_type, g.group_state) for g in listings)
        )

    async def describe_groups(
        self, request: DescribeGroupsRequest, context: RequestContext
    ) -> DescribeGroupsResponse:
        entries = []
        for group_id in request.groups:
            denial = self._authorization.group_denial(context, DESCRIBE, group_id)
            if denial is not None:
                entries.append(
                    DescribedGroupEntry(group_id, denial.code, denial.message, "", "", "", ())
                )
                continue
            group = self._coordinator.describe_group(group_id)
            entries.append(
                DescribedGroupEntry(
                    group.group_id,
                    group.error.error_code,
                    group.error.error_message,
                    group.group_state,
                    group.protocol_type,
                    group.protocol_data,
                    tuple(
                        DescribedGroupMember(
                            m.member_id,
                            m.group_instance_id,
                            m.client_id,
                            m.client_host,
                            m.member_metadata,
                            m.member_assignment,
                        )
                        for m in group.members
                    ),
                )
            )
        return DescribeGroupsResponse(tuple(entries))

    async def delete_groups(
        self, request: DeleteGroupsRequest, context: RequestContext
    ) -> DeleteGroupsResponse:
        denials = {
            name: denial
            for name in dict.fromkeys(request.groups)
            if (denial := self._authorization.group_denial(context, DELETE, name)) is not None
        }
        allowed = [name for name in request.groups if name not in denials]
        results = await self._coordinator.delete_groups(allowed) if allowed else []
        return DeleteGroupsResponse(
            tuple(
                DeletedGroup(r.group_id, r.error.error_code, r.error.error_message) for r in results
            )
            + tuple(DeletedGroup(name, d.code, d.message) for name, d in denials.items())
        )

    async def offset_delete(
        self, request: OffsetDeleteRequest, context: RequestContext
    ) -> OffsetDeleteResponse:
        """Needs Delete on the group and Read on each topic."""
        denial = self._authorization.group_denial(context, DELETE, request.group_id)
        if denial is not None:
            return OffsetDeleteResponse(denial.code, denial.message, ())
        partitions = request.partitions
        denials = self._authorization.topic_denials(context, READ, (p.topic for p in partitions))
        error, results = await self._coordinator.delete_offsets(
            request.group_id, [(p.topic, p.partition) for p in partitions if p.topic not in denials]
        )
        return OffsetDeleteResponse(
            error.error_code,
            error.error_message,
            tuple(
                OffsetDeletePartitionResponse(
                    r.topic, r.partition, r.error.error_code, r.error.error_message
                )
                for r in results
            )
            + tuple(
                OffsetDeletePartitionResponse(
                    p.topic, p.partition, denials[p.topic].code, denials[p.topic].message
                )
                for p in partitions
                if p.topic in denials and not error.error_code
            ),
        )
