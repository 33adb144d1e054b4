"""Fault injection for tests: a wrapper that makes any backend fail like a flaky network would.

Stacked as Retrying(Faulty(backend)), injected faults are retried exactly like real ones. Three kinds of
fault, each drawn from the injected ``random.Random`` so a seed reproduces a run:
- before: the request is refused before it reaches the backend (connection refused, 503). The backend sees
  and counts nothing.
- after: the backend performed the request, but the response is lost. For a PUT this is the case that
  matters ("the upload happened but the response was lost"): the object exists although the caller saw an
  error. The backend counted the request.
- mid-stream: a streaming GET breaks part-way through the body. Some bytes are consumed from the backend
  and dropped, as on a reset connection, and every later read of that stream fails too. A listing breaks
  the same way between two keys (a later page's request failing).

The wrapper counts what it injected (``injected_before``, ``injected_after``, ``injected_mid_stream``, by
request kind), so a test can state exactly how many requests the backend must have seen.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

from storage.errors import TransientStoreError
from storage.objectstore.base import (
    DELETE,
    GET,
    HEAD,
    LIST,
    PUT,
    REQUEST_KINDS,
    AsyncObjectStore,
    Body,
    ObjectInfo,
    ObjectStore,
    ObjectStream,
    RequestCounters,
    StoreT,
    StoreWrapper,
    StreamBase,
)


def _check_rate(name: str, rate: float) -> None:
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {rate}")


class FaultPlan:
    """The random decisions and their tallies, shared by the sync and async wrappers."""

    def __init__(
        self,
        *,
        failure_rate: float,
        rng: random.Random,
        kinds: frozenset[str] | None,
        fail_after_rate: float,
        stream_failure_rate: float | None,
    ) -> None:
        _check_rate("failure_rate", failure_rate)
        _check_rate("fail_after_rate", fail_after_rate)
        if stream_failure_rate is not None:
            _check_rate("stream_failure_rate", stream_failure_rate)
        self.kinds = frozenset(REQUEST_KINDS) if kinds is None else kinds
        unknown = self.kinds - frozenset(REQUEST_KINDS)
        if unknown:
            raise ValueError(f"unknown request kinds: {sorted(unknown)}")
        self.failure_rate = failure_rate
        self.fail_after_rate = fail_after_rate
        self.stream_failure_rate = failure_rate if stream_failure_rate is None else stream_failure_rate
        self.rng = rng
        self.injected_before = RequestCounters()
        self.injected_after = RequestCounters()
        self.injected_mid_stream = RequestCounters()

    def _draw(self, kind: str, rate: float) -> bool:
        # No draw at all when the kind is exempt or the rate is zero, so adding an exempt kind to a test
        # does not shift the random sequence of the others.
        return kind in self.kinds and rate > 0.0 and self.rng.random() < rate

    def before(self, kind: str, key: str) -> None:
        if self._draw(kind, self.failure_rate):
            self.injected_before.incr(kind)
            raise TransientStoreError(f"injected fault: {kind} {key!r} refused before it was sent")

    def after(self, kind: str, key: str) -> None:
        if self._draw(kind, self.fail_after_rate):
            self.injected_after.incr(kind)
            raise TransientStoreError(f"injected fault: {kind} {key!r} was performed but its response lost")

    @contextmanager
    def request(self, kind: str, key: str) -> Iterator[None]:
        """Around one request, sync or async: a fault may refuse it before, or lose its response after.

        ``after`` is drawn only when the request itself succeeded (an exception from the body propagates
        through the ``yield`` and skips it), as for a real response that never arrived.
        """
        self.before(kind, key)
        yield
        self.after(kind, key)

    def mid_stream(self, kind: str) -> bool:
        if self._draw(kind, self.stream_failure_rate):
            self.injected_mid_stream.incr(kind)
            return True
        return False


class FaultyStream(StreamBase):
    def __init__(self, inner: ObjectStream, plan: FaultPlan, key: str) -> None:
        self._inner = inner
        self._plan = plan
        self._key = key
        self._broken = False

    def read(self, n: int) -> bytes:
        if self._broken:
            raise TransientStoreError(f"injected fault: stream of {self._key!r} is broken")
        if n > 0 and self._plan.mid_stream(GET):
            # The connection dies part-way: some bytes left the backend but never reach the caller.
            self._inner.read(self._plan.rng.randint(0, n))
            self._broken = True
            raise TransientStoreError(f"injected fault: stream of {self._key!r} reset mid-body")
        return self._inner.read(n)

    def close(self) -> None:
        self._inner.close()


class _Faulty(StoreWrapper[StoreT]):
    """What both faulty twins hold: the inner store and one ``FaultPlan`` with its tallies."""

    def __init__(
        self,
        inner: StoreT,
        *,
        failure_rate: float,
        rng: random.Random,
        kinds: frozenset[str] | None = None,
        fail_after_rate: float = 0.0,
        stream_failure_rate: float | None = None,
    ) -> None:
        """``stream_failure_rate`` is the chance that one stream ``read``, or the step from one listed key to
        the next, breaks the stream or listing (default: ``failure_rate``); the async store has neither."""
        super().__init__(inner)
        self.plan = FaultPlan(
            failure_rate=failure_rate,
            rng=rng,
            kinds=kinds,
            fail_after_rate=fail_after_rate,
            stream_failure_rate=stream_failure_rate,
        )
        self.injected_before = self.plan.injected_before
        self.injected_after = self.plan.injected_after
        self.injected_mid_stream = self.plan.injected_mid_stream


class FaultyObjectStore(_Faulty[ObjectStore], ObjectStore):
    def put(self, key: str, data: bytes) -> None:
        with self.plan.request(PUT, key):
            self.inner.put(key, data)

    def get(self, key: str) -> bytes:
        with self.plan.request(GET, key):
            return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        with self.plan.request(GET, key):
            return self.inner.get_range(key, start, end)

    def open_stream(self, key: str, start: int = 0, end: int | None = None) -> ObjectStream:
        self.plan.before(GET, key)
        stream = self.inner.open_stream(key, start, end)
        try:
            self.plan.after(GET, key)
        except TransientStoreError:
            # The caller never receives this stream, so it must not leak its connection or file.
            stream.close()
            raise
        return FaultyStream(stream, self.plan, key)

    def head(self, key: str) -> ObjectInfo:
        with self.plan.request(HEAD, key):
            return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        return self._list(prefix)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        # Drawn when iteration starts, which is when a real backend sends its first LIST.
        self.plan.before(LIST, prefix)
        for info in self.inner.list(prefix):
            yield info
            if self.plan.mid_stream(LIST):
                raise TransientStoreError(f"injected fault: listing of {prefix!r} broke after {info.key!r}")

    def delete(self, key: str) -> None:
        with self.plan.request(DELETE, key):
            self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()


class FaultyAsyncObjectStore(_Faulty[AsyncObjectStore], AsyncObjectStore):
    async def put(self, key: str, data: Body) -> None:
        with self.plan.request(PUT, key):
            await self.inner.put(key, data)

    async def get(self, key: str) -> bytes:
        with self.plan.request(GET, key):
            return await self.inner.get(key)

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        with self.plan.request(GET, key):
            return await self.inner.get_range(key, start, end)

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()


__all__ = ["FaultPlan", "FaultyAsyncObjectStore", "FaultyObjectStore", "FaultyStream"]
