"""The produce buffer, shared by every topic-partition this agent writes.

A produce request arrives already partitioned and encoded: one RecordBatch per partition it touches (batch
base offsets are relative, 0). The buffer queues requests in arrival order; the flush groups their batches
into one chunk per (topic, partition) and, once committed, answers each request with absolute offsets in
request order.

``drain()`` hands the accumulated batches over to one flush as a ``PendingFlush`` and starts an empty
buffer. Memory: ``bytes_held`` counts bytes in the open buffer, bytes in flushes not yet finished, and
``reserved`` bytes: requests whose bodies are still being read and parsed (the HTTP layer reserves before
it reads a body, so an overloaded agent refuses a request before spending memory or CPU on it). ``add``
and ``reserve`` refuse (BufferFull, HTTP 429) what would push the total over ``max_bytes``: that is the
agent's memory bound; records are only ever held here (and in the bounded object cache).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from storage.errors import BufferFull

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class PartitionBatch:
    """One request's records for one partition, encoded as a single RecordBatch (relative base 0)."""

    topic: str
    partition: int
    data: bytes
    record_count: int
    min_timestamp: int
    max_timestamp: int


@dataclass(slots=True)
class PendingRequest:
    """A produce request waiting for its flush to commit.

    ``order`` gives, for each record in request order, (index into ``batches``, index within that batch).
    """

    topic: str
    batches: list[PartitionBatch]
    order: list[tuple[int, int]]
    idempotency_key: str | None
    future: asyncio.Future[list[tuple[int, int]]]
    size: int = 0
    # Filled by build_file: for each batch, the relative offset of its first record within its chunk.
    chunk_starts: list[int] = field(default_factory=list)


@dataclass(slots=True)
class PendingFlush:
    """Everything one flush writes: the requests, in arrival order, and their bytes."""

    requests: list[PendingRequest]
    size: int


class ProduceBuffer:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._requests: list[PendingRequest] = []
        self._open_bytes = 0
        self._inflight_bytes = 0
        self._reserved = 0
        self.first_append_at: float | None = None  # monotonic time of the first record in the open buffer

    @property
    def open_bytes(self) -> int:
        return self._open_bytes

    @property
    def bytes_held(self) -> int:
        return self._open_bytes + self._inflight_bytes + self._reserved

    def reserve(self, nbytes: int) -> None:
        """Hold ``nbytes`` of the budget for a request body about to be read; BufferFull if it can't fit."""
        if self.bytes_held > 0 and self.bytes_held + nbytes > self.max_bytes:
            raise BufferFull(
                f"produce buffer is full ({self.bytes_held} of {self.max_bytes} bytes held); retry later"
            )
        # An empty buffer admits anything, so a body larger than the whole budget still reaches validation
        # (and its own clear error) instead of being refused as "full" forever.
        self._reserved += nbytes

    def unreserve(self, nbytes: int) -> None:
        self._reserved -= nbytes

    def __len__(self) -> int:
        return len(self._requests)

    def add(self, request: PendingRequest, now: float) -> None:
        size = sum(len(b.data) for b in request.batches)
        if self.bytes_held + size > self.max_bytes:
            raise BufferFull(
                f"produce buffer is full ({self.bytes_held} of {self.max_bytes} bytes held); retry later"
            )
        request.size = size
        self._requests.append(request)
        self._open_bytes += size
        if self.first_append_at is None:
            self.first_append_at = now

    def drain(self) -> PendingFlush:
        """Hand the open buffer to a flush. Its bytes stay counted until ``release``."""
        flush = PendingFlush(self._requests, self._open_bytes)
        self._inflight_bytes += self._open_bytes
        self._requests = []
        self._open_bytes = 0
        self.first_append_at = None
        return flush

    def release(self, flush: PendingFlush) -> None:
        self._inflight_bytes -= flush.size
