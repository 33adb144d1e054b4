"""The HTTP door of a Strata process: ``create_app`` on the runtime's context, with a lifespan that starts
and stops the runtime, and runs the background loop beside it in role ``all``: in a thread of this
process, or in a child process (``strata/worker_process.py``), which ``strata serve`` runs by default.

The schema registry's app (api/registry/) is served twice from here: under ``/schema-registry`` on the
HTTP port (``with_registry``), and at the root of its own port (strata/registry_listener.py), started
after the runtime and stopped before it, so that no registry request meets a closed metadata store. The
lake's read-only Iceberg REST catalog (api/iceberg/) is served under ``/iceberg`` on the HTTP port
(``with_iceberg``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp

from api.app import create_app
from api.iceberg.app import create_iceberg_app, with_iceberg
from api.registry.app import create_registry_app, with_registry
from strata.loop import run_background_loop
from strata.registry_listener import RegistryListener
from strata.runtime import Runtime
from strata.worker_process import WorkerProcess


def http_app(runtime: Runtime, *, with_worker: bool = False, worker_process: bool = False) -> ASGIApp:
    registry = create_registry_app(runtime.registry_context())
    port = runtime.settings.schema_registry_port
    listener = RegistryListener(registry, runtime.settings) if port >= 0 else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await runtime.start()
        try:
            if listener is not None:
                await listener.start()
                runtime.registry_listener = listener
            worker = None
            if with_worker:
                loop = WorkerProcess(runtime).run() if worker_process else run_background_loop(runtime)
                worker = asyncio.create_task(loop)
            try:
                yield
            finally:
                if worker is not None:
                    worker.cancel()
                    await asyncio.gather(worker, return_exceptions=True)
        finally:
            if listener is not None:
                runtime.registry_listener = None
                await listener.close()
            await runtime.close()

    strata = with_registry(create_app(runtime.http_context(), lifespan), registry)
    return with_iceberg(strata, create_iceberg_app(runtime.iceberg_context()))
