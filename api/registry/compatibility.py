"""Compatibility checks: whether a schema could be registered under a subject, against one version
(``/compatibility/subjects/{s}/versions/{v}``, a number or ``latest``) or against the versions the subject's
level names (``.../versions``), without registering it.

The answer is ``{"is_compatible": bool}``, with ``messages`` (the reasons) when it is not, as Karapace
answers and its tests compare, and with ``verbose=true`` also when it is (then empty), as Confluent
answers. A transitive level checks every live version either way (registry/service.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from agents.permissions import SUBJECT, registry_route
from api.registry import access
from api.registry.bodies import SchemaIn
from api.registry.paths import Subject
from registry.views import CompatibilityResult

router = APIRouter()
_S = "/compatibility/subjects/{subject}/versions"
_ONE = registry_route("POST", _S + "/{version}").need(SUBJECT)
_ALL = registry_route("POST", _S).need(SUBJECT)
Flag = Annotated[bool, Query()]


def _answer(result: CompatibilityResult, verbose: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"is_compatible": result.is_compatible}
    if verbose or not result.is_compatible:
        out["messages"] = list(result.messages)
    return out


@router.post(_S + "/{version}")
def check_one(
    request: Request,
    subject: Subject,
    version: str,
    body: SchemaIn,
    normalize: Flag = False,
    verbose: Flag = False,
) -> dict[str, Any]:
    access.check(request, _ONE, subject)
    result = access.context(request).registry.check_compatibility(
        subject, version, body.schema_text, body.schema_type, body.refs(), normalize=normalize
    )
    return _answer(result, verbose)


@router.post(_S)
def check_all(
    request: Request, subject: Subject, body: SchemaIn, normalize: Flag = False, verbose: Flag = False
) -> dict[str, Any]:
    access.check(request, _ALL, subject)
    result = access.context(request).registry.check_compatibility(
        subject, None, body.schema_text, body.schema_type, body.refs(), normalize=normalize
    )
    return _answer(result, verbose)
