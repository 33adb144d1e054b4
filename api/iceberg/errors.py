"""The one place where the Iceberg catalog's errors become HTTP answers, in the REST spec's shape:
``{"error": {"message": <str>, "type": <str>, "code": <int>}}`` (the spec's ``IcebergErrorResponse``), never
Strata's own (api/errors.py) nor the registry's. ``type`` is the exception name the spec's examples use,
which clients show; ``code`` is the HTTP status.

One error type per failure kind, each with its status:
- 400 ``BadRequestException``: a query parameter or path that does not parse, a warehouse this catalog
  is not;
- 401 ``NotAuthorizedException``: no or wrong credentials (the door, api/iceberg/door.py);
- 403 ``ForbiddenException``: a permission the principal lacks (api/iceberg/access.py);
- 404 ``NoSuchNamespaceException`` / ``NoSuchTableException``, and ``NotFoundException`` for a path the
  catalog does not serve (views, for one: the config's ``endpoints`` do not list them);
- 405: a method the spec defines on no path of the catalog (PUT, PATCH);
- 406 ``UnsupportedOperationException``: a write the spec defines (create, commit, drop, rename,
  register, properties, metrics). The spec lists 406 ``UnsupportedOperationResponse`` ("the server does
  not support this operation") for exactly this, so a client reports a read-only catalog rather than a
  missing endpoint (405) or a permission (403: nobody may write here, whatever their grants);
- 502 ``UnreadableMetadataException``: the catalog points at a metadata file that is missing or is not
  table metadata. The fault is in what the object store holds, not in the request, and retrying does not
  help: the spec's 5XX ``ServerErrorResponse``, with a status that says an upstream answer was bad;
- 503 ``ServiceUnavailableException``: the metadata database or the object store does not answer; the
  spec's retriable status.
No designed path answers 500: that is left to a bug, logged with its traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

log = logging.getLogger("strata.iceberg")


class IcebergError(Exception):
    status = 500
    type = "InternalServerError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(IcebergError):
    status, type = 400, "BadRequestException"


class NotAuthorized(IcebergError):
    status, type = 401, "NotAuthorizedException"


class Forbidden(IcebergError):
    status, type = 403, "ForbiddenException"


class NoSuchNamespace(IcebergError):
    status, type = 404, "NoSuchNamespaceException"


class NoSuchTable(IcebergError):
    status, type = 404, "NoSuchTableException"


class UnsupportedOperation(IcebergError):
    status, type = 406, "UnsupportedOperationException"


class UnreadableMetadata(IcebergError):
    status, type = 502, "UnreadableMetadataException"


class CatalogUnavailable(IcebergError):
    """The metadata database, which holds the catalog's table pointers, does not answer."""

    status, type = 503, "ServiceUnavailableException"


class StoreUnavailable(IcebergError):
    """The object store, which holds the tables' metadata files, does not answer."""

    status, type = 503, "ServiceUnavailableException"


# The spec's type names for the statuses routing itself answers (a path or a method not served).
_ROUTING_TYPES = {404: "NotFoundException", 405: "MethodNotAllowedException"}


class IcebergJSON(Response):
    media_type = "application/json"

    def render(self, content: object) -> bytes:
        return orjson.dumps(content)


def error_response(
    status: int, type_: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    body = {"error": {"message": message, "type": type_, "code": status}}
    return IcebergJSON(body, status_code=status, headers=headers)


def iceberg_error(exc: IcebergError) -> Response:
    # RFC 9110: a 401 names the scheme it takes; the spec's clients send a bearer token.
    headers = {"WWW-Authenticate": 'Bearer realm="iceberg"'} if isinstance(exc, NotAuthorized) else None
    return error_response(exc.status, exc.type, exc.message, headers)


async def _iceberg_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, IcebergError)
    if exc.status >= 500:
        log.warning("iceberg catalog request failed with %d: %s", exc.status, exc.message)
    return iceberg_error(exc)


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    shown = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return error_response(400, BadRequest.type, shown)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    type_ = _ROUTING_TYPES.get(status, BadRequest.type if status == 400 else "HTTPException")
    message = f"{request.method} {request.url.path}: {HTTPStatus(status).phrase}"
    return error_response(status, type_, message, exc.headers)


async def _unexpected(_: Request, exc: Exception) -> Response:
    log.error("unexpected error in the iceberg catalog", exc_info=exc)
    return error_response(500, IcebergError.type, "internal error; see the server log")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(IcebergError, _iceberg_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
