"""Every write the REST spec defines, refused: this catalog is read-only. Strata's lake writer commits the
tables through the SQL catalog directly (pipeline/lake), with its offsets in the same snapshot, which a
commit through this door could not keep exactly-once.

Each is 406 ``UnsupportedOperationException``, the spec's answer for an operation the server does not
support (api/iceberg/errors.py says why not 403 or 405), whoever asks. They are routes, not a fallback, so
that a write meets that answer rather than a 404, and so that the permission table lists them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request

from api.iceberg.errors import UnsupportedOperation

router = APIRouter()

_NS = "/v1/namespaces/{namespace}"
_TB = _NS + "/tables/{table}"

# (method, path, the spec's operationId)
WRITES = (
    ("POST", "/v1/namespaces", "createNamespace"),
    ("DELETE", _NS, "dropNamespace"),
    ("POST", _NS + "/properties", "updateProperties"),
    ("POST", _NS + "/tables", "createTable"),
    ("POST", _NS + "/register", "registerTable"),
    ("POST", _TB, "updateTable"),
    ("DELETE", _TB, "dropTable"),
    ("POST", _TB + "/metrics", "reportMetrics"),
    ("POST", "/v1/tables/rename", "renameTable"),
    ("POST", "/v1/transactions/commit", "commitTransaction"),
)


def _refuse(operation: str) -> Callable[[Request], Awaitable[None]]:
    async def refused(request: Request) -> None:
        raise UnsupportedOperation(
            f"{operation} ({request.method} {request.url.path}) is not supported: this catalog is"
            " read-only; Strata's lake writer commits the tables"
        )

    refused.__name__ = operation
    return refused


for _method, _path, _operation in WRITES:
    router.add_api_route(_path, _refuse(_operation), methods=[_method], name=_operation)
