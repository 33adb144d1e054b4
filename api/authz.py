"""Per-principal permissions on the HTTP door: the same grants (agents/principals.py) the Kafka door
checks, asked of the principal the middleware (api/middleware.py) authenticated for this request.

A request carries its principal in the ASGI scope under ``PRINCIPAL``; the key is absent when the agent
runs without authentication, and then everything is allowed. A denied request is 403: ``Forbidden``
(40301) for a topic, ``GroupForbidden`` (40302) for a consumer group.
"""

from __future__ import annotations

from fastapi import Request

from agents import principals as access
from agents.principals import ANYONE, Op, Principal, Resource

PRINCIPAL = "strata.principal"


def principal(request: Request) -> Principal | None:
    """The request's principal: ANYONE when the agent runs without authentication."""
    if PRINCIPAL not in request.scope:
        return ANYONE
    found: Principal | None = request.scope[PRINCIPAL]
    return found


def check(request: Request, op: Op, resource: Resource, name: str) -> None:
    access.require(principal(request), op, resource, name)


def may(request: Request, op: Op, resource: Resource, name: str) -> bool:
    return access.may(principal(request), op, resource, name)


def may_describe(request: Request, topic: str) -> bool:
    return access.may_describe(principal(request), topic)


def check_describe(request: Request, topic: str) -> None:
    access.require_describe(principal(request), topic)
