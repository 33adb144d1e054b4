"""Strata's error types: every one of them, one class per failure.

Every error carries three class attributes:
- ``kind``: what the caller should do, one of six (SlateDB's coarse kinds): fix the request (``INVALID``),
  it does not exist (``NOT_FOUND``), someone else changed the state first: re-read and decide again
  (``CONFLICT``), infrastructure is down: try again later (``UNAVAILABLE``), stored data is damaged
  (``CORRUPT``), or a bug or misconfiguration of the server (``INTERNAL``).
- ``code``: stable, HTTP status * 100 + n (Confluent REST Proxy numbering where one exists). A class that
  does not set its own code refines its parent (same kind, same code, e.g. ``CodecError``).
- ``retriable``: whether the same request may succeed if repeated later.

The HTTP mapping lives in exactly one place (``api/errors.py``) and reads only these attributes. ``except``
sites catch a specific type or a kind's base class (``Conflict``, ``Unavailable``); nothing in Strata
tells errors apart by their message text.

"Lost a race" is always a ``Conflict`` subclass raised by the store method that lost it, and nothing was
written: ``CommitConflict`` (a compare-and-set commit), ``LeaseLost`` (a job lease taken over),
``ClaimRefused`` (a job's input files are claimed or gone), ``IdempotencyConflict`` (a request key committed
first by another flush), ``ProducerConflict`` (producer batches that are duplicates or out of sequence)
and ``TopicExists``.

The classes live by kind in ``base``, ``client``, ``races``, ``groups``, ``transactions`` and ``server``;
import them from here.
"""

from __future__ import annotations

from storage.errors.base import ErrorKind, StrataError
from storage.errors.client import (
    BadRequest,
    ClusterForbidden,
    DuplicateResource,
    Forbidden,
    GroupForbidden,
    IllegalSaslState,
    InvalidConfig,
    InvalidPartitionCount,
    InvalidPayload,
    InvalidReadOption,
    InvalidRecord,
    InvalidTimestamp,
    InvalidTopicName,
    LakeDisabled,
    NotAcceptable,
    OffsetOutOfRange,
    RecordTooLarge,
    RequestTimeout,
    SaslAuthenticationFailed,
    SchemaValidationFailed,
    TransactionalIdForbidden,
    TypedValueInvalid,
    UnacceptableCredential,
    Unauthorized,
    UnknownJob,
    UnknownPartition,
    UnknownSchema,
    UnknownScramCredential,
    UnknownTopic,
    UnsupportedSaslMechanism,
)
from storage.errors.groups import (
    FencedInstanceId,
    GroupIdNotFound,
    IllegalGeneration,
    InconsistentGroupProtocol,
    InvalidGroupId,
    InvalidSessionTimeout,
    MemberIdRequired,
    NonEmptyGroup,
    PolicyViolation,
    RebalanceInProgress,
    UnknownMemberId,
)
from storage.errors.races import (
    ClaimRefused,
    CommitConflict,
    Conflict,
    IdempotencyConflict,
    InvalidProducerEpoch,
    LeaseLost,
    OutOfOrderSequence,
    ProducerConflict,
    ProducerFenced,
    TopicExists,
)
from storage.errors.server import (
    BufferFull,
    CodecError,
    CorruptObject,
    DamagedRange,
    JobGivenUp,
    ObjectNotFound,
    ObjectStoreError,
    OffsetMapFull,
    SettingsError,
    SparkSetupError,
    TransientStoreError,
    Unavailable,
)
from storage.errors.transactions import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    TransactionalIdNotFound,
)

__all__ = [
    "BadRequest",
    "BufferFull",
    "ClaimRefused",
    "ClusterForbidden",
    "CodecError",
    "CommitConflict",
    "ConcurrentTransactions",
    "Conflict",
    "CorruptObject",
    "DamagedRange",
    "DuplicateResource",
    "ErrorKind",
    "FencedInstanceId",
    "Forbidden",
    "GroupForbidden",
    "GroupIdNotFound",
    "IdempotencyConflict",
    "IllegalGeneration",
    "IllegalSaslState",
    "InconsistentGroupProtocol",
    "InvalidConfig",
    "InvalidGroupId",
    "InvalidPartitionCount",
    "InvalidPayload",
    "InvalidProducerEpoch",
    "InvalidProducerIdMapping",
    "InvalidReadOption",
    "InvalidRecord",
    "InvalidSessionTimeout",
    "InvalidTimestamp",
    "InvalidTopicName",
    "InvalidTransactionTimeout",
    "InvalidTxnState",
    "JobGivenUp",
    "LakeDisabled",
    "LeaseLost",
    "MemberIdRequired",
    "NonEmptyGroup",
    "NotAcceptable",
    "ObjectNotFound",
    "ObjectStoreError",
    "OffsetMapFull",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "PolicyViolation",
    "ProducerConflict",
    "ProducerFenced",
    "RebalanceInProgress",
    "RecordTooLarge",
    "RequestTimeout",
    "SaslAuthenticationFailed",
    "SchemaValidationFailed",
    "SettingsError",
    "SparkSetupError",
    "StrataError",
    "TopicExists",
    "TransactionalIdForbidden",
    "TransactionalIdNotFound",
    "TransientStoreError",
    "TypedValueInvalid",
    "UnacceptableCredential",
    "Unauthorized",
    "Unavailable",
    "UnknownJob",
    "UnknownMemberId",
    "UnknownPartition",
    "UnknownSchema",
    "UnknownScramCredential",
    "UnknownTopic",
    "UnsupportedSaslMechanism",
]
