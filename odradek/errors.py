"""Kafka's errors as exceptions, and the one table that maps them to wire error codes.

Every layer raises these (storage, cleaner, server, client); the protocol layer turns them into
``(error_code, message)`` pairs with :func:`error_code_for` and back with :func:`error_for_code`.
Names and codes are Kafka's (``org.apache.kafka.common.protocol.Errors``) so tools and people
recognise them.
"""

from __future__ import annotations

import errno
from typing import ClassVar, NamedTuple


class KafkaError(Exception):
    """Base of every error that has a Kafka error code."""

    code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.error_name)
        self.message = message or self.error_name

    def __str__(self) -> str:
        return f"{self.error_name}: {self.message}"


class RecordError(NamedTuple):
    """A record a produce was refused for (Kafka's ProduceResponse.RecordError, KIP-467): its
    index in its batch and why."""

    batch_index: int
    message: str | None

    def __str__(self) -> str:
        """As Kafka's RecordError prints, inside the errors' message."""
        shown = "null" if self.message is None else f"'{self.message}'"
        return f"RecordError(batchIndex={self.batch_index}, message={shown})"


class RecordValidationError(KafkaError):
    """A refusal that names the records at fault (Kafka's RecordValidationException): the
    Kafka protocol answers them in the Produce response's record_errors (v8+)."""

    def __init__(self, message: str = "", record_errors: tuple[RecordError, ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class UnknownServerError(KafkaError):
    code, error_name = -1, "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(KafkaError):
    code, error_name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(KafkaError):
    """A batch or record failed a CRC, length or framing check (CORRUPT_MESSAGE)."""

    code, error_name, retriable = 2, "CORRUPT_MESSAGE", True


class UnknownTopicOrPartitionError(KafkaError):
    code, error_name, retriable = 3, "UNKNOWN_TOPIC_OR_PARTITION", True


class UnknownTopicIdError(KafkaError):
    code, error_name, retriable = 100, "UNKNOWN_TOPIC_ID", True


class InvalidFetchSizeError(KafkaError):
    code, error_name = 4, "INVALID_FETCH_SIZE"


class RequestTimedOutError(KafkaError):
    code, error_name, retriable = 7, "REQUEST_TIMED_OUT", True


class MessageTooLargeError(KafkaError):
    code, error_name = 10, "MESSAGE_TOO_LARGE"


class NetworkError(KafkaError):
    code, error_name, retriable = 13, "NETWORK_EXCEPTION", True


class InvalidTopicError(KafkaError):
    code, error_name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(KafkaError):
    code, error_name = 18, "RECORD_LIST_TOO_LARGE"


class InvalidRequiredAcksError(KafkaError):
    code, error_name = 21, "INVALID_REQUIRED_ACKS"


class InvalidTimestampError(RecordValidationError):
    code, error_name = 32, "INVALID_TIMESTAMP"


class UnsupportedVersionError(KafkaError):
    code, error_name = 35, "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(KafkaError):
    code, error_name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(KafkaError):
    code, error_name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(KafkaError):
    """A replication factor a single broker cannot hold (anything but -1 or 1)."""

    code, error_name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidConfigError(KafkaError):
    """A config key is unknown or its value is out of range (INVALID_CONFIG)."""

    code, error_name = 40, "INVALID_CONFIG"


class InvalidRequestError(KafkaError):
    code, error_name = 42, "INVALID_REQUEST"


class PolicyViolationError(KafkaError):
    code, error_name = 44, "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(KafkaError):
    """An idempotent producer's batch does not follow its last sequence (a gap, or a new
    epoch not starting at 0)."""

    code, error_name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(KafkaError):
    """A batch from an epoch older than the producer's current one (a fenced producer)."""

    code, error_name = 47, "INVALID_PRODUCER_EPOCH"


class UnknownProducerIdError(KafkaError):
    code, error_name = 59, "UNKNOWN_PRODUCER_ID"


class KafkaStorageError(KafkaError):
    """A log directory failed (I/O error, full disk); its partitions are offline."""

    code, error_name, retriable = 56, "KAFKA_STORAGE_ERROR", True


class FetchSessionIdNotFoundError(KafkaError):
    """An incremental fetch names a session the broker does not hold (it holds none)."""

    code, error_name, retriable = 70, "FETCH_SESSION_ID_NOT_FOUND", True


class FencedLeaderEpochError(KafkaError):
    """A request's ``current_leader_epoch`` is older than the partition's leader epoch."""

    code, error_name, retriable = 74, "FENCED_LEADER_EPOCH", True


class UnknownLeaderEpochError(KafkaError):
    """A request's ``current_leader_epoch`` is newer than the partition's leader epoch."""

    code, error_name, retriable = 75, "UNKNOWN_LEADER_EPOCH", True


class UnsupportedCompressionTypeError(KafkaError):
    code, error_name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(RecordValidationError):
    """A record breaks a rule of its topic, e.g. no key on a compacted topic (INVALID_RECORD)."""

    code, error_name = 87, "INVALID_RECORD"


class ProducerFencedError(KafkaError):
    code, error_name = 90, "PRODUCER_FENCED"


class UnstableOffsetCommitError(KafkaError):
    """OffsetFetch with require_stable: a transaction holds an offset of the partition that is
    neither committed nor aborted yet (KIP-447); the consumer retries."""

    code, error_name, retriable = 88, "UNSTABLE_OFFSET_COMMIT", True


class InvalidTxnStateError(KafkaError):
    """A producer wrote outside its transaction's rules, e.g. a non-transactional batch while
    its transaction is open in the partition."""

    code, error_name = 48, "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(KafkaError):
    """A transaction marker from a coordinator epoch older than one the partition saw."""

    code, error_name = 52, "TRANSACTION_COORDINATOR_FENCED"


class ThrottlingQuotaExceededError(KafkaError):
    """More topic creations than a limit allows now (Kafka's controller mutation quota)."""

    code, error_name, retriable = 89, "THROTTLING_QUOTA_EXCEEDED", True


class OffsetMetadataTooLargeError(KafkaError):
    code, error_name = 12, "OFFSET_METADATA_TOO_LARGE"


class CoordinatorLoadInProgressError(KafkaError):
    code, error_name, retriable = 14, "COORDINATOR_LOAD_IN_PROGRESS", True


class CoordinatorNotAvailableError(KafkaError):
    code, error_name, retriable = 15, "COORDINATOR_NOT_AVAILABLE", True


class NotCoordinatorError(KafkaError):
    code, error_name, retriable = 16, "NOT_COORDINATOR", True


class IllegalGenerationError(KafkaError):
    code, error_name = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(KafkaError):
    code, error_name = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(KafkaError):
    code, error_name = 24, "INVALID_GROUP_ID"


class UnknownMemberIdError(KafkaError):
    code, error_name = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(KafkaError):
    code, error_name = 26, "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(KafkaError):
    code, error_name = 27, "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(KafkaError):
    code, error_name = 28, "INVALID_COMMIT_OFFSET_SIZE"


class CommitFailedError(IllegalGenerationError):
    """A consumer's commit refused because its group rebalanced meanwhile: the partitions may
    be another member's now (Kafka's ``CommitFailedException``)."""


class NonEmptyGroupError(KafkaError):
    code, error_name = 68, "NON_EMPTY_GROUP"


class GroupIdNotFoundError(KafkaError):
    code, error_name = 69, "GROUP_ID_NOT_FOUND"


class MemberIdRequiredError(KafkaError):
    """JoinGroup v4+: the member must rejoin with the member id this response gives it."""

    code, error_name = 79, "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(KafkaError):
    """A preferred leader election for a partition whose (only) replica is offline."""

    code, error_name, retriable = 80, "PREFERRED_LEADER_NOT_AVAILABLE", True


class EligibleLeadersNotAvailableError(KafkaError):
    """An unclean leader election for a partition with no live replica."""

    code, error_name, retriable = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True


class ElectionNotNeededError(KafkaError):
    """A leader election for a partition already led by its preferred (here: only) replica."""

    code, error_name = 84, "ELECTION_NOT_NEEDED"


class GroupMaxSizeReachedError(KafkaError):
    code, error_name = 81, "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(KafkaError):
    """Another member now holds this ``group.instance.id``: this one is a zombie."""

    code, error_name = 82, "FENCED_INSTANCE_ID"


class GroupSubscribedToTopicError(KafkaError):
    code, error_name = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


class TopicAuthorizationFailedError(KafkaError):
    code, error_name = 29, "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(KafkaError):
    code, error_name = 30, "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(KafkaError):
    code, error_name = 31, "CLUSTER_AUTHORIZATION_FAILED"


class UnsupportedSaslMechanismError(KafkaError):
    code, error_name = 33, "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(KafkaError):
    code, error_name = 34, "ILLEGAL_SASL_STATE"


class SecurityDisabledError(KafkaError):
    code, error_name = 54, "SECURITY_DISABLED"


class SaslAuthenticationFailedError(KafkaError):
    code, error_name = 58, "SASL_AUTHENTICATION_FAILED"


class ResourceNotFoundError(KafkaError):
    code, error_name = 91, "RESOURCE_NOT_FOUND"


class UnacceptableCredentialError(KafkaError):
    code, error_name = 93, "UNACCEPTABLE_CREDENTIAL"


class DuplicateResourceError(KafkaError):
    code, error_name = 92, "DUPLICATE_RESOURCE"


class RebootstrapRequiredError(KafkaError):
    """ApiVersions v5 named another cluster or node than this broker: the client's metadata
    is stale and it must bootstrap again (KIP-1242)."""

    code, error_name = 129, "REBOOTSTRAP_REQUIRED"


# Transactions (Kafka's transaction coordinator and the produce path that checks against it).


class NotEnoughReplicasError(KafkaError):
    """Retriable: Kafka also answers it to a transactional produce whose partition could not
    be checked against its transaction yet (the coordinator was busy), so the client retries."""

    code, error_name, retriable = 19, "NOT_ENOUGH_REPLICAS", True


class InvalidProducerIdMappingError(KafkaError):
    code, error_name = 49, "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(KafkaError):
    code, error_name = 50, "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(KafkaError):
    code, error_name, retriable = 51, "CONCURRENT_TRANSACTIONS", True


class TransactionalIdAuthorizationFailedError(KafkaError):
    code, error_name = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class OperationNotAttemptedError(KafkaError):
    code, error_name = 55, "OPERATION_NOT_ATTEMPTED"


class TransactionalIdNotFoundError(KafkaError):
    code, error_name = 105, "TRANSACTIONAL_ID_NOT_FOUND"


class TransactionAbortableError(KafkaError):
    code, error_name = 120, "TRANSACTION_ABORTABLE"


_BY_CODE: dict[int, type[KafkaError]] = {
    cls.code: cls
    for cls in (
        UnknownServerError,
        OffsetOutOfRangeError,
        CorruptRecordError,
        UnknownTopicOrPartitionError,
        UnknownTopicIdError,
        InvalidFetchSizeError,
        RequestTimedOutError,
        MessageTooLargeError,
        NetworkError,
        InvalidTopicError,
        RecordListTooLargeError,
        InvalidRequiredAcksError,
        InvalidTimestampError,
        UnsupportedVersionError,
        TopicAlreadyExistsError,
        InvalidPartitionsError,
        InvalidReplicationFactorError,
        InvalidConfigError,
        InvalidRequestError,
        PolicyViolationError,
        OutOfOrderSequenceNumberError,
        InvalidProducerEpochError,
        UnknownProducerIdError,
        KafkaStorageError,
        FetchSessionIdNotFoundError,
        FencedLeaderEpochError,
        UnknownLeaderEpochError,
        UnsupportedCompressionTypeError,
        InvalidRecordError,
        ProducerFencedError,
        UnstableOffsetCommitError,
        InvalidTxnStateError,
        TransactionCoordinatorFencedError,
        ThrottlingQuotaExceededError,
        OffsetMetadataTooLargeError,
        CoordinatorLoadInProgressError,
        CoordinatorNotAvailableError,
        NotCoordinatorError,
        IllegalGenerationError,
        InconsistentGroupProtocolError,
        InvalidGroupIdError,
        UnknownMemberIdError,
        InvalidSessionTimeoutError,
        RebalanceInProgressError,
        InvalidCommitOffsetSizeError,
        NonEmptyGroupError,
        GroupIdNotFoundError,
        MemberIdRequiredError,
        PreferredLeaderNotAvailableError,
        EligibleLeadersNotAvailableError,
        ElectionNotNeededError,
        GroupMaxSizeReachedError,
        FencedInstanceIdError,
        GroupSubscribedToTopicError,
        TopicAuthorizationFailedError,
        GroupAuthorizationFailedError,
        ClusterAuthorizationFailedError,
        UnsupportedSaslMechanismError,
        IllegalSaslStateError,
        SecurityDisabledError,
        SaslAuthenticationFailedError,
        ResourceNotFoundError,
        UnacceptableCredentialError,
        DuplicateResourceError,
        RebootstrapRequiredError,
        NotEnoughReplicasError,
        InvalidProducerIdMappingError,
        InvalidTransactionTimeoutError,
        ConcurrentTransactionsError,
        TransactionalIdAuthorizationFailedError,
        OperationNotAttemptedError,
        TransactionalIdNotFoundError,
        TransactionAbortableError,
    )
}

NONE = 0


def error_code_for(error: BaseException) -> int:
    """The wire code of ``error``; anything that is not a KafkaError is UNKNOWN_SERVER_ERROR."""
    return error.code if isinstance(error, KafkaError) else UnknownServerError.code


def error_name_for(code: int) -> str:
    """Kafka's name of a wire code (``NONE`` for 0)."""
    if code == NONE:
        return "NONE"
    cls = _BY_CODE.get(code)
    return cls.error_name if cls else f"UNKNOWN_ERROR_CODE_{code}"


def error_for_code(code: int, message: str = "") -> KafkaError:
    """An exception instance for a non-zero wire code (unknown codes keep their number)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        error = UnknownServerError(message or f"error code {code}")
        return error
    return cls(message)


# Errors that are not on the wire: they stop a broker from starting or a tool from running.


class LogDirLockedError(Exception):
    """Another process holds the ``.lock`` of a log directory."""


class InconsistentClusterIdError(Exception):
    """A log directory's ``meta.properties`` names another cluster or broker."""


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


class InvalidOffsetError(Exception):
    """An index append broke the order of its offsets (Kafka's ``InvalidOffsetException``)."""


class IndexOffsetOverflowError(Exception):
    """An offset is not within int32 above an index's base (``IndexOffsetOverflowException``).

    The owner rolls a new segment, based at that offset, before indexing it.
    """


class LogSegmentOffsetOverflowError(Exception):
    """An offset does not fit a segment's int32 relative offsets; the log must roll first."""


DESCRIPTOR_EXHAUSTION_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
"""Errors saying the process or system is out of file descriptors, not that a disk failed."""


def is_descriptor_exhaustion(error: BaseException | None) -> bool:
    """Whether ``error`` says the process (EMFILE) or the system (ENFILE) is out of file
    descriptors: a passing shortage, never a reason to take a log directory offline (storage)
    nor to fail a fetch that can be copied instead of sent with sendfile (network)."""
    return isinstance(error, OSError) and error.errno in DESCRIPTOR_EXHAUSTION_ERRNOS
