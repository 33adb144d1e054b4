"""The memory bound on the produce path: a request's bytes live no longer than the buffer counts them.

The buffer stops counting a request's bytes when its flush is done. If anything kept them alive after that
(as once happened: the flush loop's last local kept a whole flush's frames until the next cut), memory would
exceed the configured bound by up to a buffer's worth without the bound ever showing it.
"""

from __future__ import annotations

import asyncio
import gc
import random
import weakref
from pathlib import Path

import pytest

from agents.agent import Agent, AgentConfig
from agents.buffer import PartitionBatch, ProduceRequest
from agents.metrics import Metrics
from agents.offsets import FIRST_RECORD
from storage import records
from storage.clock import SystemClock
from storage.metadata import open_metadata_store
from storage.objectstore.local import LocalAsyncObjectStore

pytestmark = pytest.mark.integration


class Frame(bytearray):
    """A request frame that can be watched with a weak reference (a bytearray cannot)."""


async def test_a_flushed_requests_bytes_are_freed_when_its_flush_is_done(tmp_path: Path) -> None:
    store = LocalAsyncObjectStore(tmp_path / "bucket")
    metadata = open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}")
    metadata.create_topic("t", 2, {}, 0)
    agent = Agent(
        AgentConfig(flush_interval_ms=1),
        store,
        metadata,
        Metrics(store.counters),
        SystemClock(),
        random.Random(3),
    )
    await agent.start()
    try:
        watched = []
        futures = []
        for partition in (0, 1):
            batch = records.encode_batch([records.Record(0, 1000, b"k", b"v" * 100)])
            frame = Frame(b"header" + batch)  # as the Kafka door holds it: the batch is a view into its frame
            watched.append(weakref.ref(frame))
            data = memoryview(frame)[6:]
            request = ProduceRequest("t", [PartitionBatch("t", partition, data, 1, 1000, 1000)], FIRST_RECORD)
            futures.append(agent.enqueue(request, agent.buffer.reserve(len(batch))))
            del frame, data, request, batch
        assert [await asyncio.wait_for(f, 10) for f in futures] == [[(0, 0)], [(1, 0)]]
        for _ in range(1000):  # the flush ends after it answers: at most 10 s
            if not agent.buffer.bytes_held:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the flush task ends after it releases the bytes
        gc.disable()  # only references count: nothing may depend on a collection running
        try:
            assert [ref() for ref in watched] == [None, None]
        finally:
            gc.enable()
    finally:
        await agent.close()
        metadata.close()
