"""The HTTP API (FastAPI). OpenAPI at /docs and /openapi.json.

This module only assembles the app from an ``HttpContext`` (api/context.py) and the process's lifespan
(strata/http.py starts the runtime, and the background loop in role ``all``): the middleware (body limit,
auth, produce admission) and one router per resource (api/routes/). Handlers translate between JSON and the
agent's types and nothing more: names and configs are validated in storage/topic_config.py, record rules that
need a topic's config in agents/encode.py, and errors become responses in api/errors.py. All state lives in
the agent and the stores.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI

from api import models
from api.context import HttpContext
from api.errors import error_response, install_error_handlers
from api.middleware import Admission, LimitsAndAuth
from api.routes import browse, cluster, groups, ops, records, security, topics, transactions, ui
from api.routes import compaction as compaction_routes
from api.routes import lake as lake_routes


def create_app(
    ctx: HttpContext, lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None
) -> FastAPI:
    """The HTTP door on ``ctx``; ``lifespan`` starts and stops what the context's parts need."""
    app = FastAPI(
        title="Strata",
        version="0.1.0",
        description="A Kafka-style log service whose only durable data store is object storage.",
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    install_error_handlers(app)
    app.add_middleware(
        LimitsAndAuth,
        max_body_bytes=ctx.limits.max_request_bytes,
        security=ctx.security,
        on_error=error_response,
        # A body is reserved before it arrives: it counts against the buffer's arriving share until it is in.
        admission=Admission(functools.partial(ctx.agent.buffer.reserve, arriving=True)),
        body_timeout_s=ctx.limits.body_timeout_ms / 1000,
    )
    for module in (topics, records, browse, groups, transactions, cluster, security, ops, ui):
        app.include_router(module.router)
    app.include_router(compaction_routes.router)  # jobs, partition detail, compaction history
    app.include_router(lake_routes.router)  # the lake's status and "commit now"
    app.mount("/ui/assets", ui.assets(), name="ui-assets")
    _document_produce_body(app)
    return app


def _document_produce_body(app: FastAPI) -> None:
    """The produce route reads its body itself (api/produce_body.py), so FastAPI does not see its model:
    add ``ProduceIn`` and ``TypedProduceIn`` (typed values), and the models inside them, to the OpenAPI
    components its requestBody refers to."""
    make = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = make()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in (models.ProduceIn, models.TypedProduceIn):
                body = model.model_json_schema(ref_template="#/components/schemas/{model}")
                components.update(body.pop("$defs", {}))
                components[model.__name__] = body
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
