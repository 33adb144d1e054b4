"""Strata's error types: one class per failure kind.

Every error carries a stable ``code`` (HTTP status * 100 + n, Confluent REST Proxy numbering where one
exists) and ``retriable``, which tells the caller whether the same request may succeed later. The HTTP
mapping lives in exactly one place (``api/errors.py``) and reads only these two attributes; nothing in
Strata tells errors apart by their message text.
"""

from __future__ import annotations

from typing import ClassVar


class StrataError(Exception):
    """Base of every error Strata raises on purpose."""

    code: ClassVar[int] = 50001
    retriable: ClassVar[bool] = False
    # The HTTP status is code // 100 unless a class pins it (50003 is served as 503, as Confluent's
    # REST Proxy and load balancers expect for "try again").
    status: ClassVar[int | None] = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def http_status(self) -> int:
        return self.status if self.status is not None else self.code // 100


# --- client errors (4xx): the request is wrong; retrying it unchanged fails again -----------------------


class BadRequest(StrataError):
    """The body is not valid JSON, or a query parameter is malformed."""

    code = 40001


class TopicExists(StrataError):
    code = 40002


class InvalidTopicName(StrataError):
    code = 40003


class Unauthorized(StrataError):
    code = 40101


class UnknownTopic(StrataError):
    code = 40401


class UnknownPartition(StrataError):
    code = 40402


class NotAcceptable(StrataError):
    """The stored bytes cannot be rendered in the requested encoding (e.g. not UTF-8)."""

    code = 40601


class UnknownJob(StrataError):
    """No compaction job has this id (jobs are never deleted: a caller bug or a wrong database)."""

    code = 40403


class RecordTooLarge(StrataError):
    """A record, or the whole request, exceeds the configured size or count."""

    code = 41301


class OffsetOutOfRange(StrataError):
    code = 41601


class InvalidPayload(StrataError):
    """The JSON parses but its content is wrong: types, base64, a missing key on a compacted topic."""

    code = 42206


class InvalidTimestamp(StrataError):
    """A record timestamp that consumers cannot represent, or outside the topic's window
    (``message.timestamp.before.max.ms`` / ``.after.max.ms``); Kafka's INVALID_TIMESTAMP."""

    code = 42208


class InvalidConfig(StrataError):
    """An unknown topic config, or a bad value for a known one."""

    code = 42207


# --- retriable conditions ------------------------------------------------------------------------------


class BufferFull(StrataError):
    """The produce buffer is at its memory bound; the client should back off and retry."""

    code = 42901
    retriable = True


class Unavailable(StrataError):
    """A transient failure (object store or metadata); the request was not acknowledged."""

    code = 50003
    retriable = True
    status = 503


class TransientStoreError(Unavailable):
    """An object-store request failed in a way that may succeed if repeated (5xx, throttling, reset)."""


class CommitConflict(Unavailable):
    """An optimistic metadata commit lost a race (inputs changed underneath it)."""

    code = 40901
    status = 409


# --- server-side faults that retrying does not fix ---------------------------------------------------------


class CorruptObject(StrataError):
    """Stored bytes failed a checksum or structural check. Never served as records."""

    code = 50002

    def __init__(self, message: str, *, object_key: str | None = None) -> None:
        super().__init__(message)
        self.object_key = object_key


class ObjectNotFound(StrataError):
    """An object the metadata references is missing from the store."""

    code = 50004


class CodecError(CorruptObject):
    """Bytes do not decode as the format they claim to be (truncated, bad magic, bad CRC)."""


class ObjectStoreError(StrataError):
    """The object store refused a request for a reason retrying does not fix (permissions, no bucket)."""

    code = 50005


class SettingsError(StrataError):
    """The server's own configuration is wrong (bad URL, unknown scheme); raised at start-up."""

    code = 50006
