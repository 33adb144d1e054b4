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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar


class ErrorKind(Enum):
    INVALID = "invalid"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    CORRUPT = "corrupt"
    INTERNAL = "internal"


class StrataError(Exception):
    """Base of every error Strata raises on purpose; raised itself only for internal errors (bugs)."""

    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL
    code: ClassVar[int] = 50001
    retriable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- invalid: the request is wrong; retrying it unchanged fails again ----------------------------------


class BadRequest(StrataError):
    """The body is not valid JSON, or a query parameter is malformed."""

    kind = ErrorKind.INVALID
    code = 40001


class InvalidTopicName(StrataError):
    kind = ErrorKind.INVALID
    code = 40003


class Unauthorized(StrataError):
    """No credentials, or credentials that match no principal (HTTP 401)."""

    kind = ErrorKind.INVALID
    code = 40101


class SaslAuthenticationFailed(Unauthorized):
    """Kafka only: SASL authentication failed (SASL_AUTHENTICATION_FAILED); the connection is closed."""

    code = 40102


class UnsupportedSaslMechanism(StrataError):
    """Kafka only: the client asked for a SASL mechanism this listener does not offer."""

    kind = ErrorKind.INVALID
    code = 40006


class IllegalSaslState(StrataError):
    """Kafka only: a SASL request out of order (SaslAuthenticate before SaslHandshake, a second handshake)."""

    kind = ErrorKind.INVALID
    code = 40007


class Forbidden(StrataError):
    """The principal may not do this to this topic (HTTP 403, Kafka TOPIC_AUTHORIZATION_FAILED)."""

    kind = ErrorKind.INVALID
    code = 40301


class GroupForbidden(Forbidden):
    """The principal may not do this to this consumer group (Kafka GROUP_AUTHORIZATION_FAILED)."""

    code = 40302


class ClusterForbidden(Forbidden):
    """The principal may not do this cluster-wide (Kafka CLUSTER_AUTHORIZATION_FAILED): an idempotent
    producer id for a principal that may write no topic."""

    code = 40303


class NotAcceptable(StrataError):
    """The stored bytes cannot be rendered in the requested encoding (e.g. not UTF-8)."""

    kind = ErrorKind.INVALID
    code = 40601


class RecordTooLarge(StrataError):
    """A record, or the whole request, exceeds the configured size or count."""

    kind = ErrorKind.INVALID
    code = 41301


class OffsetOutOfRange(StrataError):
    kind = ErrorKind.INVALID
    code = 41601


class InvalidPayload(StrataError):
    """The JSON parses but its content is wrong: types, base64, a missing key on a compacted topic."""

    kind = ErrorKind.INVALID
    code = 42206


class InvalidRecord(StrataError):
    """A producer's record batch holds a record that breaks Kafka's record rules (it does not parse, its
    offset delta is out of order, it has no key on a compacted topic, the batch's header disagrees with
    its records); Kafka's INVALID_RECORD. ``record_index`` is the record's index within its batch, where
    one record is at fault (Produce v8's ``record_errors``)."""

    kind = ErrorKind.INVALID
    code = 42216

    def __init__(self, message: str, record_index: int | None = None) -> None:
        super().__init__(message)
        self.record_index = record_index


class InvalidTimestamp(StrataError):
    """A record timestamp that consumers cannot represent, or outside the topic's window
    (``message.timestamp.before.max.ms`` / ``.after.max.ms``); Kafka's INVALID_TIMESTAMP."""

    kind = ErrorKind.INVALID
    code = 42208


class InvalidPartitionCount(StrataError):
    """A partition count that is not an increase, or past the limit; Kafka's INVALID_PARTITIONS."""

    kind = ErrorKind.INVALID
    code = 42209


class InvalidConfig(StrataError):
    """An unknown topic config, or a bad value for a known one."""

    kind = ErrorKind.INVALID
    code = 42207


class InvalidReadOption(StrataError):
    """A Spark reader option is missing, unknown or malformed."""

    kind = ErrorKind.INVALID
    code = 40004


# --- not found -------------------------------------------------------------------------------------------


class UnknownTopic(StrataError):
    kind = ErrorKind.NOT_FOUND
    code = 40401


class UnknownPartition(StrataError):
    kind = ErrorKind.NOT_FOUND
    code = 40402


class UnknownJob(StrataError):
    """No compaction job has this id (jobs are never deleted: a caller bug or a wrong database)."""

    kind = ErrorKind.NOT_FOUND
    code = 40403


# --- conflict: lost a race; nothing was written ---------------------------------------------------------


class Conflict(StrataError):
    """Base of the "lost a race" errors: the state changed underneath, and the operation wrote nothing.

    Raised as one of its subclasses; catch it to handle every lost race alike. By default a conflict is
    retriable: after re-reading the state, the same request may succeed.
    """

    kind = ErrorKind.CONFLICT
    code = 40901
    retriable = True


class CommitConflict(Conflict):
    """An optimistic metadata commit lost a race (inputs changed underneath it).

    Repeating the request may succeed (``commit_flush`` raises it when an idempotency key expired
    mid-commit); a compaction job that gets it is abandoned and planned again instead.
    """


class TopicExists(Conflict):
    code = 40002
    retriable = False


class LeaseLost(Conflict):
    """Another worker took the job over (our lease expired); this attempt must not commit."""

    code = 40902
    retriable = False


class IdempotencyConflict(Conflict):
    """Raised by ``commit_flush`` when some idempotency keys were committed by someone else first.

    Nothing was written. ``existing`` maps each such key to the offsets it already has; the caller
    answers those requests with them and commits the rest without their records.
    """

    code = 40903
    retriable = False  # the conflict is the answer: the request was committed already

    def __init__(self, existing: dict[str, list[tuple[int, int]]]) -> None:
        super().__init__(f"{len(existing)} idempotency key(s) already committed")
        self.existing = existing


class ProducerConflict(Conflict):
    """Raised by ``commit_flush`` when some idempotent producer batches are not new, in-sequence appends.

    Nothing was written. ``duplicates`` maps the index of an append (``ProducerBatch.append``) that
    repeats one of the producer's last 5 committed batches to that batch's original base offset;
    ``rejected`` maps an append that must not be written to its error (``OutOfOrderSequence``,
    ``InvalidProducerEpoch`` or a retriable ``Unavailable``). The caller answers those appends and commits
    the rest without them: the rest were checked as if those appends were absent.
    """

    code = 40905
    retriable = False  # the conflict is the answer

    def __init__(self, duplicates: dict[int, int], rejected: dict[int, StrataError]) -> None:
        super().__init__(f"{len(duplicates)} duplicate and {len(rejected)} rejected producer append(s)")
        self.duplicates = duplicates
        self.rejected = rejected


class OutOfOrderSequence(StrataError):
    """An idempotent producer's batch does not continue its sequence (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER).

    Not retriable as sent: the producer must resend its earlier batches first (Kafka clients do).
    """

    kind = ErrorKind.INVALID
    code = 42210


class InvalidProducerEpoch(StrataError):
    """A batch's producer epoch is older than the one the partition has seen (INVALID_PRODUCER_EPOCH)."""

    kind = ErrorKind.INVALID
    code = 42211


class ProducerFenced(StrataError):
    """InitProducerId with an epoch that a newer InitProducerId replaced (PRODUCER_FENCED)."""

    kind = ErrorKind.INVALID
    code = 42212


class ClaimRefused(Conflict):
    """Raised by ``create_job``: an input file is claimed by another active job, or is no longer live.

    Retriable: once the other job finished, a new plan may claim the files.
    """

    code = 40904


# --- consumer groups (agents/group_state.py): Kafka's group protocol errors ------------------------------


class InvalidGroupId(StrataError):
    """An empty or malformed group id (INVALID_GROUP_ID)."""

    kind = ErrorKind.INVALID
    code = 40005


class UnknownMemberId(StrataError):
    """The member id is not (or no longer) in the group: it expired, left, or never joined
    (UNKNOWN_MEMBER_ID). The client rejoins without an id."""

    kind = ErrorKind.NOT_FOUND
    code = 40404


class GroupIdNotFound(StrataError):
    """No group has this id (GROUP_ID_NOT_FOUND)."""

    kind = ErrorKind.NOT_FOUND
    code = 40405


class IllegalGeneration(Conflict):
    """The request names a generation the group has moved past (ILLEGAL_GENERATION): rejoin."""

    code = 40906


class RebalanceInProgress(Conflict):
    """The group is rebalancing (REBALANCE_IN_PROGRESS): rejoin, then retry."""

    code = 40907


class FencedInstanceId(Conflict):
    """A newer member with the same group.instance.id replaced this one (FENCED_INSTANCE_ID)."""

    code = 40908
    retriable = False


class PolicyViolation(Conflict):
    """The topic's configuration forbids the operation: deleting records of a topic whose cleanup.policy
    is compact only (Kafka's POLICY_VIOLATION). Not retriable until the configuration changes."""

    code = 40910
    retriable = False


class NonEmptyGroup(Conflict):
    """The group has active members, so it cannot be deleted (NON_EMPTY_GROUP), nor its offsets set over
    HTTP."""

    code = 40909
    retriable = False


class MemberIdRequired(StrataError):
    """A first JoinGroup (v4+, KIP-394): the answer carries the new member id, to join again with."""

    kind = ErrorKind.INVALID
    code = 42213
    retriable = True

    def __init__(self, member_id: str) -> None:
        super().__init__(f"rejoin with the member id {member_id!r}")
        self.member_id = member_id


class InconsistentGroupProtocol(StrataError):
    """The member's protocol type or protocols do not match the group's (INCONSISTENT_GROUP_PROTOCOL)."""

    kind = ErrorKind.INVALID
    code = 42214


class InvalidSessionTimeout(StrataError):
    """The session timeout is outside the broker's bounds (INVALID_SESSION_TIMEOUT)."""

    kind = ErrorKind.INVALID
    code = 42215


# --- unavailable: try again later --------------------------------------------------------------------------


class Unavailable(StrataError):
    """A transient failure (object store or metadata); the request was not acknowledged."""

    kind = ErrorKind.UNAVAILABLE
    code = 50003
    retriable = True


class TransientStoreError(Unavailable):
    """An object-store request failed in a way that may succeed if repeated (5xx, throttling, reset)."""


class BufferFull(StrataError):
    """The produce buffer is at its memory bound; the client should back off and retry."""

    kind = ErrorKind.UNAVAILABLE
    code = 42901
    retriable = True


# --- corrupt: stored data is damaged or missing; retrying does not fix it ----------------------------------


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """Offsets ``first_offset..last_offset`` of a partition whose stored bytes (in ``object_key``) fail their
    checks: what a reader reports, and what an operator may quarantine (``strata quarantine``)."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    object_key: str


class CorruptObject(StrataError):
    """Stored bytes failed a checksum or structural check. Never served as records. ``damaged``: the
    offsets it holds, where one chunk is at fault."""

    kind = ErrorKind.CORRUPT
    code = 50002

    def __init__(
        self, message: str, *, object_key: str | None = None, damaged: DamagedRange | None = None
    ) -> None:
        super().__init__(message)
        self.object_key = object_key
        self.damaged = damaged


class CodecError(CorruptObject):
    """Bytes do not decode as the format they claim to be (truncated, bad magic, bad CRC)."""


class ObjectNotFound(StrataError):
    """An object the metadata references is missing from the store."""

    kind = ErrorKind.CORRUPT
    code = 50004


# --- internal: the server's bug or misconfiguration ------------------------------------------------------


class ObjectStoreError(StrataError):
    """The object store refused a request for a reason retrying does not fix (permissions, no bucket)."""

    code = 50005


class SettingsError(StrataError):
    """The server's own configuration is wrong (bad URL, unknown scheme); raised at start-up."""

    code = 50006


class SparkSetupError(StrataError):
    """Spark cannot run here: no Java, or no hadoop-aws jars. The message says how to fix it."""

    code = 50007


class JobGivenUp(StrataError):
    """A compaction job was attempted more often than the round allows (crashes, lost leases, retriable
    errors) and was marked failed, so its files can be planned again. Never raised: it is the error a
    given-up job's report carries (``planner/round.py``)."""

    code = 50009


class OffsetMapFull(StrataError):
    """A put of a new key hash found the map at capacity. The map is unchanged.

    This is flow control for the compaction worker, which ends pass 1 at the last offset that fit and cleans
    that far (Kafka's partial cleaning); it should never reach a client.
    """

    code = 50008

    def __init__(self, size: int, capacity: int) -> None:
        super().__init__(f"offset map is full: {size} entries, capacity {capacity}")
        self.size = size
        self.capacity = capacity
