"""The background worker loop of a Strata process (role worker or all)."""

from __future__ import annotations

import asyncio
import logging

from api.runtime import Runtime
from planner.gc import OrphanCollector
from storage.errors import StrataError

log = logging.getLogger("strata.worker")

WORKER_INTERVAL_S = 30.0


async def run_worker(runtime: Runtime, interval_s: float = WORKER_INTERVAL_S) -> None:
    """Background jobs, forever: orphan GC. (Compaction and retention plug in here.)"""
    gc = OrphanCollector(runtime.store, runtime.metadata, runtime.clock, runtime.settings.orphan_grace_ms)
    while True:
        try:
            await asyncio.to_thread(gc.run_once)
        except StrataError as exc:
            log.warning("worker round failed (%d): %s", exc.code, exc.message)
        await runtime.clock.asleep(interval_s)
