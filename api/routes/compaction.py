"""Compaction and sizes: the job list with each job's report, per-partition detail, and a topic's dirty
ratio over time with what compaction removed.

Every answer is bounded by its page, whatever the number of jobs or partitions (the metadata queries are
index range scans: ``storage/metadata/sql/stats.py``). Permissions are describe, as for
``GET /v1/topics/{topic}``: a job is listed only if the caller may describe every topic it touches.
The history is what the compaction rounds sampled (``planner/samples.py``); this module never computes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request

from agents.permissions import TOPIC, route
from api import authz
from api import compaction_models as out
from api.routes.common import ERRORS, CtxDep, TopicPath, topic_name
from storage.errors import UnknownTopic
from storage.metadata.base import StatsReader
from storage.metadata.rows import Job
from storage.topic_config import MAX_PARTITIONS, TopicConfig

router = APIRouter()
_JOBS = route("GET", "/v1/compaction/jobs").need(TOPIC)
_PARTITIONS = route("GET", "/v1/topics/{topic}/partitions").need(TOPIC)
_COMPACTION = route("GET", "/v1/topics/{topic}/compaction").need(TOPIC)

# A job page filtered by permissions reads at most this many pages of jobs; past that it answers with
# what it found and a cursor, so a caller who may see few topics never makes one request scan every job.
MAX_JOB_SCANS = 10
HISTORY_MS = 24 * 3_600_000  # the default window of a topic's history: as long as samples are kept
MAX_REMOVALS = 1000
MAX_MS = 2**63 - 1  # query values beyond a BIGINT are clamped, never handed to the database


@router.get("/v1/compaction/jobs", response_model=out.JobListOut, responses=ERRORS)
async def list_jobs(
    http: Request,
    ctx: CtxDep,
    state: Annotated[out.JobState | None, Query(description="running: leased by a worker")] = None,
    topic: Annotated[str | None, Query(description="only jobs touching this topic")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    before: Annotated[int | None, Query(ge=1, description="only jobs with a smaller job_id")] = None,
) -> out.JobListOut:
    """Compaction jobs, newest first, each with the report of its last attempt (``stats`` and the
    worker's one-line summary) once it finished or was interrupted."""
    name = None
    if topic is not None:
        name = topic_name(topic)
        authz.check(http, _JOBS, name)
    stored_state = out.STORED_STATES[state] if state is not None else None
    bound = None if before is None else min(before, MAX_MS)

    def visible(job: Job) -> bool:
        return all(authz.may(http, _JOBS, t) for t in job.topics)

    jobs, next_before = await asyncio.to_thread(
        _page_of_jobs, ctx.metadata, visible, stored_state, name, bound, limit
    )
    return out.JobListOut(jobs=[out.job_out(j) for j in jobs], next_before=next_before)


def _page_of_jobs(
    meta: StatsReader,
    visible: Callable[[Job], bool],
    state: str | None,
    topic: str | None,
    before: int | None,
    limit: int,
) -> tuple[list[Job], int | None]:
    """Up to ``limit`` visible jobs with job_id < ``before``, and the cursor of the next page: None once
    every job was examined."""
    found: list[Job] = []
    cursor = before
    for _ in range(MAX_JOB_SCANS):
        # One row more than a page: whether anything follows is known without another request.
        page = meta.list_jobs(state, topic, cursor, limit + 1)
        for job in page:
            if len(found) == limit:
                return found, cursor  # ``job`` is not examined yet: the next page starts there
            cursor = job.job_id
            if visible(job):
                found.append(job)
        if len(page) <= limit:
            return found, None
    return found, cursor


@router.get("/v1/topics/{topic}/partitions", response_model=out.PartitionListOut, responses=ERRORS)
async def list_partitions(
    http: Request,
    ctx: CtxDep,
    topic: TopicPath,
    after: Annotated[
        int, Query(ge=-1, le=MAX_PARTITIONS, description="the last partition of the page before")
    ] = -1,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> out.PartitionListOut:
    """The topic's partitions ``after + 1`` on: offsets, live records and bytes, bytes by level, the dirty
    ratio (compacted topics) and the last compaction."""
    name = topic_name(topic)
    authz.check(http, _PARTITIONS, name)
    meta = ctx.metadata
    info = await asyncio.to_thread(meta.get_topic, name)
    details = await asyncio.to_thread(meta.partition_details, name, after, limit)
    compacted = TopicConfig.from_overrides(info.configs).compacted
    last = details[-1].stats.partition if details else None
    return out.PartitionListOut(
        topic=name,
        partitions=[out.partition_out(d, compacted) for d in details],
        next_after=last if last is not None and last < info.partitions - 1 else None,
    )


@router.get("/v1/topics/{topic}/compaction", response_model=out.TopicCompactionOut, responses=ERRORS)
async def topic_compaction(
    http: Request,
    ctx: CtxDep,
    topic: TopicPath,
    since_ms: Annotated[int | None, Query(ge=0, description="default: 24 hours ago")] = None,
) -> out.TopicCompactionOut:
    """The dirty ratio now and as the compaction rounds sampled it since ``since_ms``, and the jobs that
    removed records of the topic since then (bytes and records each removed)."""
    name = topic_name(topic)
    authz.check(http, _COMPACTION, name)
    now = ctx.clock.now_ms()
    since = now - HISTORY_MS if since_ms is None else min(since_ms, MAX_MS)
    meta = ctx.metadata

    def read() -> out.TopicCompactionOut:
        summaries = meta.topic_summaries([name])
        if not summaries:
            raise UnknownTopic(f"unknown topic {name!r}")
        (summary,) = summaries
        # A topic deleted and created again under its name starts a history of its own.
        start = max(since, summary.created_ms)
        current = out.summary_out(summary)
        return out.TopicCompactionOut(
            topic=name,
            cleanup_policy=current.cleanup_policy,
            dirty_ratio=current.dirty_ratio,
            history=[out.sample_out(s) for s in meta.dirty_samples(name, start)],
            removed=[out.removal_out(r) for r in meta.job_removals(name, start, MAX_REMOVALS)],
        )

    return await asyncio.to_thread(read)
