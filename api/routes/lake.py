"""The lake's status and its one action: every lake table, one topic's table, and "commit now".

Read from the metadata store (``storage/lake_status.py``): the HTTP door never imports the lake writer, and
a status costs no read of the table's files. Permissions: a status is the topic's DESCRIBE, as describing
the topic is (a listing leaves out the topics one may not describe); asking for a commit is the topic's
ALTER, as "compact now" is: it makes the worker do work now, and changes no data or config.

"Commit now" marks the table's row (``LakeStore.request_lake_commit``) and wakes this process's background
loop if it runs one; whichever worker runs the next lake round commits the table then, whatever its commit
interval. A lake-enabled topic the writer has not seen yet has no row: its first round commits it anyway.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request

from agents.permissions import TOPIC, route
from api import authz
from api import lake_models as out
from api.routes.common import ERRORS, CtxDep, TopicPath, topic_name
from storage.errors import LakeDisabled
from storage.lake_config import LakeTopicConfig
from storage.lake_status import lake_status, lake_statuses

router = APIRouter()
_T = "/v1/topics/{topic}/lake"
_LIST = route("GET", "/v1/lake").need(TOPIC)
_STATUS = route("GET", _T).need(TOPIC)
_COMMIT_NOW = route("POST", _T + "/commit-now").need(TOPIC)


@router.get("/v1/lake", response_model=out.LakeListOut, responses=ERRORS)
async def list_lake_tables(
    http: Request,
    ctx: CtxDep,
    after: Annotated[str | None, Query(max_length=249, description="only topics sorting after this")] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="page size")] = 100,
) -> out.LakeListOut:
    """The lake-enabled topics this principal may describe, by name (code points), with their tables'
    status: one page of ``limit``, and ``next_after`` while more follow."""
    now = ctx.clock.now_ms()
    # Names are filtered first (one query, no status): a page costs the statuses of its own topics only.
    topics = await asyncio.to_thread(ctx.metadata.lake_topics)
    visible = [t for t in topics if (after is None or t.name > after) and authz.may(http, _LIST, t.name)]
    page = visible[:limit]
    statuses = await asyncio.to_thread(lake_statuses, ctx.metadata, now, page)
    return out.LakeListOut(
        tables=[out.status_out(s, now) for s in statuses],
        next_after=page[-1].name if len(visible) > limit else None,
    )


@router.get(_T, response_model=out.LakeStatusOut, responses=ERRORS)
async def topic_lake(http: Request, ctx: CtxDep, topic: TopicPath) -> out.LakeStatusOut:
    """The topic's Iceberg table: mode, table, committed offsets and lag per partition, the last commit,
    the last run and its error, and whether a commit was asked for. Mode ``disabled``: no table."""
    name = topic_name(topic)
    authz.check(http, _STATUS, name)
    now = ctx.clock.now_ms()
    return out.status_out(await asyncio.to_thread(lake_status, ctx.metadata, name, now), now)


@router.post(_T + "/commit-now", status_code=202, response_model=out.LakeCommitOut, responses=ERRORS)
async def commit_now(http: Request, ctx: CtxDep, topic: TopicPath) -> out.LakeCommitOut:
    """Ask for the table's commit at the next lake round, whatever its commit interval, and wake this
    process's worker loop if it runs one. 422 (42230) when the topic's lake is disabled."""
    name = topic_name(topic)
    authz.check(http, _COMMIT_NOW, name)
    info = await asyncio.to_thread(ctx.metadata.get_topic, name)
    lake = LakeTopicConfig.from_overrides(info.name, info.configs)
    if not lake.enabled:
        raise LakeDisabled(f"topic {name!r} is not kept as an Iceberg table: set strata.iceberg.mode first")
    # False when the writer has no row for the topic yet: its next round commits the table anyway.
    await asyncio.to_thread(ctx.metadata.request_lake_commit, name)
    ctx.wake_worker()
    return out.LakeCommitOut(topic=name, table=lake.table, commit_requested=True)
