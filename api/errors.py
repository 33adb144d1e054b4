"""The one place where errors become HTTP responses.

Every error response is ``{"error_code": <status * 100 + n>, "message": "..."}``. The status comes from the
error's kind and code (``http_status``); retriable errors add ``Retry-After``. Nothing reaches the client as
an unstructured 500: a bug becomes 50001 with a generic message, and its traceback goes to the log.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.models import describe_errors
from api.responses import JSONBytes
from storage.errors import (
    BadRequest,
    BufferFull,
    CorruptObject,
    ErrorKind,
    InvalidPayload,
    SchemaValidationFailed,
    StrataError,
    TypedValueInvalid,
    Unauthorized,
)

log = logging.getLogger("strata.api")

RETRY_AFTER_S = {BufferFull.code: "1"}

# The HTTP status of an error is its code's hundreds (Confluent's numbering, status * 100 + n), except
# that a kind may pin the status of its 5xx codes: an unavailable error is 503, as Confluent's REST Proxy
# and load balancers expect for "try again", not the 500 its code says. (BufferFull, 42901, keeps its 429.)
# Kind -> that pinned status, or None where the code's own status stands; every kind has an entry.
KIND_STATUS: dict[ErrorKind, int | None] = {
    ErrorKind.INVALID: None,  # 400, 401, 403, 406, 408, 413, 416, 422
    ErrorKind.NOT_FOUND: None,  # 404
    ErrorKind.CONFLICT: None,  # 409; 400 for TopicExists (Confluent's 40002)
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.CORRUPT: None,  # 500
    ErrorKind.INTERNAL: None,  # 500
}


def http_status(error: StrataError) -> int:
    """The one mapping from a Strata error to an HTTP status."""
    by_code = error.code // 100
    if by_code < 500:
        return by_code
    pinned = KIND_STATUS[error.kind]
    return by_code if pinned is None else pinned


def error_response(error: StrataError) -> Response:
    headers = {}
    if error.retriable:
        headers["Retry-After"] = RETRY_AFTER_S.get(error.code, "1")
    body: dict[str, object] = {"error_code": error.code, "message": error.message}
    if isinstance(error, CorruptObject) and error.damaged is not None:
        # Where the bad range is, so a reader can resume past it and an operator can quarantine it.
        damaged = error.damaged
        body["damaged"] = {
            "topic": damaged.topic,
            "partition": damaged.partition,
            "first_offset": damaged.first_offset,
            "last_offset": damaged.last_offset,
            "object_key": damaged.object_key,
        }
    if isinstance(error, SchemaValidationFailed | TypedValueInvalid) and error.record_index is not None:
        # The request's record that failed validation on produce, or whose typed key or value its schema
        # refused, for clients that act on it.
        body["record"] = error.record_index
    response = JSONBytes(body, status_code=http_status(error), headers=headers)
    if isinstance(error, Unauthorized):
        # One challenge per header line, Basic first: browsers (the console at /ui) answer a Basic
        # challenge by asking for a name and password, and Chromium reads only one challenge per line.
        response.headers.append("WWW-Authenticate", 'Basic realm="strata"')
        response.headers.append("WWW-Authenticate", "Bearer")
    return response


async def _strata_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StrataError)
    if http_status(exc) >= 500:
        log.warning("request failed with %d: %s", exc.code, exc.message)
    return error_response(exc)


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(BadRequest("request body is not valid JSON"))
    if all(e.get("loc", ("body",))[0] in ("query", "path", "header") for e in errors):
        return error_response(BadRequest(describe_errors(errors)))
    return error_response(InvalidPayload(describe_errors(errors)))


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
