"""Retrying of transient object-store failures, as a wrapper around any backend.

Only ``TransientStoreError`` is retried: it is the one failure a backend promises may succeed if repeated.
``ObjectNotFound``, ``ObjectStoreError`` and programming errors pass through at once. After the last attempt
the final ``TransientStoreError`` is re-raised unchanged; it is an ``Unavailable`` (HTTP 503, code 50003),
so an API caller learns that its request may be retried.

Backoff is exponential with full jitter: before attempt k+1 (k = 1, 2, ...) the wrapper sleeps a uniform
random time in [0, min(max_delay_s, base_delay_s * 2**(k-1))]. Full jitter spreads the retries of many
agents that failed together, which is what a throttling (SlowDown) response asks for. Sleeps go through the
injected ``Clock`` and the jitter through the injected ``random.Random``, so tests neither wait nor vary.

Repeating a PUT is safe because a PUT replaces the whole object atomically with the same bytes; repeating
a DELETE is safe because deleting a missing key succeeds.

Streams: a transient error while reading a stream closes it and opens a new one at the first byte not yet
returned to the caller (one more GET, counted by the backend), so the caller sees every byte exactly once.
The attempt budget applies per ``read`` call: a long stream may survive many separate resets, but never
more than ``max_attempts - 1`` in a row.

Listing: the interface has no "start after", so a transient error in the middle of a listing re-lists the
prefix from the start and skips keys up to the last one already yielded (keys come in order).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from storage.clock import Clock
from storage.errors import TransientStoreError
from storage.objectstore.base import (
    AsyncObjectStore,
    Body,
    ObjectInfo,
    ObjectStore,
    ObjectStream,
    StoreT,
    StoreWrapper,
    StreamBase,
)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            raise ValueError("retry delays must be >= 0")

    def delay_s(self, failures: int, rng: random.Random) -> float:
        """Sleep before the next attempt after ``failures`` consecutive failures (>= 1), full jitter."""
        cap = min(self.max_delay_s, self.base_delay_s * (2 ** (failures - 1)))
        return rng.uniform(0.0, cap)


class Attempts:
    """The decisions of one retry loop, without its IO: every loop (sync, async, stream, listing) keeps one.

    A loop calls ``failed()`` when an attempt raised ``TransientStoreError``: False means the budget is
    spent and the loop re-raises; otherwise it sleeps ``delay_s()`` (on its clock, sync or async) and tries
    again. ``reset()`` after progress (a stream read or listed key) starts a fresh run of failures.
    """

    __slots__ = ("_policy", "_rng", "failures")

    def __init__(self, policy: RetryPolicy, rng: random.Random) -> None:
        self._policy = policy
        self._rng = rng
        self.failures = 0  # consecutive transient failures so far

    def failed(self) -> bool:
        """Count one more failure; True if another attempt is allowed."""
        self.failures += 1
        return self.failures < self._policy.max_attempts

    def delay_s(self) -> float:
        return self._policy.delay_s(self.failures, self._rng)

    def reset(self) -> None:
        self.failures = 0


class _Retrying(StoreWrapper[StoreT]):
    """What both retrying twins hold: the inner store, the policy, the injected clock and rng."""

    def __init__(self, inner: StoreT, policy: RetryPolicy, clock: Clock, rng: random.Random) -> None:
        super().__init__(inner)
        self.policy = policy
        self._clock = clock
        self._rng = rng

    def attempts(self) -> Attempts:
        return Attempts(self.policy, self._rng)


class RetryingObjectStore(_Retrying[ObjectStore], ObjectStore):
    def backoff(self, attempts: Attempts) -> None:
        """Sleep (on the injected clock) before the attempt that follows ``attempts.failures`` failures."""
        self._clock.sleep(attempts.delay_s())

    def _call(self, fn: Callable[[], T]) -> T:
        attempts = self.attempts()
        while True:
            try:
                return fn()
            except TransientStoreError:
                if not attempts.failed():
                    raise
            self.backoff(attempts)

    def put(self, key: str, data: bytes) -> None:
        self._call(lambda: self.inner.put(key, data))

    def get(self, key: str) -> bytes:
        return self._call(lambda: self.inner.get(key))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self._call(lambda: self.inner.get_range(key, start, end))

    def open_stream(self, key: str, start: int = 0, end: int | None = None) -> ObjectStream:
        stream = self._call(lambda: self.inner.open_stream(key, start, end))
        return _ResumingStream(self, key, start, end, stream)

    def head(self, key: str) -> ObjectInfo:
        return self._call(lambda: self.inner.head(key))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self._list(prefix)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        last_key: str | None = None
        attempts = self.attempts()
        while True:
            try:
                for info in self.inner.list(prefix):
                    # After a restart, everything up to the last yielded key was already delivered.
                    if last_key is not None and info.key <= last_key:
                        continue
                    last_key = info.key
                    attempts.reset()
                    yield info
                return
            except TransientStoreError:
                if not attempts.failed():
                    raise
            self.backoff(attempts)

    def delete(self, key: str) -> None:
        self._call(lambda: self.inner.delete(key))

    def close(self) -> None:
        self.inner.close()


class _ResumingStream(StreamBase):
    """A stream that re-opens at its current position after a transient read failure."""

    def __init__(
        self, store: RetryingObjectStore, key: str, start: int, end: int | None, stream: ObjectStream
    ) -> None:
        self._store = store
        self._key = key
        # Invariant: ``_pos`` is the offset of the first byte not yet returned to the caller, and
        # ``_stream`` (when open) delivers exactly from ``_pos``.
        self._pos = start
        self._end = end
        self._stream: ObjectStream | None = stream

    def read(self, n: int) -> bytes:
        if n < 0:
            raise ValueError("read size must be >= 0")
        if n == 0 or (self._end is not None and self._pos >= self._end):
            return b""
        attempts = self._store.attempts()
        while True:
            try:
                if self._stream is None:
                    self._stream = self._store.inner.open_stream(self._key, self._pos, self._end)
                data = self._stream.read(n)
                self._pos += len(data)
                return data
            except TransientStoreError:
                self._drop_stream()
                if not attempts.failed():
                    raise
            self._store.backoff(attempts)

    def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is None:
            return
        try:
            stream.close()
        except TransientStoreError:
            # Closing a broken connection may itself fail; the stream is abandoned either way.
            pass

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()


class RetryingAsyncObjectStore(_Retrying[AsyncObjectStore], AsyncObjectStore):
    async def _call(self, fn: Callable[[], Awaitable[T]]) -> T:
        attempts = self.attempts()
        while True:
            try:
                return await fn()
            except TransientStoreError:
                if not attempts.failed():
                    raise
            await self._clock.asleep(attempts.delay_s())

    async def put(self, key: str, data: Body) -> None:
        await self._call(lambda: self.inner.put(key, data))

    async def get(self, key: str) -> bytes:
        return await self._call(lambda: self.inner.get(key))

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        return await self._call(lambda: self.inner.get_range(key, start, end))

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()


__all__ = ["Attempts", "RetryPolicy", "RetryingAsyncObjectStore", "RetryingObjectStore"]
