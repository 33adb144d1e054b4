"""The one place where the registry's errors become HTTP answers, in Confluent's shape:
``{"error_code": <int>, "message": <str>}``, never Strata's own (api/errors.py), whose codes mean other
things.

- A ``registry.errors.RegistryError``: its ``status`` and ``code`` (409 for an incompatible schema, 40401
  for a subject not found, ...), and the two the door adds here: 401 (no or wrong credentials) and 403 with
  40301 (a permission the principal lacks), Strata's own number, as Confluent's code list has none.
- A body or a query parameter that does not validate: 422 with ``error_code`` 422 and pydantic's errors as
  the message (Karapace's tests pin this shape).
- A path no route serves, or a method a path does not take: 404 / 405 with the status as the code and
  Jersey's message (``HTTP 404 Not Found``), as Confluent answers; a body FastAPI cannot read at all: 400.
- A metadata store that fails (``StrataError``): 500 with Confluent's 50001, "error in the backend data
  store"; anything else is a bug: 500 with a generic message, its traceback in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from http import HTTPStatus

import orjson
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from api.registry.negotiation import V1
from registry.errors import RegistryError, StoreError
from storage.errors import StrataError

log = logging.getLogger("strata.registry")


class Unauthorized(RegistryError):
    code, status = 401, 401


class Forbidden(RegistryError):
    code, status = 40301, 403


class RegistryJSON(Response):
    """JSON (orjson) as the registry's own media type; the door sets the negotiated one on the way out."""

    media_type = V1

    def render(self, content: object) -> bytes:
        return orjson.dumps(content)


def error_response(
    status: int, code: int, message: object, headers: Mapping[str, str] | None = None
) -> Response:
    return RegistryJSON({"error_code": code, "message": message}, status_code=status, headers=headers)


def http_error(status: int, headers: Mapping[str, str] | None = None) -> Response:
    """A routing- or protocol-level error: the status is the code, the message Jersey's."""
    return error_response(status, status, f"HTTP {status} {HTTPStatus(status).phrase}", headers)


def registry_error(exc: RegistryError) -> Response:
    headers = {"WWW-Authenticate": 'Basic realm="schema-registry"'} if isinstance(exc, Unauthorized) else None
    return error_response(exc.status, exc.code, exc.message, headers)


async def _registry_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RegistryError)
    if exc.status >= 500:
        log.warning("registry request failed with %d: %s", exc.code, exc.message)
    return registry_error(exc)


async def _store_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StrataError)
    log.warning("registry request failed in the metadata store: %s", exc.message)
    return registry_error(StoreError(f"Error in the backend data store: {exc.message}"))


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    # An error's input may be bytes in no particular charset: shown, never a failure of its own.
    shown = jsonable_encoder(exc.errors(), custom_encoder={bytes: lambda b: b.decode("utf-8", "replace")})
    return error_response(422, 422, shown)


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    # FastAPI's 400 is a body it could not read at all (not in the charset declared, nested too deep).
    return http_error(exc.status_code, exc.headers)


async def _unexpected(_: Request, exc: Exception) -> Response:
    log.error("unexpected error in the schema registry", exc_info=exc)
    return error_response(500, 500, "internal error; see the server log")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(RegistryError, _registry_error)
    app.add_exception_handler(StrataError, _store_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
