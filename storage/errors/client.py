"""Errors of the request itself: it is wrong (``INVALID``), or names what does not exist (``NOT_FOUND``)."""

from __future__ import annotations

from storage.errors.base import ErrorKind, StrataError

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
    """The principal may not do this cluster-wide (Kafka CLUSTER_AUTHORIZATION_FAILED): describe the
    cluster, manage ACLs or SCRAM credentials, or get an idempotent producer id without write on a topic."""

    code = 40303


class TransactionalIdForbidden(Forbidden):
    """The principal may not use this transactional id (Kafka TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""

    code = 40304


class UnacceptableCredential(StrataError):
    """A SCRAM credential Kafka would refuse: an empty user name, too few or too many iterations, an empty
    salt or salted password (Kafka's UNACCEPTABLE_CREDENTIAL)."""

    kind = ErrorKind.INVALID
    code = 40008


class DuplicateResource(StrataError):
    """One request names the same user (and mechanism) twice (Kafka's DUPLICATE_RESOURCE)."""

    kind = ErrorKind.INVALID
    code = 40009


class NotAcceptable(StrataError):
    """The stored bytes cannot be rendered in the requested encoding (e.g. not UTF-8)."""

    kind = ErrorKind.INVALID
    code = 40601


class RequestTimeout(StrataError):
    """The client did not send its request body in time (``--http-body-timeout-ms``); HTTP 408."""

    kind = ErrorKind.INVALID
    code = 40801


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


class SchemaValidationFailed(StrataError):
    """A record produced over HTTP to a topic that validates schemas (``confluent.{key,value}.schema.
    validation``) does not carry a schema registered under the strategy's subject, or, at ``payload``
    level, does not decode with it. ``record_index`` is the record's index in the request. The Kafka door
    answers the same refusal with INVALID_RECORD."""

    kind = ErrorKind.INVALID
    code = 42220

    def __init__(self, message: str, record_index: int | None = None) -> None:
        super().__init__(message)
        self.record_index = record_index


class TypedValueInvalid(StrataError):
    """A typed key or value of an HTTP produce request (one given as JSON with a schema id or subject, in
    the style of Confluent's REST Proxy) that its schema does not accept, so it cannot be encoded.
    ``record_index`` is the record's index in the request."""

    kind = ErrorKind.INVALID
    code = 42221

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


class LakeDisabled(StrataError):
    """A lake action (commit now) on a topic that is not kept as an Iceberg table: its
    ``strata.iceberg.mode`` is ``disabled``. 422: the request is well formed, and cannot apply to this
    topic until its lake is enabled."""

    kind = ErrorKind.INVALID
    code = 42230


# --- not found -------------------------------------------------------------------------------------------


class UnknownTopic(StrataError):
    kind = ErrorKind.NOT_FOUND
    code = 40401


class UnknownPartition(StrataError):
    kind = ErrorKind.NOT_FOUND
    code = 40402


class UnknownScramCredential(StrataError):
    """The user has no stored SCRAM credential (for this mechanism); Kafka's RESOURCE_NOT_FOUND."""

    kind = ErrorKind.NOT_FOUND
    code = 40406


class UnknownSchema(StrataError):
    """A typed HTTP produce request names a schema id, or a subject and version, that the schema registry
    does not hold (the registry's own API answers 40401, 40402 and 40403 for these)."""

    kind = ErrorKind.NOT_FOUND
    code = 40408


class UnknownJob(StrataError):
    """No compaction job has this id (jobs are never deleted: a caller bug or a wrong database)."""

    kind = ErrorKind.NOT_FOUND
    code = 40403
