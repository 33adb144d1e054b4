"""Assembling a Strata process from settings: stores, metadata, agent. Components can be injected."""

from __future__ import annotations

import asyncio
import os
import random
import socket
from dataclasses import dataclass, field

from agents.agent import Agent, AgentConfig
from agents.metrics import Metrics
from api.settings import Settings
from planner.planner import PlannerConfig
from planner.service import Compactor, CompactorConfig
from planner.worker import WorkerConfig
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
    rng: random.Random = field(default_factory=random.Random)
    # Set to run a background round now (the admin endpoint), instead of at the next interval.
    worker_wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    _compactor: Compactor | None = None

    def compactor(self) -> Compactor:
        """The process's compaction worker, created on first use (it allocates the offset map)."""
        if self._compactor is None:
            self._compactor = Compactor(
                self.store,
                self.metadata,
                self.clock,
                self.rng,
                owner=f"{socket.gethostname()}:{os.getpid()}:{self.rng.getrandbits(32):08x}",
                config=compactor_config(self.settings),
                on_job=self.metrics.observe_job,
            )
        return self._compactor

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
        producer_id_expiration_ms=settings.producer_id_expiration_ms,
    )


def compactor_config(settings: Settings) -> CompactorConfig:
    defaults = PlannerConfig()
    return CompactorConfig(
        planner=PlannerConfig(
            merge_files=(settings.l0_merge_files, defaults.merge_files[1]),
            merge_bytes=defaults.merge_bytes,
            merge_age_ms=(settings.l0_merge_age_ms, defaults.merge_age_ms[1]),
        ),
        worker=WorkerConfig(
            map_bytes=settings.compaction_map_bytes,
            max_output_file_bytes=settings.compaction_file_bytes,
            lease_ms=settings.job_lease_ms,
        ),
        obsolete_grace_ms=settings.gc_grace_ms,
        orphan_grace_ms=settings.orphan_grace_ms,
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
    return Runtime(settings, clock, counters, store, astore, metadata, metrics, agent, rng)
