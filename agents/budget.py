"""A budget of bytes shared by many readers, granted first come first served: what bounds the memory of
fetch answers over all clients of a front door (the Kafka door's Fetch, the HTTP door's fetch).

An answer holds its records from the read until its client has taken them. Without a bound, many consumers
catching up at once (each asking for tens of MiB) hold as many answers as they have requests in flight
(docs/benchmarks.md). Each read is granted at most ``total`` bytes before it reads (waiting, in arrival
order, while other answers hold the budget) and reads no more than its grant; the grant goes back once its
answer has been written. A grant is never smaller than one byte, so the first batch of a partition
(KIP-74) still goes out whole, the one overshoot Kafka's limits allow.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


class ByteBudget:
    def __init__(self, total: int) -> None:
        self.total = total
        self.held = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def acquire(self, wanted: int) -> int:
        """Hold ``min(wanted, total)`` bytes (at least 1), waiting for room; the grant is returned.

        Callers bound the wait (``asyncio.timeout``): a Fetch waits at most until its own deadline, since
        answers on one connection go out in request order, so a later Fetch's finished answer keeps its
        grant until an earlier Fetch on that connection has answered, and an earlier Fetch waiting without
        a deadline for that grant would wait forever (and every consumer queued behind it with it). A
        waiter cancelled (or timed out) keeps nothing, even if it was granted at that moment."""
        grant = max(1, min(wanted, self.total))
        if not self._waiters and self.held + grant <= self.total:
            self.held += grant
            return grant
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (grant, future)
        self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(grant)  # granted as the waiter was cancelled: give it back
            else:
                self._forget(entry)
            raise
        return grant

    def release(self, grant: int) -> None:
        self.held -= grant
        self._wake()

    def _forget(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        """A waiter that gave up. ``_wake`` may have dropped it already (its future was cancelled first)."""
        with contextlib.suppress(ValueError):
            self._waiters.remove(entry)
        self._wake()

    def _wake(self) -> None:
        # First come, first served: a large grant at the head is not overtaken by small ones behind it. A
        # future cancelled while queued is dropped without a grant; its waiter's handler finds it gone.
        while self._waiters:
            grant, future = self._waiters[0]
            if future.done():
                self._waiters.popleft()
                continue
            if self.held + grant > self.total:
                break
            self._waiters.popleft()
            self.held += grant
            future.set_result(None)
