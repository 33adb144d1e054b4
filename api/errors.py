"""The one place where errors become HTTP responses.

Every error response is ``{"error_code": <status * 100 + n>, "message": "..."}``. The status is derived from
the code. Retriable errors add ``Retry-After``. Nothing reaches the client as an unstructured 500: a bug
becomes 50001 with a generic message, and its traceback goes to the log.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.responses import JSONBytes
from storage.errors import BadRequest, BufferFull, InvalidPayload, StrataError

log = logging.getLogger("strata.api")

RETRY_AFTER_S = {BufferFull.code: "1"}


def error_response(error: StrataError) -> Response:
    headers = {}
    if error.retriable:
        headers["Retry-After"] = RETRY_AFTER_S.get(error.code, "1")
    if error.code == 40101:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONBytes(
        {"error_code": error.code, "message": error.message},
        status_code=error.http_status,
        headers=headers,
    )


def _describe(errors: list[dict[str, object]]) -> str:
    parts = []
    for err in errors[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")  # type: ignore[attr-defined]
        parts.append(f"{loc or 'body'}: {err.get('msg')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


async def _strata_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StrataError)
    if exc.http_status >= 500:
        log.warning("request failed with %d: %s", exc.code, exc.message)
    return error_response(exc)


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(BadRequest("request body is not valid JSON"))
    if all(e.get("loc", ("body",))[0] in ("query", "path", "header") for e in errors):
        return error_response(BadRequest(_describe(errors)))
    return error_response(InvalidPayload(_describe(errors)))


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:
        # FastAPI's only 400: a body it could not parse at all (not UTF-8, nested too deep for the parser,
        # an integer too long for int()). A plain syntax error already arrives as json_invalid above.
        return error_response(BadRequest("request body is not valid JSON"))
    # Routing-level errors (no such path, method not allowed): n = 0, distinct from every Strata code.
    code = exc.status_code * 100
    return JSONBytes(
        {"error_code": code, "message": str(exc.detail)},
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def _unexpected(_: Request, exc: Exception) -> Response:
    # A bug, not a failure kind: the client gets the standard shape, the log gets the traceback.
    log.error("unexpected error", exc_info=exc)
    return error_response(StrataError("internal error; see the server log"))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(StrataError, _strata_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
