"""What the GroupCoordinator answers, free of any wire protocol: both odradek's msgpack
handlers and Kafka's binary ones translate these field by field (names are Kafka's)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import KafkaError, error_code_for

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""


@dataclass(frozen=True)
class ErrorInfo:
    """An error code (0 for none) and what went wrong."""

    error_code: int = 0
    error_message: str | None = None

    @classmethod
    def of(cls, error: BaseException) -> ErrorInfo:
        message = error.message if isinstance(error, KafkaError) else str(error)
        return cls(error_code_for(error), message)


NO_ERROR = ErrorInfo()


@dataclass(frozen=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResult:
    error: ErrorInfo
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupResult:
    error: ErrorInfo
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class MemberIdentity:
    """A member named in a batched LeaveGroup: by member id, or by instance id when static."""

    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorInfo


@dataclass(frozen=True)
class LeaveGroupResult:
    error: ErrorInfo
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True)
class OffsetCommitEntry:
    """One partition's offset to commit."""

    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = None


@dataclass(frozen=True)
class PartitionResult:
    topic: str
    partition: int
    error: ErrorInfo


@dataclass(frozen=True)
class OffsetFetchPartition:
    topic: str
    partition: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error: ErrorInfo = NO_ERROR


@dataclass(frozen=True)
class OffsetFetchGroupResult:
    group_id: str
    error: ErrorInfo
    partitions: tuple[OffsetFetchPartition, ...] = ()


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    group_state: str


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    group_id: str
    error: ErrorInfo
    group_state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class GroupDeletionResult:
    group_id: str
    error: ErrorInfo
