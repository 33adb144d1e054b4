"""Consumer group offsets over HTTP (the same table the Kafka door's groups will use)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request

from agents.principals import Op, Resource
from api import authz, models
from api.routes.common import ERRORS, RuntimeDep, group_id, topic_name
from api.runtime import Runtime

router = APIRouter()


@router.put("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
async def commit_offsets(
    http: Request, runtime: RuntimeDep, group: str, body: models.GroupOffsetsIn
) -> models.GroupOffsetsOut:
    """Set the group's offsets (Kafka's OffsetCommit without a member): read on the group and on every
    topic committed for; 409 (40909) while the group has active Kafka members."""
    gid = group_id(group)
    authz.check(http, Op.READ, Resource.GROUP, gid)
    triples = [(topic_name(o.topic), o.partition, o.offset) for o in body.offsets]
    for topic in sorted({t for t, _, _ in triples}):
        authz.check(http, Op.READ, Resource.TOPIC, topic)
    await runtime.agent.groups.commit_from_outside(gid, triples)
    return await _group_offsets(http, runtime, gid)


@router.get("/v1/groups/{group}/offsets", response_model=models.GroupOffsetsOut, responses=ERRORS)
async def read_offsets(http: Request, runtime: RuntimeDep, group: str) -> models.GroupOffsetsOut:
    """The group's offsets (Kafka's OffsetFetch): read on the group; topics the principal may not read
    are left out."""
    gid = group_id(group)
    authz.check(http, Op.READ, Resource.GROUP, gid)
    return await _group_offsets(http, runtime, gid)


async def _group_offsets(http: Request, runtime: Runtime, gid: str) -> models.GroupOffsetsOut:
    rows = await asyncio.to_thread(runtime.metadata.group_offsets, gid)
    return models.GroupOffsetsOut(
        group=gid,
        offsets=[
            models.GroupOffsetOut(topic=r.topic, partition=r.partition, offset=r.offset)
            for r in rows
            if authz.may(http, Op.READ, Resource.TOPIC, r.topic)
        ],
    )
