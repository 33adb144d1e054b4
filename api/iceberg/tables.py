"""The catalog's tables: ``GET /v1/namespaces/{namespace}/tables`` (a listing, filtered by DESCRIBE),
``GET /v1/namespaces/{namespace}/tables/{table}`` (the spec's LoadTableResult, READ) and ``HEAD`` on the
same path (whether it exists, DESCRIBE).

A permission is asked before the table is looked up, so a principal without it learns nothing, not even
whether the table exists (as Kafka answers TOPIC_AUTHORIZATION_FAILED for a topic one may not describe,
existing or not).

LoadTableResult is ``metadata-location`` (the current metadata file), ``metadata`` (its contents, parsed
and checked, api/iceberg/lake.py) and ``config`` (what a reader needs to reach the files). Its JSON is put
together here around the metadata's own text rather than parsed and dumped again: the metadata is the
bulk of the answer, and grows with every snapshot. The ``snapshots`` query and the access-delegation
header are read by no one: every snapshot is served, and no credentials are vended.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response

from agents.permissions import TABLE, iceberg_route
from api.iceberg import access
from api.iceberg.errors import NoSuchTable
from api.iceberg.paths import parse_namespace

router = APIRouter()

_NS = "/v1/namespaces/{namespace}"
_TB = _NS + "/tables/{table}"
_LIST = iceberg_route("GET", _NS + "/tables").need(TABLE)
_LOAD = iceberg_route("GET", _TB).need(TABLE)
_EXISTS = iceberg_route("HEAD", _TB).need(TABLE)


@router.get(_NS + "/tables")
async def list_tables(request: Request, namespace: str) -> dict[str, Any]:
    ns = parse_namespace(namespace)
    found = await asyncio.to_thread(access.context(request).lake.tables, ns)
    shown = access.visible(request, _LIST, found)
    return {"identifiers": [{"namespace": list(i[:-1]), "name": i[-1]} for i in shown]}


@router.get(_TB)
async def load_table(request: Request, namespace: str, table: str) -> Response:
    identifier = (*parse_namespace(namespace), table)
    access.check(request, _LOAD, access.table_name(identifier))
    ctx = access.context(request)
    loaded = await asyncio.to_thread(ctx.lake.load, identifier)
    body = b"".join(
        (
            b'{"metadata-location":',
            orjson.dumps(loaded.metadata_location),
            b',"metadata":',
            loaded.metadata_json.encode(),
            b',"config":',
            orjson.dumps(ctx.lake.reader_config()),
            b"}",
        )
    )
    return Response(body, media_type="application/json")


@router.head(_TB)
async def table_exists(request: Request, namespace: str, table: str) -> Response:
    identifier = (*parse_namespace(namespace), table)
    access.check(request, _EXISTS, access.table_name(identifier))
    # The catalog's rows alone: whether it exists needs no metadata file read.
    found = await asyncio.to_thread(access.context(request).lake.tables, identifier[:-1])
    if identifier not in found:
        raise NoSuchTable(f"Table does not exist: {access.table_name(identifier)}")
    return Response(status_code=204)
