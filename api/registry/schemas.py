"""Schemas by id and by guid, and the listing of every registered version: ``/schemas``,
``/schemas/types``, ``/schemas/ids/{id}`` (with ``/schema``, ``/subjects``, ``/versions``) and
``/schemas/guids/{guid}`` (with ``/ids``).

Ids are global: a schema asked for by id or guid is shown to a principal that may READ any one subject
holding a version of it (soft-deleted versions included, as the id still resolves then). An id that is
not a number is no route at all (404 with ``error_code`` 404, Karapace's tests pin it); a number that is
no id is 40403.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from agents.permissions import SUBJECT, registry_route
from api.registry import access, answers
from api.registry.errors import RegistryJSON
from registry.errors import SchemaNotFound
from registry.formats.base import SchemaType
from registry.names import MAX_SCHEMA_ID
from registry.views import SchemaView

router = APIRouter()
_LIST = registry_route("GET", "/schemas").need(SUBJECT)
_BY_ID = registry_route("GET", "/schemas/ids/{schema_id}").need(SUBJECT)
_ID_SUBJECTS = registry_route("GET", "/schemas/ids/{schema_id}/subjects").need(SUBJECT)
Flag = Annotated[bool, Query()]
_NUMBER = re.compile(r"-?[0-9]+")


def _id(text: str) -> int:
    """The path's id. Not a number: 404 as for a path no route serves; a number out of the ids' range:
    SchemaNotFound."""
    if not _NUMBER.fullmatch(text):
        raise HTTPException(404)
    number = int(text) if len(text) <= 12 else 0
    if not 1 <= number <= MAX_SCHEMA_ID:
        raise SchemaNotFound(f"Schema {text} not found")
    return number


def _readable(request: Request, schema_id: int) -> SchemaView:
    """The schema, if the principal may read it (403 otherwise); SchemaNotFound if the id resolves no more."""
    registry = access.context(request).registry
    view = registry.schema(schema_id)
    if not access.unrestricted(request):
        access.check_any(request, _BY_ID, registry.schema_subjects(schema_id, include_deleted=True))
    return view


@router.get("/schemas/types")
def schema_types() -> list[str]:
    return [str(t) for t in SchemaType]


@router.get("/schemas")
def list_schemas(
    request: Request,
    subjectPrefix: str = "",
    deleted: Flag = False,
    latestOnly: Flag = False,
    offset: int = 0,
    limit: int = -1,
) -> list[dict[str, Any]]:
    """Every version of every subject (with ``subjectPrefix``), by subject and version; ``latestOnly``: the
    latest version of each. Subjects the principal may not READ are left out."""
    registry = access.context(request).registry
    if access.unrestricted(request):
        found = registry.schemas(subjectPrefix, deleted, latestOnly, offset, limit)
    else:
        shown = set(access.visible(request, _LIST, registry.subjects(subjectPrefix, deleted)))
        found = answers.page(
            [v for v in registry.schemas(subjectPrefix, deleted, latestOnly) if v.subject in shown],
            offset,
            limit,
        )
    return [answers.version(request, v) for v in found]


@router.get("/schemas/ids/{schema_id}")
def get_schema(
    request: Request,
    schema_id: str,
    subject: str | None = None,
    format: str = "",
    fetchMaxId: Flag = False,
    includeSubjects: Flag = False,
) -> dict[str, Any]:
    """The schema with this id. ``subject`` names a context in Confluent's registry; there is one context
    here, so it changes nothing (registry/service.py)."""
    number = _id(schema_id)
    view = _readable(request, number)
    out = answers.schema(request, view, format)
    registry = access.context(request).registry
    if includeSubjects:
        out["subjects"] = access.visible(request, _ID_SUBJECTS, registry.schema_subjects(number))
    if fetchMaxId:
        out["maxId"] = registry.max_schema_id()
    return out


@router.get("/schemas/ids/{schema_id}/schema")
def get_schema_text(request: Request, schema_id: str, format: str = "") -> Response:
    """The schema's text alone, as the body."""
    view = _readable(request, _id(schema_id))
    return Response(answers.text_of(request, view, format), media_type=RegistryJSON.media_type)


@router.get("/schemas/ids/{schema_id}/subjects")
def get_schema_subjects(
    request: Request,
    schema_id: str,
    subject: str | None = None,
    deleted: Flag = False,
    offset: int = 0,
    limit: int = -1,
) -> list[str]:
    """The subjects with a version using the id (``subject``: only that one), those the principal may see."""
    found = access.context(request).registry.schema_subjects(_id(schema_id), deleted)
    found = [s for s in found if subject is None or s == subject]
    return answers.page(access.visible(request, _ID_SUBJECTS, found), offset, limit)


@router.get("/schemas/ids/{schema_id}/versions")
def get_schema_versions(
    request: Request,
    schema_id: str,
    subject: str | None = None,
    deleted: Flag = False,
    offset: int = 0,
    limit: int = -1,
) -> list[dict[str, Any]]:
    found = access.context(request).registry.schema_versions(_id(schema_id), deleted)
    shown = set(access.visible(request, _ID_SUBJECTS, [s for s, _ in found]))
    pairs = [{"subject": s, "version": v} for s, v in found if s in shown and subject in (None, s)]
    return answers.page(pairs, offset, limit)


@router.get("/schemas/guids/{guid}")
def get_schema_by_guid(request: Request, guid: str, format: str = "") -> dict[str, Any]:
    view = access.context(request).registry.schema_by_guid(guid)
    _readable(request, view.schema_id)
    return {"id": view.schema_id, "guid": view.guid, **answers.schema(request, view, format)}


@router.get("/schemas/guids/{guid}/ids")
def get_guid_ids(request: Request, guid: str) -> list[dict[str, Any]]:
    """The ids of the schema with this guid, by context: one here, the default (``.``)."""
    view = access.context(request).registry.schema_by_guid(guid)
    _readable(request, view.schema_id)
    return [{"context": ".", "id": view.schema_id}]
