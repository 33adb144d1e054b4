"""The object-store interface: the only way Strata touches durable bytes.

Two flavours share one request counter:
- ``ObjectStore`` (sync; boto3 for s3://) for the planner (compaction jobs, retention, GC), the Spark
  pipeline, the CLI and the benchmarks.
- ``AsyncObjectStore`` (aiobotocore for s3://) for the agent: the flush path's PUTs (``agents/flusher.py``)
  and the fetch path's ranged GETs (``agents/fetch.py``).

Backends translate their SDK's failures into Strata's typed errors:
- ``TransientStoreError``: may succeed if repeated (5xx, SlowDown, timeouts, connection resets).
- ``ObjectNotFound``: the key does not exist.
Nothing else escapes a backend. Retrying is a wrapper (``retry.py``), and so is fault injection
(``faults.py``); they stack as Retrying(Faulty(backend)), so injected faults are retried like real ones.

Every request a backend sends is counted by kind in ``RequestCounters``: tests and benchmarks assert the
cost shape (one PUT per flush, two GET streams per compaction input file) from these numbers.

The sync and async twins of each backend and wrapper share everything but their IO calls through the
helpers at the end of this module (range contract, empty stream, stream context, wrapper identity).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

# Request kinds as counted. A ranged GET and a streaming GET both count as GET: each is one request.
PUT = "PUT"
GET = "GET"
HEAD = "HEAD"
LIST = "LIST"
DELETE = "DELETE"
REQUEST_KINDS = (PUT, GET, HEAD, LIST, DELETE)

# Set by a caller that must know the moment its PUT is durable, sooner than ``put`` can return to it: the
# local store calls it from its worker thread as soon as the write's fsyncs are done, so another thread
# waiting on it need not wait for the event loop to resume the put's coroutine (a few of its turns, each
# behind whatever requests it is parsing). A store that cannot tell sooner does not call it; the caller
# then learns from ``put`` returning. The agent's flusher uses it for a commit beside its upload.
ON_DURABLE: ContextVar[Callable[[], None] | None] = ContextVar("on_durable", default=None)


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

    def add(self, kind: str, n: int) -> None:
        """``n`` requests of ``kind`` that another process sent (role all's worker process)."""
        with self._lock:
            self._counts[kind] += n

    def add_bytes(self, *, read: int = 0, written: int = 0) -> None:
        """Bytes moved outside a counted request: a stream's body, or another process's totals."""
        with self._lock:
            self.bytes_read += read
            self.bytes_written += written

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


# An object's bytes for ``AsyncObjectStore.put``: one buffer, or its pieces in order. With pieces a backend
# that can write them as they are (the local directory: ``writev`` in storage/_durable.c) saves joining
# them: a flush file is its producers' batches, as they were received, between the few bytes the flusher
# writes itself.
Piece = bytes | bytearray | memoryview
Body = bytes | list[Piece]


def body_size(body: Body) -> int:
    return len(body) if isinstance(body, bytes) else sum(len(piece) for piece in body)


def body_bytes(body: Body) -> bytes:
    """The body as one buffer: joined (a copy) when it came in pieces."""
    return body if isinstance(body, bytes) else b"".join(body)


class AsyncObjectStore(ABC):
    """The async subset the agent's flush and fetch paths use."""

    counters: RequestCounters
    url: str
    # Whether reading back what was just written costs a request worth saving: the agent then keeps the
    # files it flushes in its cache, for tailing consumers. A local directory's reads are served from the
    # OS page cache, so the agent keeps no copy of its own (and joins no flush file to make one).
    remote: bool = True

    @abstractmethod
    async def put(self, key: str, data: Body) -> None: ...

    @abstractmethod
    async def get(self, key: str) -> bytes: ...

    @abstractmethod
    async def get_range(self, key: str, start: int, end: int) -> bytes: ...

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Prepare what the first request would otherwise have to (a client, its connection pool), so that
        the first flush does not pay for it while producers wait."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


# --- helpers shared by the backends and wrappers, sync and async ------------------------------------------


def empty_range(start: int, end: int | None) -> bool:
    """Check the byte range [start, end) (``end`` None: to EOF) and say whether it is empty.

    ValueError if ``start`` is negative or ``end`` precedes it. An empty range is answered without a
    request by every backend: no HTTP Range header can express it, and the local backend counts as S3 would.
    """
    if start < 0 or (end is not None and end < start):
        raise ValueError(f"invalid byte range [{start}, {end})")
    return end == start


class StreamBase:
    """Context-manager support for ``ObjectStream`` implementations: leaving ``with`` closes the stream."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class EmptyStream(StreamBase):
    """A stream with no bytes: an empty range (no request sent), or a range that starts at or after the
    end of the object (S3 answered 416)."""

    def read(self, n: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


StoreT = TypeVar("StoreT", bound=ObjectStore | AsyncObjectStore)


class StoreWrapper(Generic[StoreT]):
    """A store stacked on another (retry, faults): it speaks for ``inner``, so it shows inner's counters
    (requests are counted where they are sent, by the backend) and inner's URL."""

    inner: StoreT
    counters: RequestCounters
    url: str
    remote: bool

    def __init__(self, inner: StoreT) -> None:
        self.inner = inner
        self.counters = inner.counters
        self.url = inner.url
        if isinstance(inner, AsyncObjectStore):
            self.remote = inner.remote
