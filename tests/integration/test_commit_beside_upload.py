"""A flush's commit beside its upload (agents/flusher.py, ``UploadGate``).

On a local store, when a flush's turn has come before its upload starts, the commit's statements run while
the file is written and the transaction waits for the write before its COMMIT. The tests hold the write and
look at the SQLite database from outside: the commit's transaction has begun (it holds the write lock), yet
nothing of it is visible and no producer is answered until the file is durable; and a write that fails
rolls the commit back and leaves the partition as it was, still writable.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agents.agent import Agent, AgentConfig
from agents.encode import ProduceRecord
from agents.metrics import Metrics
from storage.clock import SystemClock
from storage.errors import ObjectStoreError, Unavailable
from storage.metadata import MetadataStore, open_metadata_store
from storage.objectstore.base import Body
from storage.objectstore.local import LocalAsyncObjectStore

pytestmark = pytest.mark.integration


class HeldStore(LocalAsyncObjectStore):
    """A local store whose PUTs wait for ``release``; with ``fail``, the first one then fails."""

    def __init__(self, root: Path, fail: bool = False) -> None:
        super().__init__(root)
        self.release = asyncio.Event()
        self.holding = asyncio.Event()
        self.fail = fail
        self.written: list[str] = []

    async def put(self, key: str, data: Body) -> None:
        self.holding.set()
        await self.release.wait()
        if self.fail:
            self.fail = False
            raise ObjectStoreError("disk gone")
        await super().put(key, data)
        self.written.append(key)


def _write_locked(db: Path) -> bool:
    """Whether another connection holds the database's write lock (a write transaction is open)."""
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return True
    finally:
        conn.close()


async def _until_write_locked(db: Path) -> None:
    for _ in range(1000):  # about 10 s
        if await asyncio.to_thread(_write_locked, db):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the flush's commit never began while its upload was held")


def _one_record(partition: int = 0) -> list[ProduceRecord]:
    return [ProduceRecord(None, b"v", partition=partition)]


@asynccontextmanager
async def _agent(store: LocalAsyncObjectStore, db: Path) -> AsyncIterator[tuple[Agent, MetadataStore]]:
    """An agent on ``store`` and a SQLite database at ``db`` with topic t of one partition; a held store's
    PUTs are released before the agent closes."""
    metadata = open_metadata_store(f"sqlite:///{db}")
    metadata.create_topic("t", 1, {}, 0)
    config = AgentConfig(flush_interval_ms=1)
    agent = Agent(config, store, metadata, Metrics(store.counters), SystemClock(), random.Random(3))
    await agent.start()
    try:
        yield agent, metadata
    finally:
        if isinstance(store, HeldStore):
            store.release.set()
        await agent.close()
        metadata.close()


async def test_the_commit_runs_beside_the_upload_and_commits_after_it(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = HeldStore(tmp_path / "bucket")
    async with _agent(store, db) as (agent, metadata):
        produced = asyncio.create_task(agent.produce_records("t", _one_record()))
        await asyncio.wait_for(store.holding.wait(), 10)
        # The file is not written, and the commit's transaction has begun beside the write.
        await _until_write_locked(db)
        await asyncio.sleep(0.1)
        assert await asyncio.to_thread(_write_locked, db), "the commit did not wait for its upload"
        assert not produced.done()
        assert metadata.partition_state("t", 0).high_watermark == 0
        assert store.written == []
        store.release.set()
        assert await asyncio.wait_for(produced, 10) == [(0, 0)]
        assert len(store.written) == 1
        assert metadata.partition_state("t", 0).high_watermark == 1
        assert metadata.known_object_keys(store.written) == set(store.written)


async def test_a_failed_upload_rolls_back_the_commit_beside_it(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = HeldStore(tmp_path / "bucket", fail=True)
    async with _agent(store, db) as (agent, metadata):
        produced = asyncio.create_task(agent.produce_records("t", _one_record()))
        await asyncio.wait_for(store.holding.wait(), 10)
        await _until_write_locked(db)
        store.release.set()
        with pytest.raises(Unavailable, match="upload failed: disk gone"):
            await asyncio.wait_for(produced, 10)
        assert not await asyncio.to_thread(_write_locked, db)
        assert metadata.partition_state("t", 0).high_watermark == 0
        assert store.written == []
        # Nothing of the failed flush is left in the way: the partition takes the next record at offset 0.
        assert await asyncio.wait_for(agent.produce_records("t", _one_record()), 10) == [(0, 0)]
        assert metadata.known_object_keys(store.written) == set(store.written)


class LateStore(LocalAsyncObjectStore):
    """A local store whose PUTs start their write a moment late, as a retried PUT does."""

    async def put(self, key: str, data: Body) -> None:
        await asyncio.sleep(0.05)
        await super().put(key, data)


async def test_a_late_upload_does_not_wait_for_a_thread_behind_its_commit(tmp_path: Path) -> None:
    """The commit beside an upload holds a worker thread (and its locks) until the write is done. With
    every default thread so taken, the write must still run: the local store's puts have threads of their
    own. Here the loop's default executor has one thread, and the put starts after the commit took it."""
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
    async with _agent(LateStore(tmp_path / "bucket"), tmp_path / "m.db") as (agent, _):
        assert await asyncio.wait_for(agent.produce_records("t", _one_record()), 10) == [(0, 0)]
