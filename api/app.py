"""The HTTP API (FastAPI). OpenAPI at /docs and /openapi.json.

Handlers translate between JSON and the agent's types and nothing more: validation of names and configs
lives in storage/, errors become responses in api/errors.py, and all state lives in the agent and stores.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import FastAPI, Header, Path, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api import models
from api.errors import error_response, install_error_handlers
from api.loop import run_background_loop
from api.middleware import RESERVATION, Admission, LimitsAndAuth
from api.responses import JSONBytes
from api.runtime import Runtime
from storage.errors import BadRequest, RecordTooLarge, StrataError
from storage.topic_config import (
    check_config_name,
    effective_configs,
    validate_configs,
    validate_topic_name,
)

MiB = 1024 * 1024
_GROUP_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_IDEMPOTENCY_KEY_RE = re.compile(r"[\x21-\x7e]{1,200}")

TopicPath = Annotated[str, Path(description="Topic name: [a-zA-Z0-9._-]{1,249}")]
PartitionPath = Annotated[int, Path(ge=0, le=2**31 - 1)]
ERRORS: dict[int | str, dict[str, object]] = {
    status: {"model": models.ErrorOut} for status in (400, 401, 404, 406, 409, 413, 422, 429, 500, 503)
}


def _topic(name: str) -> str:
    return validate_topic_name(name)


def _group(name: str) -> str:
    if not _GROUP_RE.fullmatch(name):
        raise BadRequest(f"invalid group id {name!r}: use 1-249 characters from [a-zA-Z0-9._-]")
    return name


def create_app(runtime: Runtime, *, with_worker: bool = False) -> FastAPI:
    settings = runtime.settings
    agent = runtime.agent
    meta = runtime.metadata

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

    app = FastAPI(
        title="Strata",
        version="0.1.0",
        description="A Kafka-style log service whose only durable data store is object storage.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.add_middleware(
        LimitsAndAuth,
        max_body_bytes=settings.max_request_bytes,
        tokens=settings.tokens,
        on_error=error_response,
        admission=Admission(agent.buffer.reserve, agent.buffer.unreserve),
    )

    async def topic_out(name: str) -> models.TopicOut:
        info = await asyncio.to_thread(meta.get_topic, name)
        stats = await asyncio.to_thread(meta.partition_stats, name)
        levels = await asyncio.to_thread(meta.level_stats, name)
        return models.TopicOut(
            name=info.name,
            configs=effective_configs(info.configs),
            partitions=[
                models.PartitionInfo(
                    partition=s.partition,
                    log_start_offset=s.log_start_offset,
                    high_watermark=s.high_watermark,
                    cleaned_offset=s.cleaned_offset,
                    dirty_ratio=round(s.dirty_bytes / s.live_bytes, 4) if s.live_bytes else 0.0,
                    live_bytes=s.live_bytes,
                    last_compaction_ms=s.last_compaction_ms,
                )
                for s in stats
            ],
            levels=[
                models.LevelInfo(level=level, files=files, bytes=nbytes)
                for level, (files, nbytes) in sorted(levels.items())
            ],
        )

    # --- topics -------------------------------------------------------------------------------------------
    @app.post("/v1/topics", status_code=201, response_model=models.TopicOut, responses=ERRORS)
    async def create_topic(body: models.TopicCreate) -> models.TopicOut:
        name = _topic(body.name)
        configs = validate_configs(body.configs)
        await asyncio.to_thread(meta.create_topic, name, body.partitions, configs, runtime.clock.now_ms())
        return await topic_out(name)

    @app.get("/v1/topics", response_model=models.TopicList)
    async def list_topics() -> models.TopicList:
        return models.TopicList(topics=await asyncio.to_thread(meta.list_topics))

    @app.get("/v1/topics/{topic}", response_model=models.TopicOut, responses=ERRORS)
    async def describe_topic(topic: TopicPath) -> models.TopicOut:
        return await topic_out(_topic(topic))

    @app.patch("/v1/topics/{topic}/configs", response_model=models.TopicOut, responses=ERRORS)
    async def patch_configs(topic: TopicPath, body: models.TopicConfigsPatch) -> models.TopicOut:
        name = _topic(topic)
        changes: dict[str, str | None] = dict(
            validate_configs({k: v for k, v in body.configs.items() if v is not None})
        )
        for key, value in body.configs.items():
            if value is None:
                changes[check_config_name(key)] = None  # reset to the default
        await asyncio.to_thread(meta.update_topic_configs, name, changes)
        agent.forget_topic(name)
        return await topic_out(name)

    @app.delete("/v1/topics/{topic}", status_code=204, responses=ERRORS)
    async def delete_topic(topic: TopicPath) -> Response:
        name = _topic(topic)
        await asyncio.to_thread(meta.delete_topic, name, runtime.clock.now_ms())
        agent.forget_topic(name)
        return Response(status_code=204)

    @app.post(
        "/v1/topics/{topic}/compact", status_code=202, response_model=models.CompactOut, responses=ERRORS
    )
    async def compact_topic(topic: TopicPath) -> models.CompactOut:
        """Plan compaction of the topic's compacted partitions now, whatever their dirty ratio.

        The jobs run on this process's worker (role all: woken at once) or on any worker process.
        """
        name = _topic(topic)
        await asyncio.to_thread(meta.get_topic, name)
        jobs = await asyncio.to_thread(runtime.planner().plan, name, True)
        runtime.worker_wakeup.set()
        return models.CompactOut(
            topic=name,
            planned=[
                models.PlannedJob(job_id=j.job_id, kind=j.kind, reason=str(j.spec.get("reason", "")))
                for j in jobs
            ],
        )

    # --- produce ------------------------------------------------------------------------------------------
    @app.post("/v1/topics/{topic}/records", response_model=models.ProduceOut, responses=ERRORS)
    async def produce(
        topic: TopicPath,
        body: models.ProduceIn,
        request: Request,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
    ) -> Response:
        def release() -> None:
            # The body is parsed: give back what the middleware reserved for it, so the encoded records
            # waiting for their flush are counted once, by the buffer.
            reserved = request.scope.pop(RESERVATION, 0)
            if reserved:
                agent.buffer.unreserve(reserved)

        try:
            return await _produce(topic, body, idempotency_key, release)
        finally:
            release()

    async def _produce(
        topic: str, body: models.ProduceIn, idempotency_key: str | None, release: Callable[[], None]
    ) -> Response:
        name = _topic(topic)
        if len(body.records) > settings.max_records_per_request:
            raise RecordTooLarge(
                f"{len(body.records)} records in one request; the limit is {settings.max_records_per_request}"
            )
        if idempotency_key is not None and not _IDEMPOTENCY_KEY_RE.fullmatch(idempotency_key):
            raise BadRequest("Idempotency-Key must be 1-200 printable ASCII characters")
        recs = models.to_produce_records(body)
        try:
            offsets = await agent.produce(name, recs, idempotency_key, before_buffering=release)
        except StrataError as exc:
            runtime.metrics.produce_requests.labels(str(exc.code)).inc()
            raise
        runtime.metrics.produce_requests.labels("ok").inc()
        return JSONBytes({"offsets": [{"partition": p, "offset": o} for p, o in offsets]})

    # --- fetch --------------------------------------------------------------------------------------------
    @app.get(
        "/v1/topics/{topic}/partitions/{partition}/records",
        response_model=models.FetchOut,
        responses={**ERRORS, 416: {"model": models.ErrorOut}},
    )
    async def fetch(
        topic: TopicPath,
        partition: PartitionPath,
        offset: Annotated[int, Query(le=models.MAX_OFFSET)] = 0,
        max_bytes: Annotated[int, Query(ge=1, le=64 * MiB)] = MiB,
        max_wait_ms: Annotated[int, Query(ge=0, le=60_000)] = 500,
        encoding: models.Encoding = "utf8",
    ) -> Response:
        name = _topic(topic)
        started = runtime.clock.monotonic()
        try:
            # A negative offset is out of range like any other: the fetcher checks it against the
            # partition's log start and high watermark and raises 41601 with the valid range.
            result = await agent.fetch(name, partition, offset, max_bytes, max_wait_ms)
            payload = {
                "records": [models.record_out(r, encoding) for r in result.records],
                "next_offset": result.next_offset,
                "high_watermark": result.high_watermark,
                "log_start_offset": result.log_start_offset,
            }
        except StrataError as exc:
            runtime.metrics.fetch_requests.labels(str(exc.code)).inc()
            raise
        runtime.metrics.fetch_requests.labels("ok").inc()
        runtime.metrics.fetch_records.inc(len(result.records))
        runtime.metrics.fetch_latency.observe(runtime.clock.monotonic() - started)
        return JSONBytes(payload)

    @app.get(
        "/v1/topics/{topic}/partitions/{partition}/offsets",
        response_model=models.OffsetsOut,
        responses=ERRORS,
    )
    async def offsets(topic: TopicPath, partition: PartitionPath) -> models.OffsetsOut:
        state = await asyncio.to_thread(meta.partition_state, _topic(topic), partition)
        return models.OffsetsOut(log_start_offset=state.log_start_offset, high_watermark=state.high_watermark)

    # --- consumer groups ----------------------------------------------------------------------------------
    @app.put("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
    async def commit_offsets(group: str, body: models.GroupOffsetsIn) -> models.GroupOffsetsOut:
        gid = _group(group)
        triples = [(_topic(o.topic), o.partition, o.offset) for o in body.offsets]
        await asyncio.to_thread(meta.commit_group_offsets, gid, triples, runtime.clock.now_ms())
        return await _group_offsets(gid)

    @app.get("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
    async def read_offsets(group: str) -> models.GroupOffsetsOut:
        return await _group_offsets(_group(group))

    async def _group_offsets(gid: str) -> models.GroupOffsetsOut:
        rows = await asyncio.to_thread(meta.group_offsets, gid)
        return models.GroupOffsetsOut(
            group=gid,
            offsets=[
                models.GroupOffsetOut(topic=r.topic, partition=r.partition, offset=r.offset) for r in rows
            ],
        )

    # --- operations ---------------------------------------------------------------------------------------
    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"model": models.ErrorOut}})
    async def readyz() -> dict[str, str]:
        await asyncio.to_thread(meta.list_topics)  # raises Unavailable (503) if metadata is down
        return {"status": "ready"}

    @app.get("/metrics", include_in_schema=False)
    async def metrics(_: Request) -> Response:
        return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
