"""Commit flushes in the order they were cut, while their uploads run in parallel.

Up to ``max_inflight_flushes`` flushes upload at once, and a small file's PUT can finish before a large
one's. If commits followed upload completion, a request admitted after another on the same connection
could get lower offsets than it in a partition they share, and an idempotent producer's sequences would
arrive out of order. So each flush gets a turn when it is cut (``PendingFlush.seq``, from 0 upwards), and
its metadata commit waits until every earlier flush has finished its commit attempt, successful or not.

A failed flush still ends its turn: its requests are answered with a retriable error, and later flushes
must not wait forever for it. The turn is ended in a ``finally`` by the flusher, so a bug cannot wedge the
agent either.
"""

from __future__ import annotations

import asyncio


class CommitSequencer:
    """Turns in cut order. ``wait_turn(seq)`` returns once every flush before ``seq`` called ``done``."""

    def __init__(self) -> None:
        self._next = 0  # the lowest seq whose turn has not ended
        self._ended: set[int] = set()  # turns that ended out of order, waiting for the gap before them
        self._changed = asyncio.Condition()

    @property
    def next_turn(self) -> int:
        return self._next

    async def wait_turn(self, seq: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self._next >= seq)

    async def done(self, seq: int) -> None:
        """End ``seq``'s turn (idempotent). A turn may end before it came: a flush that never uploaded."""
        async with self._changed:
            if seq < self._next:
                return
            self._ended.add(seq)
            while self._next in self._ended:
                self._ended.discard(self._next)
                self._next += 1
            self._changed.notify_all()
