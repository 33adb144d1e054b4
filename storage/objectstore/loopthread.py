"""An async store's requests on an event loop of their own, in a thread of their own.

Why: an aiobotocore request is a chain of small steps, each one turn of the event loop that runs it (a PUT
takes about a dozen: connect, send, each read of the answer; docs/benchmarks.md). On the agent's own loop
each turn waits behind whatever that loop is doing, and under HTTP produce load a loop iteration parses
and encodes dozens of request bodies: the flush's upload then waited out as many such iterations as it
had steps, and the producers waiting for the flush with it. On a loop of its own the chain runs as soon
as the GIL lets it, and the agent's loop spends one turn per request: the answer. With
`bench/produce_fetch.py --backend s3 --phases produce`, the flush's upload and commit got shorter and
produce throughput higher (docs/benchmarks.md).

The standard library's ``asyncio.run_coroutine_threadsafe`` carries each call across, and
``asyncio.wrap_future`` brings its outcome back, so:
- an exception raised by the inner store reaches the caller unchanged (its type and message);
- cancelling the caller's await cancels the request on the store's loop (the chained futures pass the
  cancellation on), so an abandoned fetch does not keep a GET running.

Invariants:
- The inner store is used only from the thread's loop: its client and connection pool are bound to the
  loop that created them (``s3async.py``), and every call, ``open`` and ``close`` included, goes there.
- The thread starts at the first call and stops at ``close``, which closes the inner store first; calls
  after ``close`` raise ``RuntimeError``, as the inner store's own do.
- Request counting stays in the inner store (``RequestCounters`` is thread-safe).

uvloop, when installed (it comes with ``uvicorn[standard]``, the agent's server), runs the thread's loop,
as it runs the agent's: its socket reads and writes are compiled. Otherwise the standard loop does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from storage.objectstore.base import AsyncObjectStore, Body, StoreWrapper

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThreadAsyncObjectStore(StoreWrapper[AsyncObjectStore], AsyncObjectStore):
    """``inner``'s coroutines run on a private event loop in a daemon thread; callers await their results."""

    def __init__(self, inner: AsyncObjectStore, *, thread_name: str = "strata-store-loop") -> None:
        super().__init__(inner)
        self._thread_name = thread_name
        self._start_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The store's loop, started on first use."""
        with self._start_lock:
            if self._closed:
                raise RuntimeError(f"{self.url}: the store is closed")
            if self._loop is None:
                loop = _new_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._thread_name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _run(self, make: Coroutine[Any, Any, T]) -> T:
        try:
            loop = self._running_loop()
        except RuntimeError:
            make.close()  # never awaited: say so to the coroutine, not to the warnings log
            raise
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(make, loop))

    async def put(self, key: str, data: Body) -> None:
        await self._run(self.inner.put(key, data))

    async def get(self, key: str) -> bytes:
        return await self._run(self.inner.get(key))

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        return await self._run(self.inner.get_range(key, start, end))

    async def open(self) -> None:
        await self._run(self.inner.open())

    async def close(self) -> None:
        """Close the inner store on its loop, then stop the loop and its thread (idempotent)."""
        with self._start_lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return  # never started: the inner store never made a client
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.inner.close(), loop))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join)
            loop.close()


__all__ = ["LoopThreadAsyncObjectStore"]
