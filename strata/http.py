"""The HTTP door of a Strata process: ``create_app`` on the runtime's context, with a lifespan that starts
and stops the runtime, and runs the background loop beside it in role ``all``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.app import create_app
from strata.loop import run_background_loop
from strata.runtime import Runtime


def http_app(runtime: Runtime, *, with_worker: bool = False) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        worker = asyncio.create_task(run_background_loop(runtime)) if with_worker else None
        try:
            yield
        finally:
            if worker is not None:
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
            await runtime.close()

    return create_app(runtime.http_context(), lifespan)
