"""The server's side: infrastructure down (``UNAVAILABLE``), stored data damaged (``CORRUPT``), and bugs
or misconfiguration (``INTERNAL``)."""

from __future__ import annotations

from dataclasses import dataclass

from storage.errors.base import ErrorKind, StrataError

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
