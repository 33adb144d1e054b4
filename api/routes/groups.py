"""Consumer group offsets over HTTP (the same table the Kafka door's groups will use)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from api import models
from api.routes.common import ERRORS, RuntimeDep, group_id, topic_name
from api.runtime import Runtime

router = APIRouter()


@router.put("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
async def commit_offsets(
    runtime: RuntimeDep, group: str, body: models.GroupOffsetsIn
) -> models.GroupOffsetsOut:
    gid = group_id(group)
    triples = [(topic_name(o.topic), o.partition, o.offset) for o in body.offsets]
    await asyncio.to_thread(runtime.metadata.commit_group_offsets, gid, triples, runtime.clock.now_ms())
    return await _group_offsets(runtime, gid)


@router.get("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
async def read_offsets(runtime: RuntimeDep, group: str) -> models.GroupOffsetsOut:
    return await _group_offsets(runtime, group_id(group))


async def _group_offsets(runtime: Runtime, gid: str) -> models.GroupOffsetsOut:
    rows = await asyncio.to_thread(runtime.metadata.group_offsets, gid)
    return models.GroupOffsetsOut(
        group=gid,
        offsets=[models.GroupOffsetOut(topic=r.topic, partition=r.partition, offset=r.offset) for r in rows],
    )
