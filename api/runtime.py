"""Assembling a Strata process from settings: stores, metadata, agent. Components can be injected."""

from __future__ import annotations

import random
from dataclasses import dataclass

from agents.agent import Agent, AgentConfig
from agents.metrics import Metrics
from api.settings import Settings
from storage.clock import Clock, SystemClock
from storage.metadata import open_metadata_store
from storage.metadata.base import MetadataStore
from storage.objectstore import open_async_object_store, open_object_store
from storage.objectstore.base import AsyncObjectStore, ObjectStore, RequestCounters


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    counters: RequestCounters
    store: ObjectStore
    astore: AsyncObjectStore
    metadata: MetadataStore
    metrics: Metrics
    agent: Agent

    async def start(self) -> None:
        await self.agent.start()

    async def close(self) -> None:
        await self.agent.close()
        await self.astore.close()
        self.store.close()
        self.metadata.close()


def agent_config(settings: Settings) -> AgentConfig:
    return AgentConfig(
        flush_interval_ms=settings.flush_interval_ms,
        flush_bytes=settings.flush_bytes,
        buffer_bytes=settings.buffer_bytes,
        cache_bytes=settings.cache_bytes,
        idempotency_window_ms=settings.idempotency_window_ms,
    )


def build_runtime(
    settings: Settings,
    *,
    clock: Clock | None = None,
    rng: random.Random | None = None,
    store: ObjectStore | None = None,
    astore: AsyncObjectStore | None = None,
    metadata: MetadataStore | None = None,
) -> Runtime:
    """Open everything the settings name, except components passed in (tests inject fault wrappers)."""
    clock = clock or SystemClock()
    rng = rng or random.Random()
    injected = astore or store
    counters = injected.counters if injected is not None else RequestCounters()
    if store is None:
        store = open_object_store(
            settings.bucket_url,
            endpoint_url=settings.s3_endpoint,
            region=settings.s3_region,
            counters=counters,
            clock=clock,
            rng=rng,
        )
    if astore is None:
        astore = open_async_object_store(
            settings.bucket_url,
            endpoint_url=settings.s3_endpoint,
            region=settings.s3_region,
            counters=counters,
            clock=clock,
            rng=rng,
        )
    if metadata is None:
        metadata = open_metadata_store(settings.metadata_url)
    metrics = Metrics(counters)
    agent = Agent(agent_config(settings), astore, metadata, metrics, clock, rng)
    return Runtime(settings, clock, counters, store, astore, metadata, metrics, agent)
