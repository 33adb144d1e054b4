"""Operations: liveness, readiness (the metadata store answers) and Prometheus metrics."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api import models
from api.routes.common import CtxDep

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"model": models.ErrorOut}})
async def readyz(ctx: CtxDep) -> dict[str, str]:
    await asyncio.to_thread(ctx.metadata.list_topics)  # raises Unavailable (503) if metadata is down
    return {"status": "ready"}


@router.get("/metrics", include_in_schema=False)
async def metrics(ctx: CtxDep) -> Response:
    return Response(generate_latest(ctx.metrics.registry), media_type=CONTENT_TYPE_LATEST)
