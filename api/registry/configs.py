"""Config (the compatibility level, and whether registrations normalize) and mode (READWRITE, READONLY,
READONLY_OVERRIDE, IMPORT), global (``/config``, ``/mode``) and per subject (``/config/{s}``,
``/mode/{s}``), with Confluent's answers (registry/configs.py has the rules):

- GET answers ``{"compatibilityLevel": ...}``; a subject without a level of its own is 40408 unless
  ``defaultToGlobal=true`` (a mode: 40409 likewise);
- PUT takes ``{"compatibility": ..., "normalize": ...}`` and answers what is now set as
  ``{"compatibility": ...}``; a mode PUT takes and answers ``{"mode": ...}`` (``force=true`` enters IMPORT
  where versions exist);
- DELETE forgets the subject's own; a config DELETE answers the level now in effect under both names,
  ``compatibility`` as Karapace's tests read it and ``compatibilityLevel`` as Confluent's client does;
  a mode DELETE answers the mode deleted.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from agents.permissions import CLUSTER, SUBJECT, Need, registry_route
from api.registry import access, answers
from api.registry.bodies import ConfigIn, ModeIn
from api.registry.paths import Subject

router = APIRouter()
Flag = Annotated[bool, Query()]
_GET = "compatibilityLevel"
_SET = "compatibility"


def _need(method: str, path: str) -> Need:
    rule = registry_route(method, path)
    return rule.need(SUBJECT) if "{subject}" in path else rule.need(CLUSTER)


def _checked(request: Request, method: str, path: str, subject: str | None) -> None:
    access.check(request, _need(method, path), subject)


# --- config -----------------------------------------------------------------------------------------------
@router.get("/config")
def get_config(request: Request) -> dict[str, Any]:
    _checked(request, "GET", "/config", None)
    return answers.config(access.context(request).registry.config(None), _GET)


@router.put("/config")
def put_config(request: Request, body: ConfigIn) -> dict[str, Any]:
    _checked(request, "PUT", "/config", None)
    return _set_config(request, None, body)


@router.delete("/config")
def delete_config(request: Request) -> dict[str, Any]:
    _checked(request, "DELETE", "/config", None)
    return answers.config(access.context(request).registry.delete_config(None), _SET, _GET)


@router.get("/config/{subject}")
def get_subject_config(
    request: Request,
    subject: Subject,
    defaultToGlobal: Flag = False,
) -> dict[str, Any]:
    _checked(request, "GET", "/config/{subject}", subject)
    return answers.config(access.context(request).registry.config(subject, defaultToGlobal), _GET)


@router.put("/config/{subject}")
def put_subject_config(request: Request, subject: Subject, body: ConfigIn) -> dict[str, Any]:
    _checked(request, "PUT", "/config/{subject}", subject)
    return _set_config(request, subject, body)


@router.delete("/config/{subject}")
def delete_subject_config(request: Request, subject: Subject) -> dict[str, Any]:
    _checked(request, "DELETE", "/config/{subject}", subject)
    return answers.config(access.context(request).registry.delete_config(subject), _SET, _GET)


def _set_config(request: Request, subject: str | None, body: ConfigIn) -> dict[str, Any]:
    level = body.level()
    if level is None and body.normalize is None:
        level = ""  # nothing to set: refused as an invalid level (42203), with the valid levels named
    view = access.context(request).registry.set_config(subject, level, body.normalize)
    return answers.config(view, _SET)


# --- mode -------------------------------------------------------------------------------------------------
@router.get("/mode")
def get_mode(request: Request) -> dict[str, str]:
    _checked(request, "GET", "/mode", None)
    return {"mode": str(access.context(request).registry.mode(None))}


@router.put("/mode")
def put_mode(request: Request, body: ModeIn, force: Flag = False) -> dict[str, str]:
    _checked(request, "PUT", "/mode", None)
    return {"mode": str(access.context(request).registry.set_mode(None, body.mode, force))}


@router.delete("/mode")
def delete_mode(request: Request) -> dict[str, str]:
    _checked(request, "DELETE", "/mode", None)
    return {"mode": str(access.context(request).registry.delete_mode(None))}


@router.get("/mode/{subject}")
def get_subject_mode(
    request: Request,
    subject: Subject,
    defaultToGlobal: Flag = False,
) -> dict[str, str]:
    _checked(request, "GET", "/mode/{subject}", subject)
    return {"mode": str(access.context(request).registry.mode(subject, defaultToGlobal))}


@router.put("/mode/{subject}")
def put_subject_mode(request: Request, subject: Subject, body: ModeIn, force: Flag = False) -> dict[str, str]:
    _checked(request, "PUT", "/mode/{subject}", subject)
    return {"mode": str(access.context(request).registry.set_mode(subject, body.mode, force))}


@router.delete("/mode/{subject}")
def delete_subject_mode(request: Request, subject: Subject) -> dict[str, str]:
    _checked(request, "DELETE", "/mode/{subject}", subject)
    return {"mode": str(access.context(request).registry.delete_mode(subject))}
