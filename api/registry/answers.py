"""The JSON the registry answers with, built from the service's views (registry/views.py) in Confluent's and
Karapace's shapes:

- ``schemaType`` is left out for AVRO, and ``references`` when there are none (Karapace's tests compare
  whole answers);
- ``guid`` (the schema's name-based UUID, which the header wire format carries) is in a registration's
  answer, as newer servers give it, and elsewhere only for a client that sends
  ``Confluent-Accept-Unknown-Properties: true``, as Confluent Cloud documents;
- ``format=serialized`` gives a Protobuf schema as its base64 ``FileDescriptorProto``, which
  confluent-kafka's Protobuf deserializer reads; for the other formats it changes nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from api.registry.access import context
from registry.formats.base import SchemaType
from registry.views import ConfigView, SchemaView, VersionView

Json = dict[str, Any]
SERIALIZED = "serialized"


def wants_extras(request: Request) -> bool:
    return request.headers.get("confluent-accept-unknown-properties", "").lower() == "true"


def text_of(request: Request, view: SchemaView, fmt: str) -> str:
    """The schema's text, or its serialized descriptor where ``fmt`` asks for it and it is Protobuf."""
    if fmt != SERIALIZED or view.schema_type is not SchemaType.PROTOBUF:
        return view.text
    parsed = context(request).registry.parsed(view.schema_id)
    # Imported here: a Protobuf schema was parsed, so its module is loaded (registry/formats/lazy.py).
    from registry.formats.protobuf import ProtobufSchema

    return parsed.serialized() if isinstance(parsed, ProtobufSchema) else view.text


def schema_fields(view: SchemaView, text: str, *, guid: bool) -> Json:
    out: Json = {"schema": text}
    if view.schema_type is not SchemaType.AVRO:
        out["schemaType"] = str(view.schema_type)
    if view.references:
        out["references"] = [
            {"name": r.name, "subject": r.subject, "version": r.version} for r in view.references
        ]
    if guid:
        out["guid"] = view.guid
    return out


def version(request: Request, found: VersionView, fmt: str = "", *, guid: bool | None = None) -> Json:
    """A subject's version: GET /subjects/{s}/versions/{v}, a lookup, an item of GET /schemas."""
    extras = wants_extras(request) if guid is None else guid
    out: Json = {"subject": found.subject, "version": found.version, "id": found.schema_id}
    out.update(schema_fields(found.schema, text_of(request, found.schema, fmt), guid=extras))
    if extras and found.deleted:
        out["deleted"] = True
    return out


def schema(request: Request, view: SchemaView, fmt: str = "") -> Json:
    """GET /schemas/ids/{id} and /schemas/guids/{guid}."""
    return schema_fields(view, text_of(request, view, fmt), guid=wants_extras(request))


def config(view: ConfigView, *keys: str) -> Json:
    """A config under the keys asked (``compatibilityLevel`` for a GET, ``compatibility`` for a PUT)."""
    out: Json = {key: str(view.compatibility) for key in keys}
    if view.normalize is not None:
        out["normalize"] = view.normalize
    return out


def page(items: list[Any], offset: int, limit: int) -> list[Any]:
    """Confluent's paging: from ``offset`` (negative: 0), at most ``limit`` (negative: all)."""
    start = max(offset, 0)
    return items[start:] if limit < 0 else items[start : start + limit]
