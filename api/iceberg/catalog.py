"""The catalog's config and its namespaces: ``GET /v1/config``, ``GET /v1/namespaces`` (with ``parent``),
``GET`` and ``HEAD /v1/namespaces/{namespace}``.

The config answers:
- ``defaults``: the properties a reader needs to reach the tables' files (the S3 endpoint, region and
  path-style addressing, api/iceberg/lake.py), which a client's own settings may replace;
- ``overrides``: none. In particular no ``prefix``: there is one warehouse, and the paths carry none;
- ``endpoints``: exactly the read routes served (the GET and HEAD entries of agents/permissions.py's
  ``ICEBERG`` table), so that a client knows the writes are not served before it tries one, and tries no
  view endpoint.
``warehouse`` (the query clients send from their config or, in DuckDB, the ATTACH string) may be absent or
empty, the catalog's name (``strata``) or the warehouse's location; anything else is 400, naming them, so
that a reader pointed at the wrong warehouse learns it at once.

No paging: every namespace is listed at once (the lake has a few), so no ``next-page-token`` is sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response

from agents.permissions import ICEBERG
from api.iceberg import access
from api.iceberg.errors import BadRequest
from api.iceberg.paths import parse_namespace

router = APIRouter()

# The read routes, as the spec's config lists endpoints ("<METHOD> /v1/{prefix}/...").
ENDPOINTS = sorted(
    f"{method} {path.replace('/v1/', '/v1/{prefix}/', 1)}"
    for method, path in ICEBERG
    if method in ("GET", "HEAD") and path != "/v1/config"
)


@router.get("/v1/config")
def config(request: Request, warehouse: str | None = None) -> dict[str, Any]:
    lake = access.context(request).lake
    if warehouse not in (None, "", lake.name, lake.warehouse):
        raise BadRequest(
            f"unknown warehouse {warehouse!r}: this catalog serves {lake.name!r} ({lake.warehouse})"
        )
    return {"defaults": lake.reader_config(), "overrides": {}, "endpoints": ENDPOINTS}


@router.get("/v1/namespaces")
async def list_namespaces(request: Request, parent: str | None = None) -> dict[str, Any]:
    under = parse_namespace(parent) if parent else ()
    found = await asyncio.to_thread(access.context(request).lake.namespaces, under)
    return {"namespaces": [list(ns) for ns in found]}


@router.get("/v1/namespaces/{namespace}")
async def load_namespace(request: Request, namespace: str) -> dict[str, Any]:
    ns = parse_namespace(namespace)
    properties = await asyncio.to_thread(access.context(request).lake.namespace_properties, ns)
    return {"namespace": list(ns), "properties": properties}


@router.head("/v1/namespaces/{namespace}")
async def namespace_exists(request: Request, namespace: str) -> Response:
    await asyncio.to_thread(access.context(request).lake.namespace_properties, parse_namespace(namespace))
    return Response(status_code=204)
