"""Per-principal permissions on the HTTP door: the same grants (agents/principals.py) the Kafka door
checks, asked of the principal the middleware (api/middleware.py) authenticated for this request.

A request carries its principal in the ASGI scope under ``PRINCIPAL``; the key is absent when the agent
runs without authentication, and then everything is allowed. A denied request is 403: ``Forbidden``
(40301) for a topic, ``GroupForbidden`` (40302) for a consumer group.
"""

from __future__ import annotations

from fastapi import Request

from agents.principals import Op, Principal, Resource
from storage.errors import Forbidden, GroupForbidden

PRINCIPAL = "strata.principal"


def principal(request: Request) -> Principal | None:
    found: Principal | None = request.scope.get(PRINCIPAL)
    return found


def check(request: Request, op: Op, resource: Resource, name: str) -> None:
    if not may(request, op, resource, name):
        who = principal(request)
        kind = "topic" if resource is Resource.TOPIC else "group"
        message = f"principal {who.name if who else '?'!r} may not {op.value} {kind} {name!r}"
        raise Forbidden(message) if resource is Resource.TOPIC else GroupForbidden(message)


def may(request: Request, op: Op, resource: Resource, name: str) -> bool:
    if PRINCIPAL not in request.scope:
        return True  # no authentication configured
    who = principal(request)
    return who is not None and who.may(op, resource, name)


def may_describe(request: Request, topic: str) -> bool:
    """Describing a topic (its configs and partitions) needs read or write on it, as Kafka's DESCRIBE is
    implied by READ and WRITE."""
    return may(request, Op.READ, Resource.TOPIC, topic) or may(request, Op.WRITE, Resource.TOPIC, topic)


def check_describe(request: Request, topic: str) -> None:
    if not may_describe(request, topic):
        check(request, Op.READ, Resource.TOPIC, topic)
