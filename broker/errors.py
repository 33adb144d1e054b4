"""The one place where Strata's errors become Kafka error codes (as api/errors.py is for HTTP).

Codes are Kafka's (``org.apache.kafka.common.protocol.Errors``). Clients retry the retriable ones, so a
transient Strata failure must map to a code Kafka clients treat as retriable, and a bad request to one they
do not retry.
"""

from __future__ import annotations

from storage.errors import (
    BadRequest,
    BufferFull,
    ClusterForbidden,
    ConcurrentTransactions,
    CorruptObject,
    DuplicateResource,
    FencedInstanceId,
    Forbidden,
    GroupForbidden,
    GroupIdNotFound,
    IllegalGeneration,
    IllegalSaslState,
    InconsistentGroupProtocol,
    InvalidConfig,
    InvalidGroupId,
    InvalidPartitionCount,
    InvalidPayload,
    InvalidProducerEpoch,
    InvalidProducerIdMapping,
    InvalidRecord,
    InvalidSessionTimeout,
    InvalidTimestamp,
    InvalidTopicName,
    InvalidTransactionTimeout,
    InvalidTxnState,
    MemberIdRequired,
    NonEmptyGroup,
    OffsetOutOfRange,
    OutOfOrderSequence,
    PolicyViolation,
    ProducerFenced,
    RebalanceInProgress,
    RecordTooLarge,
    SaslAuthenticationFailed,
    SchemaValidationFailed,
    StrataError,
    TopicExists,
    TransactionalIdForbidden,
    TransactionalIdNotFound,
    UnacceptableCredential,
    Unavailable,
    UnknownMemberId,
    UnknownPartition,
    UnknownScramCredential,
    UnknownTopic,
    UnsupportedSaslMechanism,
)

NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
INVALID_TIMESTAMP = 32
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
POLICY_VIOLATION = 44
INVALID_REPLICA_ASSIGNMENT = 39
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
UNSTABLE_OFFSET_COMMIT = 88
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
KAFKA_STORAGE_ERROR = 56
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
PRODUCER_FENCED = 90
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
SECURITY_DISABLED = 54

# Most specific class first; the first match by isinstance wins.
_BY_TYPE: tuple[tuple[type[StrataError], int], ...] = (
    (GroupForbidden, GROUP_AUTHORIZATION_FAILED),
    (ClusterForbidden, CLUSTER_AUTHORIZATION_FAILED),
    (TransactionalIdForbidden, TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    (Forbidden, TOPIC_AUTHORIZATION_FAILED),
    (SaslAuthenticationFailed, SASL_AUTHENTICATION_FAILED),
    (UnsupportedSaslMechanism, UNSUPPORTED_SASL_MECHANISM),
    (IllegalSaslState, ILLEGAL_SASL_STATE),
    (UnknownScramCredential, RESOURCE_NOT_FOUND),
    (DuplicateResource, DUPLICATE_RESOURCE),
    (UnacceptableCredential, UNACCEPTABLE_CREDENTIAL),
    (UnknownTopic, UNKNOWN_TOPIC_OR_PARTITION),
    (UnknownPartition, UNKNOWN_TOPIC_OR_PARTITION),
    (InvalidTopicName, INVALID_TOPIC_EXCEPTION),
    (TopicExists, TOPIC_ALREADY_EXISTS),
    (InvalidConfig, INVALID_CONFIG),
    (InvalidPartitionCount, INVALID_PARTITIONS),
    (InvalidTimestamp, INVALID_TIMESTAMP),
    (InvalidPayload, INVALID_RECORD),
    (InvalidRecord, INVALID_RECORD),
    (SchemaValidationFailed, INVALID_RECORD),
    (RecordTooLarge, MESSAGE_TOO_LARGE),
    (OffsetOutOfRange, OFFSET_OUT_OF_RANGE),
    (PolicyViolation, POLICY_VIOLATION),
    (BufferFull, REQUEST_TIMED_OUT),
    (BadRequest, INVALID_REQUEST),
    (OutOfOrderSequence, OUT_OF_ORDER_SEQUENCE_NUMBER),
    # Produce answers a stale epoch with INVALID_PRODUCER_EPOCH (Kafka >= 2.7, KIP-588: retriable by
    # aborting, where PRODUCER_FENCED is fatal); InitProducerId v4 answers PRODUCER_FENCED.
    (InvalidProducerEpoch, INVALID_PRODUCER_EPOCH),
    (ProducerFenced, PRODUCER_FENCED),
    (InvalidTxnState, INVALID_TXN_STATE),
    (InvalidProducerIdMapping, INVALID_PRODUCER_ID_MAPPING),
    (InvalidTransactionTimeout, INVALID_TRANSACTION_TIMEOUT),
    (ConcurrentTransactions, CONCURRENT_TRANSACTIONS),
    (TransactionalIdNotFound, TRANSACTIONAL_ID_NOT_FOUND),
    (InvalidGroupId, INVALID_GROUP_ID),
    (UnknownMemberId, UNKNOWN_MEMBER_ID),
    (GroupIdNotFound, GROUP_ID_NOT_FOUND),
    (IllegalGeneration, ILLEGAL_GENERATION),
    (RebalanceInProgress, REBALANCE_IN_PROGRESS),
    (FencedInstanceId, FENCED_INSTANCE_ID),
    (NonEmptyGroup, NON_EMPTY_GROUP),
    (MemberIdRequired, MEMBER_ID_REQUIRED),
    (InconsistentGroupProtocol, INCONSISTENT_GROUP_PROTOCOL),
    (InvalidSessionTimeout, INVALID_SESSION_TIMEOUT),
    # KAFKA_STORAGE_ERROR is retriable in every client: "the store is down, nothing was acknowledged".
    (Unavailable, KAFKA_STORAGE_ERROR),
    # Corrupt stored data is not the client's fault and retrying does not fix it.
    (CorruptObject, UNKNOWN_SERVER_ERROR),
)


def kafka_error(exc: StrataError) -> int:
    for cls, code in _BY_TYPE:
        if isinstance(exc, cls):
            return code
    return KAFKA_STORAGE_ERROR if exc.retriable else UNKNOWN_SERVER_ERROR


def kafka_fetch_error(exc: StrataError) -> int:
    """``kafka_error`` for Fetch: stored data that fails its checks is CORRUPT_MESSAGE there, as Kafka's
    broker answers a read of a corrupt log (its CorruptRecordException), which consumers surface to the
    application instead of retrying in silence."""
    if isinstance(exc, CorruptObject):
        return CORRUPT_MESSAGE
    return kafka_error(exc)


def kafka_group_error(exc: StrataError) -> int:
    """``kafka_error`` for the group APIs: the metadata store unavailable is COORDINATOR_NOT_AVAILABLE
    there, which clients answer by finding the coordinator again and retrying (Kafka's own answer while
    its group coordinator cannot serve)."""
    if isinstance(exc, Unavailable):
        return COORDINATOR_NOT_AVAILABLE
    return kafka_error(exc)


def kafka_txn_error(exc: StrataError, version: int, fenced_from: int) -> int:
    """``kafka_error`` for the transaction coordinator's APIs: a fenced producer is PRODUCER_FENCED from
    the API's version ``fenced_from`` on (KIP-588) and INVALID_PRODUCER_EPOCH before, which older clients
    know (as Kafka's KafkaApis converts it); the metadata store unavailable is COORDINATOR_NOT_AVAILABLE,
    which clients answer by finding the coordinator again and retrying."""
    if isinstance(exc, ProducerFenced):
        return PRODUCER_FENCED if version >= fenced_from else INVALID_PRODUCER_EPOCH
    return kafka_group_error(exc)
