"""GroupRequestHandlers: the group APIs of odradek's msgpack protocol, translated field by field
to the GroupCoordinator's calls and back (Kafka's ``handleJoinGroupRequest`` and siblings)."""

from __future__ import annotations

from odradek.errors import CoordinatorNotAvailableError, KafkaError
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
from odradek.protocol.metadata import BrokerMetadata
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
from odradek.server.group.coordinator_results import MemberIdentity, OffsetCommitEntry
from odradek.server.group.group_coordinator import GroupCoordinator
from odradek.server.group.group_metadata_manager import GroupMetadataManager
from odradek.server.request_context import RequestContext


class GroupRequestHandlers:
    """One method per group API; each takes the decoded request and its context."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        manager: GroupMetadataManager,
        broker: BrokerMetadata,
    ) -> None:
        self._coordinator = coordinator
        self._manager = manager
        self._broker = broker

    async def find_coordinator(
        self, request: FindCoordinatorRequest, _context: RequestContext
    ) -> FindCoordinatorResponse:
        """This broker for every group key (creating ``__consumer_offsets`` on first use, as
        Kafka does); transaction keys have no coordinator here."""
        if request.key_type != GROUP_KEY_TYPE:
            error: KafkaError | None = CoordinatorNotAvailableError(
                "this broker has no transaction coordinator"
            )
        else:
            error = None
            try:
                await self._manager.ensure_topic()
            except KafkaError as failure:
                error = CoordinatorNotAvailableError(f"cannot create the offsets topic: {failure}")
        broker = self._broker
        return FindCoordinatorResponse(
            tuple(
                Coordinator(key, error=error.code, message=error.message)
                if error is not None
                else Coordinator(key, broker.node_id, broker.host, broker.port)
                for key in request.coordinator_keys
            )
        )

    async def join_group(
        self, request: JoinGroupRequest, context: RequestContext
    ) -> JoinGroupResponse:
        result = await self._coordinator.join_group(
            request.group_id,
            request.member_id,
            request.group_instance_id,
            True,
            context.header.client_id or "",
            _client_host(context),
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
        self, request: SyncGroupRequest, _context: RequestContext
    ) -> SyncGroupResponse:
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
        self, request: HeartbeatRequest, _context: RequestContext
    ) -> HeartbeatResponse:
        error = await self._coordinator.heartbeat(
            request.group_id, request.member_id, request.group_instance_id, request.generation_id
        )
        return HeartbeatResponse(error.error_code, error.error_message)

    async def leave_group(
        self, request: LeaveGroupRequest, _context: RequestContext
    ) -> LeaveGroupResponse:
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
        self, request: OffsetCommitRequest, _context: RequestContext
    ) -> OffsetCommitResponse:
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
                for p in request.partitions
            ],
        )
        return OffsetCommitResponse(
            tuple(
                OffsetCommitPartitionResponse(
                    r.topic, r.partition, r.error.error_code, r.error.error_message
                )
                for r in results
            )
        )

    async def offset_fetch(
        self, request: OffsetFetchRequest, _context: RequestContext
    ) -> OffsetFetchResponse:
        groups = []
        for group in request.groups:
            wanted = (
                None
                if group.partitions is None
                else [(p.topic, p.partition) for p in group.partitions]
            )
            result = self._coordinator.fetch_offsets(group.group_id, wanted)
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
                        for p in result.partitions
                    ),
                )
            )
        return OffsetFetchResponse(tuple(groups))

    async def list_groups(
        self, request: ListGroupsRequest, _context: RequestContext
    ) -> ListGroupsResponse:
        listings = self._coordinator.list_groups(request.states_filter)
        return ListGroupsResponse(
            groups=tuple(ListedGroup(g.group_id, g.protocol_type, g.group_state) for g in listings)
        )

    async def describe_groups(
        self, request: DescribeGroupsRequest, _context: RequestContext
    ) -> DescribeGroupsResponse:
        entries = []
        for group_id in request.groups:
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
        self, request: DeleteGroupsRequest, _context: RequestContext
    ) -> DeleteGroupsResponse:
        results = await self._coordinator.delete_groups(request.groups)
        return DeleteGroupsResponse(
            tuple(
                DeletedGroup(r.group_id, r.error.error_code, r.error.error_message) for r in results
            )
        )

    async def offset_delete(
        self, request: OffsetDeleteRequest, _context: RequestContext
    ) -> OffsetDeleteResponse:
        error, results = await self._coordinator.delete_offsets(
            request.group_id, [(p.topic, p.partition) for p in request.partitions]
        )
        return OffsetDeleteResponse(
            error.error_code,
            error.error_message,
            tuple(
                OffsetDeletePartitionResponse(
                    r.topic, r.partition, r.error.error_code, r.error.error_message
                )
                for r in results
            ),
        )


def _client_host(context: RequestContext) -> str:
    """The peer's address as Kafka shows a member's host: ``/`` and the IP."""
    host = context.peer.rsplit(":", 1)[0] if ":" in context.peer else context.peer
    return "/" + host.strip("[]")
