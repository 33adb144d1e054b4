"""The registry's app, and how the HTTP port serves it beside Strata's own.

``create_registry_app`` assembles a FastAPI app of its own (its own error bodies, its own door in front:
api/registry/door.py) from a ``RegistryContext``. The process serves it twice: at the root of its own port
(``--schema-registry-port``, Confluent's 8081), and under ``PREFIX`` on the HTTP port, where
``with_registry`` sends every path under the prefix to it, whole, before Strata's app and its middleware
see it: the registry answers its own errors and its own authentication there too.

No OpenAPI document or docs page is served: the paths are exactly Confluent's (the app's ``openapi()``
still describes them, for tests).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from api.registry import about, compatibility, configs, schemas, subjects
from api.registry.context import RegistryContext
from api.registry.door import RegistryDoor
from api.registry.errors import install_error_handlers

# Where the HTTP port serves the registry.
PREFIX = "/schema-registry"


def create_registry_app(ctx: RegistryContext) -> FastAPI:
    app = FastAPI(
        title="Strata schema registry",
        description="Confluent's Schema Registry API over Strata's metadata store.",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,  # the door drops a trailing slash itself (api/registry/paths.py)
    )
    app.state.ctx = ctx
    install_error_handlers(app)
    app.add_middleware(
        RegistryDoor,
        security=ctx.security,
        max_body_bytes=ctx.max_body_bytes,
        body_timeout_s=ctx.body_timeout_s,
    )
    for module in (about, schemas, subjects, compatibility, configs):
        app.include_router(module.router)
    return app


def with_registry(strata: ASGIApp, registry: ASGIApp, prefix: str = PREFIX) -> ASGIApp:
    """One app for the HTTP port: ``prefix`` and the paths under it to ``registry`` (its ``root_path``
    extended by the prefix, so it routes on what follows), everything else, the lifespan included, to
    ``strata``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            root: str = scope.get("root_path", "")
            path: str = scope["path"]
            rest = path[len(root) :] if path.startswith(root) else path
            if rest == prefix or rest.startswith(prefix + "/"):
                await registry({**scope, "root_path": root + prefix}, receive, send)
                return
        await strata(scope, receive, send)

    return app
