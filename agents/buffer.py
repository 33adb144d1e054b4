"""The produce buffer and its memory budget, shared by every topic-partition this agent writes.

A produce request arrives already validated, partitioned and encoded: one RecordBatch per partition it
touches (batch base offsets relative, 0). The buffer queues requests in arrival order; the flush groups their
batches into one chunk per (topic, partition) and, once committed, answers each request with absolute
offsets in request order.

The memory bound is owned here and nowhere else. ``bytes_held`` is the sum of:
- bytes in the open buffer (requests not yet drained);
- bytes in flushes not yet finished (drained, uploading or committing);
- live ``Reservation``s: memory a front door holds for a request it is still reading, parsing or encoding.
A front door reserves *before* it reads a request body, so an overloaded agent refuses (``BufferFull``,
HTTP 429, Kafka's throttling) without spending memory or CPU on it.

Fairness: a front door reserves for a request in proportion to the bytes the client has actually sent,
never for what it only declared, so a client that is slow or silent in sending holds next to nothing: the
Kafka door reserves a frame once it is complete, or, for a large frame, once its first ``SMALL_FRAME``
bytes are in (broker/connection.py); the HTTP door grows a body's reservation with each chunk received
(api/middleware.py). A reservation whose bytes are not all in is *arriving* until the front door calls
``arrived``, and arriving reservations together hold at most ``arriving_share`` of the budget (half), so
clients that send part of a large request and stop (until their receive deadline drops them) can delay
the others' large requests but never take the memory of the requests that are in; a front door waits or
refuses past the share as it does when the budget is full.

A reservation is:
- shrunk (``shrink_to``) when the front door knows the request needs less;
- consumed by ``add``, which turns it into the request's bytes in the open buffer;
- released once (``release``), by whoever gives up on the request; releasing again, or after ``add``
  consumed it, does nothing. So every path (success, validation error, cancelled client) can release in a
  ``finally`` without double-counting.
Nothing else holds records but the object cache, which gives way as the buffer fills (``grew``;
agents/cache.py), so ``max_bytes`` bounds produce memory, cached flushes included.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from agents.layout import FileLayout, PartitionBatch, TopicPartition
from agents.offsets import Order, RecordOffsets
from storage.errors import BufferFull

__all__ = [
    "PartitionBatch",
    "PendingFlush",
    "PendingRequest",
    "ProduceBuffer",
    "ProduceRequest",
    "Reservation",
    "TopicPartition",
]


# Requests still arriving may hold at most 1 / this of the budget.
ARRIVING_SHARE = 2


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs a microsecond, once per request
class ProduceRequest:
    """A validated, partitioned and encoded produce request: what a front door hands the agent core.
    Nothing changes it once made.

    ``order`` names the offsets the front door wants back (agents/offsets.py): (index into ``batches``,
    index of a record within that batch) pairs, and the agent answers with one (partition, offset) per
    pair, in that order. HTTP asks for every record; Kafka, whose batches carry their own relative
    offsets, asks only for each partition's first record.
    """

    topic: str
    batches: list[PartitionBatch]
    order: Order

    @property
    def size(self) -> int:
        batches = self.batches
        if len(batches) == 1:  # a Kafka request's partition, mostly: no generator
            return len(batches[0].data)
        return sum(len(b.data) for b in batches)


@dataclass(slots=True)
class PendingRequest:
    """A produce request in the buffer, waiting for its flush to commit."""

    request: ProduceRequest
    idempotency_key: str | None
    future: asyncio.Future[RecordOffsets]
    size: int = 0

    @property
    def topic(self) -> str:
        return self.request.topic

    @property
    def batches(self) -> list[PartitionBatch]:
        return self.request.batches


@dataclass(slots=True)
class PendingFlush:
    """Everything one flush writes: the requests, in arrival order, their bytes, and their file's layout,
    built as they arrived (agents/layout.py).

    ``seq`` is the flush's place in cut order: flushes commit in this order (agents/sequencer.py).
    """

    requests: list[PendingRequest]
    size: int
    seq: int = 0
    layout: FileLayout = field(default_factory=FileLayout)
    # The flush class its cut counts under (agents/flush_policy.py): its PUTs are that class's cost.
    flush_class: str = "standard"


class Reservation:
    """Bytes of the buffer's budget held for one request before it enters the buffer. See the module doc."""

    __slots__ = ("_arriving", "_buffer", "_size")

    def __init__(self, buffer: ProduceBuffer, size: int, arriving: int = 0) -> None:
        self._buffer = buffer
        self._size = size
        self._arriving = arriving  # of ``_size``, the bytes counted against the arriving share

    def arrived(self) -> None:
        """Every byte of the request is in: it no longer counts against the arriving share."""
        if self._arriving:
            self._buffer._arriving -= self._arriving
            self._arriving = 0
            self._buffer._freed.set()

    @property
    def size(self) -> int:
        """Bytes still held; 0 once released or consumed."""
        return self._size

    def grow(self, extra: int, *, arriving: bool = False) -> None:
        """Hold ``extra`` more bytes, admitted as ``ProduceBuffer.reserve`` admits; BufferFull (nothing
        changed) if they do not fit. ``arriving``: bytes of a request still being received, counted against
        the arriving share (which a reservation alone in it may pass, as ``reserve`` lets the first one)."""
        if extra > 0:
            buffer = self._buffer
            others = buffer._arriving - self._arriving
            if arriving and others and buffer._arriving + extra > buffer.arriving_limit:
                raise BufferFull(
                    f"requests still arriving hold {buffer._arriving} of the {buffer.arriving_limit} bytes"
                    " they may; retry later"
                )
            buffer._admit(extra, own=self._size)
            buffer._reserved += extra
            self._size += extra
            if arriving:
                buffer._arriving += extra
                self._arriving += extra
            if buffer.grew is not None:
                buffer.grew()

    def shrink_to(self, size: int) -> None:
        """Give back what the request turned out not to need."""
        if size < self._size:
            self._buffer._reserved -= self._size - max(size, 0)
            self._size = max(size, 0)
            self._buffer._freed.set()

    def release(self) -> None:
        """Give the bytes back. Safe to call any number of times, and after ``ProduceBuffer.add``."""
        self.arrived()
        if self._size:
            self._buffer._reserved -= self._size
            self._size = 0
            self._buffer._freed.set()


@dataclass(slots=True)
class ProduceBuffer:
    max_bytes: int
    _requests: list[PendingRequest] = field(default_factory=list)
    _layout: FileLayout = field(default_factory=FileLayout)  # the open requests' file, so far
    _open_bytes: int = 0
    _inflight_bytes: int = 0
    _reserved: int = 0
    _arriving: int = 0  # bytes of reservations whose request is still arriving (see the module doc)
    _next_seq: int = 0
    # Set whenever bytes are given back, for front doors that wait for room instead of refusing.
    _freed: asyncio.Event = field(default_factory=asyncio.Event)
    # Called whenever the bytes held grow: the agent's cache gives way (agents/cache.py).
    grew: Callable[[], None] | None = None
    first_append_at: float | None = None  # monotonic time of the first record in the open buffer
    last_append_at: float | None = None  # and of the latest
    urgent_at: float | None = None  # and of its first low-latency request (agents/flush_policy.py)

    @property
    def open_bytes(self) -> int:
        return self._open_bytes

    @property
    def reserved_bytes(self) -> int:
        return self._reserved

    @property
    def bytes_held(self) -> int:
        return self._open_bytes + self._inflight_bytes + self._reserved

    def _admit(self, nbytes: int, own: int = 0) -> None:
        """BufferFull unless ``nbytes`` more fit; ``own``: bytes the asking request already holds."""
        held = self.bytes_held
        # An empty buffer (but for the asking request's own reservation) admits anything, so a request
        # larger than the whole budget still reaches validation (and its own clear error) instead of being
        # refused as "full" forever.
        if held > own and held + nbytes > self.max_bytes:
            raise BufferFull(f"produce buffer is full ({held} of {self.max_bytes} bytes held); retry later")

    @property
    def arriving_bytes(self) -> int:
        return self._arriving

    @property
    def arriving_limit(self) -> int:
        return self.max_bytes // ARRIVING_SHARE

    def reserve(self, nbytes: int, *, arriving: bool = False) -> Reservation:
        """Hold ``nbytes`` of the budget for a request about to be read; BufferFull if it can't fit.
        ``arriving``: its bytes are not in yet (see the module doc); ``Reservation.arrived`` once they are."""
        if arriving and self._arriving and self._arriving + nbytes > self.arriving_limit:
            raise BufferFull(
                f"requests still arriving hold {self._arriving} of the {self.arriving_limit} bytes they may;"
                " retry later"
            )
        self._admit(nbytes)
        self._reserved += nbytes
        if arriving:
            self._arriving += nbytes
        if self.grew is not None:
            self.grew()
        return Reservation(self, nbytes, nbytes if arriving else 0)

    async def reserve_when_free(self, nbytes: int, *, arriving: bool = False) -> Reservation:
        """``reserve``, waiting for room instead of refusing: Kafka's memory pool stops reading a socket
        until memory frees up, and its clients time out and retry on their own."""
        while True:
            try:
                return self.reserve(nbytes, arriving=arriving)
            except BufferFull:
                # No await between the failed attempt and clear(), so no release can slip in between.
                self._freed.clear()
                await self._freed.wait()

    def __len__(self) -> int:
        return len(self._requests)

    def add(
        self, request: PendingRequest, reservation: Reservation, now: float, urgent: bool = False
    ) -> None:
        """Queue ``request``, consuming its size of ``reservation``; BufferFull (reservation kept) if it
        cannot fit. ``urgent``: its topic is of the low-latency flush class.

        The request's bytes replace as much of the reservation; only growth beyond what was reserved needs
        admission.
        """
        size = request.request.size
        if size > reservation.size:
            self._admit(size - reservation.size)
            reservation.release()
            if self.grew is not None:
                self.grew()
        else:
            # The rest stays reserved for the request's other partitions, which the front door adds next.
            reservation.shrink_to(reservation.size - size)
        request.size = size
        self._requests.append(request)
        self._layout.add(request.request.batches)
        self._open_bytes += size
        if self.first_append_at is None:
            self.first_append_at = now
        self.last_append_at = now
        if urgent and self.urgent_at is None:
            self.urgent_at = now

    def drain(self) -> PendingFlush:
        """Hand the open buffer to the next flush in cut order. Its bytes stay counted until ``release``."""
        flush = PendingFlush(self._requests, self._open_bytes, self._next_seq, self._layout)
        self._next_seq += 1
        self._inflight_bytes += self._open_bytes
        self._requests = []
        self._layout = FileLayout()
        self._open_bytes = 0
        self.first_append_at = self.last_append_at = self.urgent_at = None
        return flush

    def release(self, flush: PendingFlush) -> None:
        self._inflight_bytes -= flush.size
        self._freed.set()
