"""Running a Strata process: the HTTP agent, the background worker, or both (the embedded default)."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import logging

import uvicorn

from strata.http import http_app
from strata.loop import run_background_loop
from strata.runtime import build_runtime
from strata.settings import Settings, redact_password

log = logging.getLogger("strata.server")


def tune_gc() -> None:
    """Fewer, cheaper garbage collections for a server that holds many short-lived objects.

    Produce requests keep their parsed records alive while they wait ~250 ms for a flush, so the default
    thresholds run full collections of a large heap often, and each one stalls the event loop (a large
    share of the agent's CPU under load: docs/benchmarks.md). Start-up objects (modules, the app) are frozen
    out of every collection; the young-generation threshold is raised so collections run less often.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


# glibc's mallopt parameter number for the mmap threshold (malloc.h).
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


def tune_malloc() -> None:
    """Keep glibc's mmap threshold at its 128 KiB default instead of letting it rise.

    glibc serves allocations over the threshold with their own mmap, returned to the kernel on free. But
    freeing such a block raises the threshold to its size (up to 32 MiB), so after the first large request
    frame or flush file is freed, later ones of that size come from the heap, where they fragment it and
    stay resident: on the Kafka overload benchmark against moto S3, peak RSS was markedly lower with the
    threshold fixed (docs/benchmarks.md). Setting it with ``mallopt`` turns the adjustment off for the
    process; elsewhere than glibc this does nothing. The price is a page fault per 4 KiB of every such
    allocation when it is first written; the Kafka door's large frames, the bulk of them, are therefore
    taken from a bounded pool of buffers used again (broker/frame_pool.py).
    """
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return  # not glibc (or no shared libc): nothing to tune
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        log.warning("mallopt(M_MMAP_THRESHOLD) failed; memory may stay resident after load peaks")


def serve(settings: Settings) -> int:
    tune_malloc()
    runtime = build_runtime(settings)
    if settings.role == "worker":
        log.info(
            "strata worker: bucket %s, metadata %s",
            settings.bucket_url,
            redact_password(settings.metadata_url),
        )
        try:
            asyncio.run(run_background_loop(runtime))
        except KeyboardInterrupt:
            pass
        return 0
    app = http_app(runtime, with_worker=settings.role == "all", worker_process=settings.worker_process)
    kafka = f", Kafka on {settings.host}:{settings.kafka_port}" if runtime.kafka is not None else ""
    log.info(
        "strata %s on %s://%s:%d%s: bucket %s, metadata %s",
        settings.role,
        "https" if settings.tls_cert_file else "http",
        settings.host,
        settings.port,
        kafka,
        settings.bucket_url,
        redact_password(settings.metadata_url),
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=settings.access_log,
        lifespan="on",
        loop="uvloop",
        http="httptools",
        ws="none",  # no route is a WebSocket; "auto" would import the websockets library (5 MiB) for nothing
        # TLS with the Kafka listener's certificate and key (both or neither: BrokerConfig checks).
        ssl_certfile=settings.tls_cert_file,
        ssl_keyfile=settings.tls_key_file,
    )
    tune_gc()
    uvicorn.Server(config).run()
    return 0
