"""Topic administration: create, list, describe, alter configs, delete, and compact now."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from agents.permissions import CONFIGS, TOPIC, route
from api import authz, models
from api import compaction_models as cm
from api.context import HttpContext
from api.routes.common import ERRORS, CtxDep, TopicPath, topic_name
from storage.topic_config import check_aliases, check_config_name, effective_configs, validate_configs

router = APIRouter()
_T = "/v1/topics/{topic}"
_CREATE = route("POST", "/v1/topics").need(TOPIC)
_LIST = route("GET", "/v1/topics").need(TOPIC)
_DESCRIBE = route("GET", _T).need(TOPIC)
_DESCRIBE_CONFIGS = route("GET", _T).need(TOPIC, CONFIGS)
_ALTER_CONFIGS = route("PATCH", _T + "/configs").need(TOPIC)
_ADD_PARTITIONS = route("POST", _T + "/partitions").need(TOPIC)
_DELETE = route("DELETE", _T).need(TOPIC)
_COMPACT = route("POST", _T + "/compact").need(TOPIC)


async def topic_out(ctx: HttpContext, name: str, *, with_configs: bool = True) -> models.TopicOut:
    """The topic as the API shows it; ``with_configs`` false leaves its configs out (an empty object)."""
    meta = ctx.metadata
    info = await asyncio.to_thread(meta.get_topic, name)
    stats = await asyncio.to_thread(meta.partition_stats, name)
    stable = {s.partition: s.last_stable_offset for s in await asyncio.to_thread(meta.partition_states, name)}
    levels = await asyncio.to_thread(meta.level_stats, name)
    return models.TopicOut(
        name=info.name,
        configs=effective_configs(info.configs, info.name, ctx.agent.config_defaults) if with_configs else {},
        partitions=[
            models.PartitionInfo(
                partition=s.partition,
                log_start_offset=s.log_start_offset,
                high_watermark=s.high_watermark,
                last_stable_offset=stable.get(s.partition, s.high_watermark),
                cleaned_offset=s.cleaned_offset,
                dirty_ratio=cm.shown_ratio(s.dirty_bytes, s.live_bytes),
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


@router.post("/v1/topics", status_code=201, response_model=models.TopicOut, responses=ERRORS)
async def create_topic(http: Request, ctx: CtxDep, body: models.TopicCreate) -> models.TopicOut:
    name = topic_name(body.name)
    authz.check(http, _CREATE, name)
    configs = validate_configs(body.configs)
    now = ctx.clock.now_ms()
    await asyncio.to_thread(ctx.metadata.create_topic, name, body.partitions, configs, now)
    return await topic_out(ctx, name)


# A page of summaries when detail=true comes without a limit: summaries cost a scan of each topic's chunk
# rows, so they are never computed for every topic at once.
DETAIL_PAGE = 100


# exclude_unset: without paging parameters the body stays {"topics": [...]}, as before paging existed.
@router.get("/v1/topics", response_model=cm.TopicListOut, response_model_exclude_unset=True, responses=ERRORS)
async def list_topics(
    http: Request,
    ctx: CtxDep,
    prefix: Annotated[str | None, Query(max_length=249, description="only names starting with this")] = None,
    after: Annotated[str | None, Query(max_length=249, description="only names sorting after this")] = None,
    limit: Annotated[int | None, Query(ge=1, le=1000, description="page size (default: all names)")] = None,
    detail: Annotated[
        bool, Query(description=f"add a summary per topic of the page (page size {DETAIL_PAGE} by default)")
    ] = False,
) -> cm.TopicListOut:
    """The topics this principal may describe (as Kafka's Metadata lists only those),
    sorted by name (code points). With ``limit`` or ``detail``, one page of them and ``next_after``."""
    names = await asyncio.to_thread(ctx.metadata.list_topics)
    # Names only, filtered here: thousands of names are a small answer, and a page must count only the
    # names this principal may see. Summaries, which cost a scan per topic, are read for the page only.
    visible = [
        n
        for n in names
        if (prefix is None or n.startswith(prefix))
        and (after is None or n > after)
        and authz.may(http, _LIST, n)
    ]
    if limit is None and not detail:
        return cm.TopicListOut(topics=visible)
    size = limit or DETAIL_PAGE
    page = visible[:size]
    next_after = page[-1] if len(visible) > size else None
    if not detail:
        return cm.TopicListOut(topics=page, next_after=next_after)
    summaries = await asyncio.to_thread(ctx.metadata.topic_summaries, page)
    # Summaries come by name, as the page is; a topic deleted since the names were read has none and
    # leaves the page.
    return cm.TopicListOut(
        topics=[s.name for s in summaries],
        summaries=[cm.summary_out(s) for s in summaries],
        next_after=next_after,
    )


@router.get("/v1/topics/{topic}", response_model=models.TopicOut, responses=ERRORS)
async def describe_topic(http: Request, ctx: CtxDep, topic: TopicPath) -> models.TopicOut:
    name = topic_name(topic)
    authz.check(http, _DESCRIBE, name)
    # Configs only with DESCRIBE_CONFIGS, as Kafka's DescribeConfigs asks.
    return await topic_out(ctx, name, with_configs=authz.may(http, _DESCRIBE_CONFIGS, name))


@router.patch("/v1/topics/{topic}/configs", response_model=models.TopicOut, responses=ERRORS)
async def patch_configs(
    http: Request, ctx: CtxDep, topic: TopicPath, body: models.TopicConfigsPatch
) -> models.TopicOut:
    name = topic_name(topic)
    authz.check(http, _ALTER_CONFIGS, name)
    changes: dict[str, str | None] = dict(
        validate_configs({k: v for k, v in body.configs.items() if v is not None})
    )
    for key, value in body.configs.items():
        if value is None:
            changes[check_config_name(key)] = None  # reset to the default
    if any(key.startswith(("confluent.", "redpanda.")) for key in changes):
        # A schema config and its alias, one set now and one before, must agree (storage/topic_config.py).
        info = await asyncio.to_thread(ctx.metadata.get_topic, name)
        after = {**info.configs, **changes}
        check_aliases({k: v for k, v in after.items() if v is not None})
    await asyncio.to_thread(ctx.metadata.update_topic_configs, name, changes)
    ctx.agent.forget_topic(name)
    return await topic_out(ctx, name)


@router.post("/v1/topics/{topic}/partitions", response_model=models.TopicOut, responses=ERRORS)
async def add_partitions(
    http: Request, ctx: CtxDep, topic: TopicPath, body: models.PartitionsIncrease
) -> models.TopicOut:
    """Grow the topic to ``partitions`` partitions (Kafka's CreatePartitions): the count only grows.

    Keyed records produced afterwards are placed by murmur2 over the new count, as Kafka clients do.
    """
    name = topic_name(topic)
    authz.check(http, _ADD_PARTITIONS, name)
    await asyncio.to_thread(ctx.metadata.add_partitions, name, body.partitions)
    ctx.agent.forget_topic(name)
    return await topic_out(ctx, name)


@router.delete("/v1/topics/{topic}", status_code=204, responses=ERRORS)
async def delete_topic(http: Request, ctx: CtxDep, topic: TopicPath) -> Response:
    name = topic_name(topic)
    authz.check(http, _DELETE, name)
    await asyncio.to_thread(ctx.metadata.delete_topic, name, ctx.clock.now_ms())
    ctx.agent.forget_topic(name)
    return Response(status_code=204)


@router.post(
    "/v1/topics/{topic}/compact", status_code=202, response_model=models.CompactOut, responses=ERRORS
)
async def compact_topic(http: Request, ctx: CtxDep, topic: TopicPath) -> models.CompactOut:
    """Plan compaction of the topic's compacted partitions now, whatever their dirty ratio.

    The jobs run on this process's background loop (role all: woken at once) or on any worker process.
    """
    name = topic_name(topic)
    authz.check(http, _COMPACT, name)
    await asyncio.to_thread(ctx.metadata.get_topic, name)
    jobs = await ctx.compact_now(name)
    return models.CompactOut(
        topic=name,
        planned=[
            models.PlannedJob(job_id=j.job_id, kind=j.kind, reason=str(j.spec.get("reason", "")))
            for j in jobs
        ],
    )
