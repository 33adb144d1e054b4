"""The object-store interface: the only way Strata touches durable bytes.

Two flavours share one request counter:
- ``ObjectStore`` (sync; boto3 for s3://) for workers, GC, tools and the fetch path's thread pool.
- ``AsyncObjectStore`` (aiobotocore for s3://) for the agent's flush path.

Backends translate their SDK's failures into Strata's typed errors:
- ``TransientStoreError``: may succeed if repeated (5xx, SlowDown, timeouts, connection resets).
- ``ObjectNotFound``: the key does not exist.
Nothing else escapes a backend. Retrying is a wrapper (``retry.py``), and so is fault injection
(``faults.py``); they stack as Retrying(Faulty(backend)), so injected faults are retried like real ones.

Every request a backend sends is counted by kind in ``RequestCounters``: tests and benchmarks assert the
cost shape (one PUT per flush, two GET streams per compaction input file) from these numbers.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

# Request kinds as counted. A ranged GET and a streaming GET both count as GET: each is one request.
PUT = "PUT"
GET = "GET"
HEAD = "HEAD"
LIST = "LIST"
DELETE = "DELETE"
REQUEST_KINDS = (PUT, GET, HEAD, LIST, DELETE)


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int
    last_modified_ms: int


class RequestCounters:
    """Thread-safe request counts by kind (and bytes moved), shared by sync and async stores."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(REQUEST_KINDS, 0)
        self.bytes_read = 0
        self.bytes_written = 0

    def incr(self, kind: str, *, read: int = 0, written: int = 0) -> None:
        with self._lock:
            self._counts[kind] += 1
            self.bytes_read += read
            self.bytes_written += written

    def add_bytes_read(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    def get(self, kind: str) -> int:
        with self._lock:
            return self._counts[kind]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


class ObjectStream(Protocol):
    """One streaming GET, read forward only. ``read`` returns at most n bytes and b"" at the end."""

    def read(self, n: int) -> bytes: ...

    def close(self) -> None: ...


class ObjectStore(ABC):
    """Synchronous object store. Keys are relative to the store's bucket/prefix; ranges are [start, end)."""

    counters: RequestCounters
    url: str

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write the whole object atomically: readers see the old state or the new, never a part."""

    @abstractmethod
    def get(self, key: str) -> bytes: ...

    @abstractmethod
    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object, as one request."""

    @abstractmethod
    def open_stream(self, key: str, start: int = 0, end: int | None = None) -> ObjectStream:
        """One GET request whose body is consumed incrementally, from ``start`` to ``end`` (or EOF)."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo: ...

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """All objects under ``prefix``, in key order. Each page fetched counts as one LIST."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete the object; deleting a missing key is not an error (S3 semantics)."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections."""


class AsyncObjectStore(ABC):
    """The async subset the agent's flush and fetch paths use."""

    counters: RequestCounters
    url: str

    @abstractmethod
    async def put(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    async def get(self, key: str) -> bytes: ...

    @abstractmethod
    async def get_range(self, key: str, start: int, end: int) -> bytes: ...

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
