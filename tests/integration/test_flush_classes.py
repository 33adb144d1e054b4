"""Flush classes on one agent (agents/flush_policy.py): a low-latency topic's records are flushed within
their bound whatever the standard interval, standard records buffered at that moment ride in the same file,
and each PUT counts under the class that cut it. Times here are wide (the interval is a minute) so that a
slow machine cannot make a test pass or fail by timing alone.
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
from storage.objectstore.base import Body
from storage.objectstore.local import LocalAsyncObjectStore
from storage.topic_config import FLUSH_CLASS, LOW_LATENCY, STANDARD

pytestmark = pytest.mark.integration

MINUTE_MS = 60_000


async def _agent(tmp_path: Path, config: AgentConfig) -> tuple[Agent, LocalAsyncObjectStore]:
    store = LocalAsyncObjectStore(tmp_path / "bucket")
    metadata = open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}")
    metadata.create_topic("std", 2, {}, 0)
    metadata.create_topic("fast", 2, {FLUSH_CLASS: LOW_LATENCY}, 0)
    metadata.create_topic("pinned", 2, {FLUSH_CLASS: STANDARD}, 0)
    agent = Agent(config, store, metadata, Metrics(store.counters), SystemClock(), random.Random(1))
    await agent.start()
    for topic in ("std", "fast", "pinned"):
        await agent.topic(topic)  # as the front doors do before they enqueue
    return agent, store


def _enqueue(agent: Agent, topic: str, partition: int = 0, value_bytes: int = 100) -> asyncio.Future[object]:
    batch = records.encode_batch([records.Record(0, 1000, b"k", b"v" * value_bytes)])
    request = ProduceRequest(
        topic, [PartitionBatch(topic, partition, memoryview(batch), 1, 1000, 1000)], FIRST_RECORD
    )
    return agent.enqueue(request, agent.buffer.reserve(request.size))  # type: ignore[return-value]


def _puts(agent: Agent, flush_class: str) -> float:
    value = agent.metrics.registry.get_sample_value("strata_flush_puts_total", {"class": flush_class})
    assert value is not None
    return value


async def test_low_latency_cuts_at_its_bound_and_standard_rides_along(tmp_path: Path) -> None:
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=0, low_latency_ms=50)
    agent, store = await _agent(tmp_path, config)
    try:
        standard = _enqueue(agent, "std")
        await asyncio.sleep(0.5)  # ten low-latency bounds: a standard record alone waits for the minute
        assert not standard.done()
        fast = [_enqueue(agent, "fast", p) for p in (0, 1, 0)]  # within one bound: one file
        await asyncio.wait_for(asyncio.gather(standard, *fast), 10)
        assert store.counters.get("PUT") == 1
        assert (_puts(agent, LOW_LATENCY), _puts(agent, STANDARD)) == (1, 0)
    finally:
        await agent.close()


async def test_a_zero_bound_cuts_once_for_the_requests_of_one_turn(tmp_path: Path) -> None:
    # The local default (strata/settings.py): no timer, the cut comes at the flush loop's next turn, after
    # everything enqueued in this one, so those requests share one file; a later one gets a file of its own.
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=0, low_latency_ms=0)
    agent, store = await _agent(tmp_path, config)
    try:
        together = [_enqueue(agent, "fast", p) for p in (0, 1, 0)] + [_enqueue(agent, "std")]
        await asyncio.wait_for(asyncio.gather(*together), 10)
        assert store.counters.get("PUT") == 1
        await asyncio.wait_for(_enqueue(agent, "fast"), 10)
        assert store.counters.get("PUT") == 2
        assert (_puts(agent, LOW_LATENCY), _puts(agent, STANDARD)) == (2, 0)
    finally:
        await agent.close()


async def test_the_agent_default_class_applies_to_topics_without_one(tmp_path: Path) -> None:
    config = AgentConfig(
        flush_interval_ms=MINUTE_MS, flush_idle_ms=0, low_latency_ms=20, default_flush_class=LOW_LATENCY
    )
    agent, _ = await _agent(tmp_path, config)
    try:
        await asyncio.wait_for(_enqueue(agent, "std"), 10)  # no class of its own: the agent's
        pinned = _enqueue(agent, "pinned")  # standard by its own config
        await asyncio.sleep(0.5)
        assert not pinned.done()
        assert agent.config_defaults == {FLUSH_CLASS: LOW_LATENCY}
    finally:
        await agent.close()
    assert (_puts(agent, LOW_LATENCY), _puts(agent, STANDARD)) == (1, 1)  # close flushed the pinned one


def test_an_unknown_default_class_is_refused() -> None:
    with pytest.raises(SettingsError, match="STRATA_FLUSH_CLASS"):
        AgentConfig(default_flush_class="fastest")
    with pytest.raises(SettingsError, match="STRATA_LOW_LATENCY_MS"):
        AgentConfig(low_latency_ms=-1)


class GatedStore(LocalAsyncObjectStore):
    """A local store whose PUTs wait for ``gate``: flushes stay in flight until the test opens it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = asyncio.Event()
        self.started = 0
        self._began = asyncio.Event()

    async def put(self, key: str, data: Body) -> None:
        self.started += 1
        self._began.set()
        await self.gate.wait()
        await super().put(key, data)

    async def wait_started(self, n: int) -> None:
        async with asyncio.timeout(10):
            while self.started < n:
                self._began.clear()
                await self._began.wait()


async def test_a_low_latency_cut_overlaps_a_flush_in_flight_only_with_enough_bytes(tmp_path: Path) -> None:
    config = AgentConfig(flush_interval_ms=MINUTE_MS, flush_idle_ms=0, low_latency_ms=1)
    store = GatedStore(tmp_path / "bucket")
    metadata = open_metadata_store(f"sqlite:///{tmp_path / 'm.db'}")
    metadata.create_topic("fast", 1, {FLUSH_CLASS: LOW_LATENCY}, 0)
    agent = Agent(config, store, metadata, Metrics(store.counters), SystemClock(), random.Random(1))
    await agent.start()
    try:
        await agent.topic("fast")
        first = _enqueue(agent, "fast")
        await store.wait_started(1)
        # One flush in flight: a small low-latency record waits for it rather than cutting a tiny second.
        small = _enqueue(agent, "fast")
        await asyncio.sleep(0.2)  # two hundred bounds
        assert store.started == 1
        # Enough bytes for a flush of their own: the second cut overlaps the first.
        big = [_enqueue(agent, "fast", value_bytes=256 << 10) for _ in range(8)]
        await store.wait_started(2)
        store.gate.set()
        await asyncio.wait_for(asyncio.gather(first, small, *big), 10)
        assert store.started == 2
    finally:
        store.gate.set()
        await agent.close()
