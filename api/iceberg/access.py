"""Per-principal permissions on the Iceberg catalog's routes: the permission table's needs (``ICEBERG`` in
agents/permissions.py) asked of the principal the door (api/iceberg/door.py) authenticated, against the
same ACLs every door checks (agents/security.py), with the lake's tables as the resource (TABLE, named
``<namespace>.<table>``; agents/permissions.py says why the table and not its topic).

The key is absent from the scope when the agent runs without authentication, and then everything is
allowed. A refusal is 403 ``ForbiddenException`` naming the principal and the permission; a need that
``filters`` leaves out of a listing what it does not allow.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import Request

from agents import security as access
from agents.permissions import Need
from agents.principals import ANYONE, Principal
from api.authz import PRINCIPAL
from api.iceberg.context import IcebergContext
from api.iceberg.errors import Forbidden


def context(request: Request) -> IcebergContext:
    ctx: IcebergContext = request.app.state.ctx
    return ctx


def table_name(identifier: Iterable[str]) -> str:
    """A table's resource name: its identifier as Iceberg prints it, the parts joined by dots."""
    return ".".join(identifier)


def _principal(request: Request) -> Principal | None:
    if PRINCIPAL not in request.scope:
        return ANYONE
    found: Principal | None = request.scope[PRINCIPAL]
    return found


def may(request: Request, need: Need, name: str) -> bool:
    host = request.client.host if request.client is not None else ""
    return access.permits(context(request).security, _principal(request), host, need, name)


def check(request: Request, need: Need, name: str) -> None:
    """Forbidden (403) unless the principal has ``need`` on the table ``name``."""
    if not may(request, need, name):
        who = _principal(request)
        raise Forbidden(
            f"principal {who.name if who else '?'!r} may not {need.operation.name} table {name!r}"
            f" (needs {need.operation.name} on {need.resource.name})"
        )


def visible(request: Request, need: Need, identifiers: Iterable[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The tables a listing shows: those ``need`` allows."""
    return [i for i in identifiers if may(request, need, table_name(i))]
