"""What every router shares: the ctx dependency, path parameter types, name checks, error docs."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Path, Request

from api import models
from api.context import HttpContext
from storage.errors import BadRequest
from storage.topic_config import validate_topic_name

MiB = 1024 * 1024
_GROUP_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")

TopicPath = Annotated[str, Path(description="Topic name: [a-zA-Z0-9._-]{1,249}")]
PartitionPath = Annotated[int, Path(ge=0, le=2**31 - 1)]
ERRORS: dict[int | str, dict[str, object]] = {
    status: {"model": models.ErrorOut} for status in (400, 401, 403, 404, 406, 409, 413, 422, 429, 500, 503)
}


# Dependencies are ``async def``: FastAPI runs a plain ``def`` dependency in a worker thread, which cost
# measurable CPU per produce request (a thread hop for a dictionary lookup).
async def get_context(request: Request) -> HttpContext:
    ctx: HttpContext = request.app.state.ctx
    return ctx


CtxDep = Annotated[HttpContext, Depends(get_context)]


def topic_name(name: str) -> str:
    return validate_topic_name(name)


def group_id(name: str) -> str:
    if not _GROUP_RE.fullmatch(name):
        raise BadRequest(f"invalid group id {name!r}: use 1-249 characters from [a-zA-Z0-9._-]")
    return name
