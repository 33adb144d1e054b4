"""Operations: liveness, readiness (the metadata store answers) and Prometheus metrics.

``/readyz`` tells why the agent is not ready (the metadata store's error, which says where the store is)
only to a principal that may describe the cluster; an anonymous caller gets the same status and code
without the detail."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agents.permissions import CLUSTER, route
from api import authz, models
from api.routes.common import CtxDep
from storage.errors import Unavailable

router = APIRouter()
_DETAIL = route("GET", "/readyz").need(CLUSTER)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"model": models.ErrorOut}})
async def readyz(http: Request, ctx: CtxDep) -> dict[str, str]:
    try:
        await asyncio.to_thread(ctx.metadata.list_topics)  # raises Unavailable (503) if metadata is down
    except Unavailable as exc:
        if authz.may(http, _DETAIL):
            raise
        raise Unavailable("not ready: the metadata store does not answer") from exc
    return {"status": "ready"}


@router.get("/metrics", include_in_schema=False)
async def metrics(ctx: CtxDep) -> Response:
    return Response(generate_latest(ctx.metrics.registry), media_type=CONTENT_TYPE_LATEST)
