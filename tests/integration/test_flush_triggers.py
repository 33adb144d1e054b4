"""The agent's flush triggers: the interval, the size, and the idle cut (agents/agent.py, AgentConfig).

The idle cut lets producers that wait for their acks get them without waiting out the interval, while a
trickle below ``flush_idle_bytes``, or a stream that keeps arriving, is still batched. Times here are
wide (the interval is a minute) so that a slow machine cannot make a test pass or fail by timing alone.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from agents.agent import Agent, AgentConfig
from agents.buffer import PartitionBatch, ProduceRequest
from agents.metrics import Metrics
from agents.offsets import FIRST_RECORD
from storage import records
from storage.clock import SystemClock
from storage.errors import SettingsError
from storage.metadata import open_metadata_store
from storage.objectstore.local import LocalAsyncObjectStore

pytestmark = pytest.mark.integration

MINUTE_MS = 60_000


def _request(partition: int, value_bytes: int) -> ProduceRequest:
    batch = records.encode_batch([records.Record(0, 1000, b"k", b"v" * value_bytes)])
    return ProduceRequest(
        "t", [PartitionBatch("t", partition, memoryview(batch), 1, 1000, 1000)], FIRST_RECORD
    )


async def _agent(tmp_path: Path, config: AgentConfig) -> tuple[Agent, LocalAsyncObjectStore]:
    store = LocalAsyncObjectStore(tmp_path / "bucket")
    metadata = open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}")
    metadata.create_topic("t", 4, {}, 0)
    agent = Agent(config, store, metadata, Metrics(store.counters), SystemClock(), random.Random(1))
    await agent.start()
    return agent, store


def _enqueue(agent: Agent, partition: int, value_bytes: int) -> asyncio.Future[list[tuple[int, int]]]:
    request = _request(partition, value_bytes)
    return agent.enqueue(request, agent.buffer.reserve(request.size))


async def test_idle_cut_flushes_a_buffer_that_stopped_growing(tmp_path: Path) -> None:
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=50, flush_idle_bytes=4000)
    agent, store = await _agent(tmp_path, config)
    try:
        small = _enqueue(agent, 0, 1000)
        await asyncio.sleep(0.5)  # ten idle periods: below flush_idle_bytes, the interval still applies
        assert not small.done()
        assert store.counters.get("PUT") == 0
        large = _enqueue(agent, 1, 4000)
        # Both requests, one file: the idle cut takes the whole buffer, long before the interval.
        assert list(await asyncio.wait_for(asyncio.gather(small, large), 10)) == [[(0, 0)], [(1, 0)]]
        assert store.counters.get("PUT") == 1
    finally:
        await agent.close()


async def test_no_idle_cut_while_requests_keep_arriving(tmp_path: Path) -> None:
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=400, flush_idle_bytes=1000)
    agent, store = await _agent(tmp_path, config)
    try:
        first = _enqueue(agent, 0, 2000)
        for i in range(10):  # one every 40 ms: gaps a tenth of the idle period
            await asyncio.sleep(0.04)
            assert not first.done(), f"cut while requests kept arriving (after request {i})"
            _enqueue(agent, i % 4, 100)
        await asyncio.wait_for(first, 10)  # then they stop, and the idle cut fires
        assert store.counters.get("PUT") == 1
    finally:
        await agent.close()


async def test_senders_waiting_cuts_without_the_quiet_period(tmp_path: Path) -> None:
    """A front door's word that its senders can send nothing more (broker/waiting.py) cuts at once, still
    only a buffer over the floor; the next append ends it."""
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=MINUTE_MS, flush_idle_bytes=4000)
    agent, store = await _agent(tmp_path, config)
    try:
        small = _enqueue(agent, 0, 1000)
        agent.senders_waiting()  # below the floor: nothing is cut
        await asyncio.sleep(0.3)
        assert not small.done()
        large = _enqueue(agent, 1, 4000)  # over the floor now, but the append ended the word
        await asyncio.sleep(0.3)
        assert not large.done()
        agent.senders_waiting()
        assert list(await asyncio.wait_for(asyncio.gather(small, large), 10)) == [[(0, 0)], [(1, 0)]]
        assert store.counters.get("PUT") == 1
    finally:
        await agent.close()


async def test_senders_waiting_does_nothing_with_the_idle_cut_off(tmp_path: Path) -> None:
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=0, flush_idle_bytes=1000)
    agent, store = await _agent(tmp_path, config)
    try:
        pending = _enqueue(agent, 0, 5000)
        agent.senders_waiting()
        await asyncio.sleep(0.3)
        assert not pending.done()
        assert store.counters.get("PUT") == 0
    finally:
        await agent.close()


async def test_idle_cut_off_leaves_the_interval(tmp_path: Path) -> None:
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=0, flush_idle_bytes=1000)
    agent, store = await _agent(tmp_path, config)
    try:
        pending = _enqueue(agent, 0, 5000)
        await asyncio.sleep(0.5)
        assert not pending.done()
        assert store.counters.get("PUT") == 0
    finally:
        await agent.close()
        assert pending.done()  # closing flushes what is buffered


@pytest.mark.parametrize(
    ("field", "value"),
    [("flush_idle_ms", -1), ("flush_idle_bytes", -1), ("flush_bytes", 0), ("flush_interval_ms", 0)],
)
def test_flush_settings_out_of_range_are_refused(field: str, value: int) -> None:
    with pytest.raises(SettingsError, match=field.upper()):
        AgentConfig(**{field: value})
