"""A multi-partition fetch looks chunks up a page at a time (agents/fetch.py, ``_read_batches_many``).

The first page is small; a partition gets a second only when it would take every chunk of the first, so a
fetch that may read few files builds few chunk rows, and one that may read many still gets them all.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from agents.agent import Agent, AgentConfig
from agents.buffer import PartitionBatch, ProduceRequest
from agents.chunks import BatchesResult, BatchRead
from agents.fetch import FIRST_CHUNKS_PER_PARTITION, MAX_CHUNKS_PER_FETCH
from agents.metrics import Metrics
from agents.offsets import FIRST_RECORD
from storage import records
from storage.clock import SkewedClock, SystemClock
from storage.metadata import open_metadata_store
from storage.metadata.base import MetadataStore
from storage.metadata.rows import ChunkRow
from storage.objectstore.local import LocalAsyncObjectStore

pytestmark = pytest.mark.integration


class CountedLookups:
    """The metadata store, with the ``limit`` of every ``find_chunks`` call recorded."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.limits: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        self.limits.append(limit)
        return self.inner.find_chunks(topic, partition, offset, limit)


async def _agent_with_flushes(tmp_path: Path, flushes: int, cache_bytes: int) -> tuple[Agent, CountedLookups]:
    """An agent whose partition 0 of topic "t" holds ``flushes`` chunks of one record each."""
    metadata = CountedLookups(open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}"))
    metadata.create_topic("t", 2, {}, 0)
    store = LocalAsyncObjectStore(tmp_path / "bucket")
    config = AgentConfig(flush_interval_ms=10, flush_idle_ms=0, cache_bytes=cache_bytes)
    agent = Agent(config, store, metadata, Metrics(store.counters), SystemClock(), random.Random(1))  # type: ignore[arg-type]
    await agent.start()
    for i in range(flushes):
        batch = records.encode_batch([records.Record(0, 1000 + i, b"k", b"v%d" % i)])
        request = ProduceRequest(
            "t", [PartitionBatch("t", 0, memoryview(batch), 1, 1000, 1000)], FIRST_RECORD
        )
        await agent.enqueue(request, agent.buffer.reserve(request.size))  # one flush each
    return agent, metadata


def _offsets(result: BatchesResult | Exception) -> list[int]:
    """The absolute offsets of the records served: each batch as the Fetch answer carries it."""
    assert isinstance(result, BatchesResult), result
    served = bytearray()
    for batch, base in result.batches:
        position = len(served)
        served += batch
        records.set_base_offset(served, position, base)
    return [r.offset for r in records.decode_records(served)]


async def test_a_fetch_that_takes_the_whole_first_page_gets_a_second(tmp_path: Path) -> None:
    flushes = FIRST_CHUNKS_PER_PARTITION * 2 + 3
    agent, metadata = await _agent_with_flushes(tmp_path, flushes, cache_bytes=64 << 20)
    try:
        metadata.limits.clear()
        (result,) = await agent.fetcher.read_batches_many([BatchRead("t", 0, 0, 1 << 20)], 1 << 20)
        assert _offsets(result) == list(range(flushes))
        assert metadata.limits == [
            FIRST_CHUNKS_PER_PARTITION,
            MAX_CHUNKS_PER_FETCH - FIRST_CHUNKS_PER_PARTITION,
        ]
    finally:
        await agent.close()


async def test_a_fetch_within_its_first_page_looks_up_once(tmp_path: Path) -> None:
    flushes = FIRST_CHUNKS_PER_PARTITION * 2
    agent, metadata = await _agent_with_flushes(tmp_path, flushes, cache_bytes=64 << 20)
    try:
        metadata.limits.clear()
        # Near the end: fewer chunks than a page remain.
        start = flushes - 5
        (result,) = await agent.fetcher.read_batches_many([BatchRead("t", 0, start, 1 << 20)], 1 << 20)
        assert _offsets(result) == list(range(start, flushes))
        # A small max_bytes: the first page holds more than the fetch takes.
        (small,) = await agent.fetcher.read_batches_many([BatchRead("t", 0, 0, 1)], 1)
        assert _offsets(small) == [0]
        # Partition 1 is empty: its lookup stops at the high watermark, with no chunk query at all.
        (empty,) = await agent.fetcher.read_batches_many([BatchRead("t", 1, 0, 1 << 20)], 1 << 20)
        assert _offsets(empty) == []
        assert metadata.limits == [FIRST_CHUNKS_PER_PARTITION, FIRST_CHUNKS_PER_PARTITION]
    finally:
        await agent.close()


async def test_every_fetch_serves_some_partition_when_key_order_disagrees_with_offsets(
    tmp_path: Path,
) -> None:
    """Object keys sort by creation time, which is only roughly offset order (two flushes in one
    millisecond, a wall clock stepped back). Here every flush's key sorts before the one written before
    it, so the oldest files by key hold the latest offsets; admission must still admit some partition's
    next file, or no fetch would ever serve anything."""
    metadata = CountedLookups(open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}"))
    metadata.create_topic("t", 2, {}, 0)
    store = LocalAsyncObjectStore(tmp_path / "bucket")
    clock = SkewedClock()
    # Files of ~2.2 KiB read whole; half the cache admits two uncached files per fetch.
    config = AgentConfig(flush_interval_ms=10, flush_idle_ms=0, cache_bytes=10_000)
    agent = Agent(config, store, metadata, Metrics(store.counters), clock, random.Random(1))  # type: ignore[arg-type]
    await agent.start()
    flushes = 12
    try:
        for _ in range(flushes):
            clock.advance(-10)  # this flush's key sorts before every earlier one
            batches = [
                PartitionBatch(
                    "t",
                    p,
                    memoryview(records.encode_batch([records.Record(0, 1000, b"k", b"v" * 1000)])),
                    1,
                    1000,
                    1000,
                )
                for p in (0, 1)
            ]
            request = ProduceRequest("t", batches, FIRST_RECORD)
            await agent.enqueue(request, agent.buffer.reserve(request.size))
        position = [0, 0]
        for _ in range(4 * flushes):
            if position == [flushes, flushes]:
                break
            results = await agent.fetcher.read_batches_many(
                [BatchRead("t", p, position[p], 1 << 20) for p in (0, 1)], 1 << 20
            )
            got = [_offsets(r) for r in results]
            assert any(got), f"a fetch at {position} served nothing"
            for p in (0, 1):
                if got[p]:
                    assert got[p][0] == position[p]
                    position[p] = got[p][-1] + 1
        assert position == [flushes, flushes]
    finally:
        await agent.close()
