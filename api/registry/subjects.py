"""Subjects and their versions: list, register, look up, read, delete.

- ``GET /subjects`` lists the subjects the principal may DESCRIBE (``subjectPrefix``; ``deleted`` adds the
  soft-deleted ones, ``deletedOnly`` gives only those);
- ``POST /subjects/{s}/versions`` registers (``normalize``; ``id`` and ``version`` in IMPORT mode) and
  answers ``{id}`` with what newer servers add (``version``, ``schema``, ``schemaType``, ``guid``);
- ``POST /subjects/{s}`` finds the schema among the subject's versions (``deleted`` to search the
  soft-deleted ones too);
- a version is a number, ``latest`` or ``-1``; ``/schema`` answers its text alone, ``/referencedby`` the
  ids of the schemas that reference it;
- ``DELETE`` soft-deletes, and with ``permanent=true`` removes what was soft-deleted: a subject answers the
  versions deleted, a version its number.

Confluent's clients send snake_case ``deleted_only``, its API documents ``deletedOnly``: both are read.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from agents.permissions import SUBJECT, registry_route
from api.registry import access, answers
from api.registry.bodies import SchemaIn
from api.registry.errors import RegistryJSON
from api.registry.paths import Subject

router = APIRouter()
_S = "/subjects/{subject}"
_V = _S + "/versions/{version}"
_LIST = registry_route("GET", "/subjects").need(SUBJECT)
_LOOKUP = registry_route("POST", _S).need(SUBJECT)
_DELETE = registry_route("DELETE", _S).need(SUBJECT)
_VERSIONS = registry_route("GET", _S + "/versions").need(SUBJECT)
_REGISTER = registry_route("POST", _S + "/versions").need(SUBJECT)
_VERSION = registry_route("GET", _V).need(SUBJECT)
_DELETE_VERSION = registry_route("DELETE", _V).need(SUBJECT)
_TEXT = registry_route("GET", _V + "/schema").need(SUBJECT)
_REFERENCED_BY = registry_route("GET", _V + "/referencedby").need(SUBJECT)
Flag = Annotated[bool, Query()]


@router.get("/subjects")
def list_subjects(
    request: Request,
    subjectPrefix: str = "",
    deleted: Flag = False,
    deletedOnly: Flag = False,
    deleted_only: Flag = False,
    offset: int = 0,
    limit: int = -1,
) -> list[str]:
    only = deletedOnly or deleted_only
    found = access.context(request).registry.subjects(subjectPrefix, deleted or only, only)
    return answers.page(access.visible(request, _LIST, found), offset, limit)


@router.post(_S + "/versions")
def register(request: Request, subject: Subject, body: SchemaIn, normalize: Flag = False) -> dict[str, Any]:
    access.check(request, _REGISTER, subject)
    found = access.context(request).registry.register(
        subject,
        body.schema_text,
        body.schema_type,
        body.refs(),
        normalize=normalize,
        schema_id=body.id,
        version=body.version,
    )
    out = answers.version(request, found, guid=True)
    del out["subject"]  # Confluent's registration answer has none (the client knows it)
    return out


@router.post(_S)
def lookup(
    request: Request,
    subject: Subject,
    body: SchemaIn,
    normalize: Flag = False,
    deleted: Flag = False,
    format: str = "",
) -> dict[str, Any]:
    access.check(request, _LOOKUP, subject)
    found = access.context(request).registry.lookup(
        subject,
        body.schema_text,
        body.schema_type,
        body.refs(),
        normalize=normalize,
        include_deleted=deleted,
    )
    return answers.version(request, found, format)


@router.get(_S + "/versions")
def list_versions(
    request: Request,
    subject: Subject,
    deleted: Flag = False,
    deletedOnly: Flag = False,
    deleted_only: Flag = False,
    offset: int = 0,
    limit: int = -1,
) -> list[int]:
    access.check(request, _VERSIONS, subject)
    only = deletedOnly or deleted_only
    found = access.context(request).registry.versions(subject, deleted or only, only)
    return answers.page(found, offset, limit)


@router.get(_V)
def get_version(
    request: Request,
    subject: Subject,
    version: str,
    deleted: Flag = False,
    format: str = "",
) -> dict[str, Any]:
    access.check(request, _VERSION, subject)
    found = access.context(request).registry.version(subject, version, deleted)
    return answers.version(request, found, format)


@router.get(_V + "/schema")
def get_version_text(
    request: Request,
    subject: Subject,
    version: str,
    deleted: Flag = False,
    format: str = "",
) -> Response:
    """The version's schema text alone, as the body."""
    access.check(request, _TEXT, subject)
    found = access.context(request).registry.version(subject, version, deleted)
    text = answers.text_of(request, found.schema, format)
    return Response(text, media_type=RegistryJSON.media_type)


@router.get(_V + "/referencedby")
def referenced_by(
    request: Request, subject: Subject, version: str, offset: int = 0, limit: int = -1
) -> list[int]:
    access.check(request, _REFERENCED_BY, subject)
    return answers.page(access.context(request).registry.referenced_by(subject, version), offset, limit)


@router.delete(_S)
def delete_subject(request: Request, subject: Subject, permanent: Flag = False) -> list[int]:
    access.check(request, _DELETE, subject)
    return access.context(request).registry.delete_subject(subject, permanent)


@router.delete(_V)
def delete_version(request: Request, subject: Subject, version: str, permanent: Flag = False) -> int:
    access.check(request, _DELETE_VERSION, subject)
    return access.context(request).registry.delete_version(subject, version, permanent)
