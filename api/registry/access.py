"""Per-principal permissions on the registry's routes: the permission table's needs (``REGISTRY`` in
agents/permissions.py) asked of the principal the door (api/registry/door.py) authenticated, against the
same ACLs both other doors check (agents/security.py), with subjects as the resource (SUBJECT).

The principal rides in the ASGI scope under ``api.authz.PRINCIPAL``; the key is absent when the agent runs
without authentication, and then everything is allowed. A refusal is 403 with 40301 and names the
principal and the permission; a need that ``filters`` leaves out what it does not allow instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from fastapi import Request

from agents import security as access
from agents.permissions import Name, Need
from agents.principals import ANYONE, Principal
from api.authz import PRINCIPAL
from api.registry.context import RegistryContext
from api.registry.errors import Forbidden


def context(request: Request) -> RegistryContext:
    ctx: RegistryContext = request.app.state.ctx
    return ctx


def principal(request: Request) -> Principal | None:
    if PRINCIPAL not in request.scope:
        return ANYONE
    found: Principal | None = request.scope[PRINCIPAL]
    return found


def unrestricted(request: Request) -> bool:
    """Whether every need is met without asking (no authentication, or a super user): listings need no
    filtering then, and can be paged by the store."""
    who = principal(request)
    return who is not None and who.superuser


def may(request: Request, need: Need, name: str | None = None) -> bool:
    host = request.client.host if request.client is not None else ""
    return access.permits(context(request).security, principal(request), host, need, name)


def check(request: Request, need: Need, name: str | None = None) -> None:
    """Forbidden (403, 40301) unless the principal has ``need`` on ``name`` (a subject; None for the
    cluster)."""
    if not may(request, need, name):
        raise refusal(request, need, name)


def check_any(request: Request, need: Need, subjects: Iterable[str]) -> None:
    """A schema asked for by id or guid: ``need`` on one of the subjects holding it is enough."""
    if not unrestricted(request) and not any(may(request, need, s) for s in subjects):
        raise refusal(request, need, None)


def visible(request: Request, need: Need, subjects: Iterable[str]) -> list[str]:
    """The subjects a listing shows: those ``need`` allows."""
    if unrestricted(request):
        return list(subjects)
    return [s for s in subjects if may(request, need, s)]


def refusal(request: Request, need: Need, name: str | None) -> Forbidden:
    who = principal(request)
    if need.name is Name.CLUSTER:
        what = "the registry's global config and mode"
    elif need.name is Name.SCHEMA_SUBJECT:
        what = "any subject holding the schema"
    else:
        what = f"subject {name!r}"
    return Forbidden(
        f"principal {who.name if who else '?'!r} may not {need.operation.name} {what}"
        f" (needs {need.operation.name} on {need.resource.name})"
    )
