"""Per-principal permissions on the HTTP door: the permission table's needs (agents/permissions.py) asked
of the principal the middleware (api/middleware.py) authenticated for this request, against the same ACLs
the Kafka door checks (agents/security.py).

A request carries its principal in the ASGI scope under ``PRINCIPAL``; the key is absent when the agent
runs without authentication, and then everything is allowed. A denied request is 403 with the code of the
resource: ``Forbidden`` (40301) for a topic, ``GroupForbidden`` (40302) for a consumer group,
``ClusterForbidden`` (40303) for the cluster.
"""

from __future__ import annotations

from fastapi import Request

from agents import security as access
from agents.permissions import Need
from agents.principals import ANYONE, Principal
from agents.security import Security

PRINCIPAL = "strata.principal"


def principal(request: Request) -> Principal | None:
    """The request's principal: ANYONE when the agent runs without authentication."""
    if PRINCIPAL not in request.scope:
        return ANYONE
    found: Principal | None = request.scope[PRINCIPAL]
    return found


def _host(request: Request) -> str:
    return request.client.host if request.client is not None else ""


def may(request: Request, need: Need, name: str | None = None) -> bool:
    security: Security | None = request.app.state.ctx.security
    return access.permits(security, principal(request), _host(request), need, name)


def check(request: Request, need: Need, name: str | None = None) -> None:
    if not may(request, need, name):
        raise access.refusal(need, principal(request), name)
