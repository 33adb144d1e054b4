"""The Iceberg catalog's app, and how the HTTP port serves it beside Strata's own.

``create_iceberg_app`` assembles a FastAPI app of its own (the spec's error bodies, api/iceberg/errors.py,
and its own door in front, api/iceberg/door.py) from an ``IcebergContext``. ``with_iceberg`` sends every
path under ``PREFIX`` to it, whole, before Strata's app and its middleware see it, as the schema registry's
prefix is served (api/registry/app.py): the catalog answers its own errors and its own authentication.
A client's catalog URI is therefore ``http://<agent>:<port>/iceberg``, and its config
``/iceberg/v1/config``.

No OpenAPI document or docs page is served: the paths are exactly the spec's.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from api.iceberg import catalog, tables, writes
from api.iceberg.context import IcebergContext
from api.iceberg.door import IcebergDoor
from api.iceberg.errors import install_error_handlers

# Where the HTTP port serves the catalog.
PREFIX = "/iceberg"


def create_iceberg_app(ctx: IcebergContext) -> FastAPI:
    app = FastAPI(
        title="Strata Iceberg REST catalog",
        description="The lake's tables, read-only, by the Apache Iceberg REST catalog API.",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
    )
    app.state.ctx = ctx
    install_error_handlers(app)
    app.add_middleware(IcebergDoor, security=ctx.security)
    for module in (catalog, tables, writes):
        app.include_router(module.router)
    return app


def with_iceberg(strata: ASGIApp, iceberg: ASGIApp, prefix: str = PREFIX) -> ASGIApp:
    """One app for the HTTP port: ``prefix`` and the paths under it to ``iceberg`` (its ``root_path``
    extended by the prefix, so it routes on what follows), everything else to ``strata``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            root: str = scope.get("root_path", "")
            path: str = scope["path"]
            rest = path[len(root) :] if path.startswith(root) else path
            if rest == prefix or rest.startswith(prefix + "/"):
                await iceberg({**scope, "root_path": root + prefix}, receive, send)
                return
        await strata(scope, receive, send)

    return app
