"""The cluster at a glance: the agents, the metadata store's health, the object store, and this agent's
recent metrics (throughput, produce latency, object-store requests and what they cost per month)."""

from __future__ import annotations

import asyncio
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request

from agents.metrics_history import LakePoint
from agents.permissions import CLUSTER, route
from api import authz
from api import console_models as out
from api.routes.common import ERRORS, CtxDep
from storage.errors import StrataError

router = APIRouter()
_CLUSTER = route("GET", "/v1/cluster").need(CLUSTER)
_HISTORY = route("GET", "/v1/metrics/history").need(CLUSTER)


@router.get("/v1/cluster", response_model=out.ClusterOut, responses=ERRORS)
async def cluster(http: Request, ctx: CtxDep) -> out.ClusterOut:
    """The agents, this one first, and the stores' state. A metadata store that does not answer is
    reported (``metadata.ok`` false, with the error's code), not raised: this is what an operator opens
    when something is wrong. DESCRIBE on the cluster."""
    authz.check(http, _CLUSTER)
    process = ctx.process
    kafka = ctx.kafka_listener()
    node_id = kafka.node_id if kafka is not None else process.node_id
    kafka_port = kafka.port if kafka is not None else None
    view = kafka.brokers if kafka is not None else None
    brokers = view if view is not None else [(node_id, process.host, kafka_port or -1)]
    started = ctx.clock.monotonic()
    try:
        topics: int | None = len(await asyncio.to_thread(ctx.metadata.list_topics))
        health = out.MetadataHealthOut(
            backend=_backend(ctx.metadata.url),
            ok=True,
            latency_ms=round((ctx.clock.monotonic() - started) * 1000, 3),
        )
    except StrataError as exc:
        topics = None
        health = out.MetadataHealthOut(
            backend=_backend(ctx.metadata.url),
            ok=False,
            latency_ms=None,
            error_code=exc.code,
            message=exc.message,
        )
    bucket = process.bucket_url
    return out.ClusterOut(
        this_agent=out.ThisAgentOut(
            node_id=node_id,
            host=process.host,
            http_port=process.http_port,
            kafka_port=kafka_port,
            role=process.role,
        ),
        cluster_mode=view is not None,
        agents=[out.AgentOut(node_id=n, host=h, port=p) for n, h, p in brokers],
        topics=topics,
        metadata=health,
        object_store=out.ObjectStoreOut(
            kind="s3" if urlsplit(bucket).scheme == "s3" else "file", bucket=bucket
        ),
    )


def _backend(url: str) -> str:
    return "postgresql" if urlsplit(url).scheme.startswith("postgres") else "sqlite"


@router.get("/v1/metrics/history", response_model=out.MetricsHistoryOut, responses=ERRORS)
async def metrics_history(
    http: Request, ctx: CtxDep, since_ms: Annotated[int, Query(ge=0, le=2**62)] = 0
) -> out.MetricsHistoryOut:
    """This agent's metrics, one point per sampling interval (``--metrics-sample-ms``), oldest first, for
    the last 180 intervals, with what the lake adds across the cluster (``lake``). Request and storage cost
    are at the configured prices (S3 Standard list prices by default). DESCRIBE on the cluster."""
    authz.check(http, _HISTORY)
    history = ctx.history
    prices = history.prices
    return out.MetricsHistoryOut(
        interval_ms=history.interval_ms,
        prices=out.PricesOut(
            put_per_1000=prices.put_per_1000,
            get_per_1000=prices.get_per_1000,
            storage_per_gb_month=prices.storage_per_gb_month,
        ),
        points=[
            out.MetricsPointOut(
                ts_ms=p.ts_ms,
                produce_mib_s=round(p.produce_mib_s, 4),
                fetch_mib_s=round(p.fetch_mib_s, 4),
                produce_p50_ms=None if p.produce_p50_ms is None else round(p.produce_p50_ms, 2),
                produce_p99_ms=None if p.produce_p99_ms is None else round(p.produce_p99_ms, 2),
                puts_per_s=round(p.puts_per_s, 4),
                gets_per_s=round(p.gets_per_s, 4),
                monthly_cost_usd=round(p.monthly_cost_usd, 4),
                flush_puts_per_s={c: round(n, 4) for c, n in p.flush_puts_per_s.items()},
                flush_monthly_cost_usd={
                    c: round(prices.monthly_cost(n, 0.0), 4) for c, n in p.flush_puts_per_s.items()
                },
                lake=None if p.lake is None else _lake_point(p.lake),
            )
            for p in history.points(since_ms)
        ],
    )


def _lake_point(lake: LakePoint) -> out.LakePointOut:
    def rounded(v: float | None) -> float | None:
        return None if v is None else round(v, 4)

    return out.LakePointOut(
        puts_per_s=rounded(lake.puts_per_s),
        gets_per_s=rounded(lake.gets_per_s),
        monthly_cost_usd=rounded(lake.monthly_cost_usd),
        stored_bytes=lake.stored_bytes,
        stored_objects=lake.stored_objects,
        storage_monthly_usd=round(lake.storage_monthly_usd, 4),
    )
