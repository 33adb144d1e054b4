"""What the registry says about itself: the probes (``/``, Karapace's ``/_health`` and ``/master_available``),
its contexts and Confluent's ``/v1/metadata`` endpoints.

There is no primary: every agent serves every request from the shared metadata store, so
``/master_available`` is always true (Karapace's test suite polls it before it starts). ``/_health`` asks
the store one cheap question, so a load balancer stops sending to an agent whose store does not answer;
an anonymous caller learns only that, not the store's error. There is one context, the default (``.``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.registry import access
from api.registry.context import REGISTRY_CLUSTER
from api.registry.errors import RegistryJSON, error_response
from storage.errors import StrataError

router = APIRouter()


@router.get("/")
def root() -> dict[str, Any]:
    return {}


@router.get("/_health")
async def health(request: Request) -> Response:
    try:
        await asyncio.to_thread(access.context(request).registry.max_schema_id)
    except StrataError:
        return error_response(503, 50001, "the metadata store does not answer")
    return RegistryJSON({"healthy": True})


@router.get("/master_available")
def master_available() -> Response:
    return RegistryJSON({"master_available": True}, headers={"Cache-Control": "no-store"})


@router.get("/contexts")
def contexts() -> list[str]:
    return ["."]


@router.get("/v1/metadata/id")
def cluster_id(request: Request) -> dict[str, Any]:
    clusters = {
        "kafka-cluster": access.context(request).cluster_id,
        "schema-registry-cluster": REGISTRY_CLUSTER,
    }
    return {"scope": {"path": [], "clusters": clusters}}


@router.get("/v1/metadata/version")
def server_version(request: Request) -> dict[str, str]:
    return {"version": access.context(request).version, "commitId": ""}
