"""The async store on a loop of its own (storage/objectstore/loopthread.py): calls, errors, cancellation and
closing cross the thread boundary intact."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from storage.errors import ObjectNotFound
from storage.objectstore.base import AsyncObjectStore, Body, RequestCounters, body_bytes
from storage.objectstore.local import LocalAsyncObjectStore
from storage.objectstore.loopthread import LoopThreadAsyncObjectStore


class ThreadRecordingStore(AsyncObjectStore):
    """A dict-backed store that notes the thread and loop each call ran on; ``get`` of ``"slow"`` waits
    until cancelled, then says so."""

    url = "memory://test"

    def __init__(self) -> None:
        self.counters = RequestCounters()
        self.objects: dict[str, bytes] = {}
        self.threads: set[int] = set()
        self.loops: set[int] = set()
        self.cancelled = threading.Event()
        self.slow_started = threading.Event()
        self.closed_on: int | None = None

    def _note(self) -> None:
        self.threads.add(threading.get_ident())
        self.loops.add(id(asyncio.get_running_loop()))

    async def put(self, key: str, data: Body) -> None:
        self._note()
        self.objects[key] = body_bytes(data)

    async def get(self, key: str) -> bytes:
        self._note()
        if key == "slow":
            self.slow_started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if key not in self.objects:
            raise ObjectNotFound(f"no object {key}")
        return self.objects[key]

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        return (await self.get(key))[start:end]

    async def close(self) -> None:
        self.closed_on = threading.get_ident()


async def test_every_call_runs_on_one_other_thread_and_loop() -> None:
    inner = ThreadRecordingStore()
    store = LoopThreadAsyncObjectStore(inner)
    assert store.counters is inner.counters
    assert store.url == inner.url
    await store.open()
    await store.put("k", [b"ab", memoryview(b"cdef")])
    assert await store.get("k") == b"abcdef"
    assert await store.get_range("k", 1, 3) == b"bc"
    assert len(inner.threads) == 1
    assert threading.get_ident() not in inner.threads
    assert len(inner.loops) == 1
    assert id(asyncio.get_running_loop()) not in inner.loops
    await store.close()
    assert inner.closed_on in inner.threads


async def test_errors_reach_the_caller_unchanged(tmp_path: Path) -> None:
    store = LoopThreadAsyncObjectStore(LocalAsyncObjectStore(tmp_path))
    try:
        with pytest.raises(ObjectNotFound):
            await store.get("missing")
        await store.put("a/b", b"v")
        assert await store.get("a/b") == b"v"
    finally:
        await store.close()


async def test_cancelling_the_caller_cancels_the_request_on_the_store_loop() -> None:
    inner = ThreadRecordingStore()
    store = LoopThreadAsyncObjectStore(inner)
    waiter = asyncio.create_task(store.get("slow"))
    assert await asyncio.to_thread(inner.slow_started.wait, 5)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await asyncio.to_thread(inner.cancelled.wait, 5)
    await store.close()


async def test_close_stops_the_thread_and_later_calls_are_refused() -> None:
    inner = ThreadRecordingStore()
    store = LoopThreadAsyncObjectStore(inner, thread_name="test-store-loop")
    await store.put("k", b"v")
    assert any(t.name == "test-store-loop" for t in threading.enumerate())
    await store.close()
    await store.close()  # idempotent
    assert not any(t.name == "test-store-loop" for t in threading.enumerate())
    with pytest.raises(RuntimeError, match="closed"):
        await store.get("k")
    with pytest.raises(RuntimeError, match="closed"):
        await store.open()


async def test_a_store_never_used_starts_no_thread() -> None:
    inner = ThreadRecordingStore()
    store = LoopThreadAsyncObjectStore(inner, thread_name="never-started-loop")
    await store.close()
    assert not any(t.name == "never-started-loop" for t in threading.enumerate())
    assert inner.closed_on is None
