"""Records' keys and values as JSON, with the registered schema that wrote them: what the console's record
browser shows for Avro, Protobuf and JSON Schema data.

A serializer of Confluent's says which schema wrote a key or a value in one of two ways::

    prefix form (the default), in the field itself:
        magic      int8                 0
        schema id  int32, big-endian    a registered id
        indexes    Protobuf only        message indexes (registry/formats/protobuf_wire.py)
        payload                         the Avro binary, JSON text or Protobuf message

    header form (confluent-kafka's ``header_schema_id_serializer``), in a record header named
    ``__key_schema_id`` or ``__value_schema_id``:
        magic      int8                 1
        guid       16 bytes             the schema's GUID (uuid.UUID.bytes)
        indexes    Protobuf only
    and the field holds the payload alone.

A field in neither form is not typed (``decode`` answers None) and the browser shows its bytes as before.
A field in one of them is decoded with the format's codec (``avro_codec``, ``protobuf_payload``, the JSON
schema's validator), or answered with the reason it is not: an id no version uses, a payload the schema
does not accept, a subject the reader may not read.

**Which subject and version.** An id may be a version of several subjects. The one shown is the subject
TopicNameStrategy names (``{topic}-key`` or ``{topic}-value``) when it holds the id, else the first other in
code-point order; live versions before soft-deleted ones, the latest first. Only subjects the caller may
read are considered (``may_read``, the registry's READ on a subject holding the schema): a reader of the
topic who may read none of them sees neither the value nor the subject's name.

**JSON.** The value is plain JSON: Avro's JSON encoding (a union branch wrapped in ``{"type": value}``),
protobuf's canonical JSON mapping, or the JSON document itself. A float that JSON cannot write (NaN, an
infinity) becomes the string protobuf's mapping uses (``"NaN"``, ``"Infinity"``, ``"-Infinity"``), and an
integer a JavaScript number cannot hold exactly (beyond 2**53 - 1 either way) its decimal string, as that
mapping writes every 64-bit integer: the browser parses the answer, and must show the value that was
written.

A ``RecordDecoder`` serves one page of records: it resolves each id once (two store reads and a parse,
which the registry's parse cache shares with its routes) and never raises for client bytes.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from registry.errors import InvalidSchema, SchemaNotFound
from registry.formats import protobuf_payload
from registry.formats.avro import AvroSchema
from registry.formats.base import ParsedSchema
from registry.formats.jsonschema import JsonSchema
from registry.formats.payload import InvalidPayload
from registry.formats.protobuf import ProtobufSchema
from registry.service import SchemaRegistry

Field = Literal["key", "value"]
MAGIC_ID = 0
MAGIC_GUID = 1
ID_PREFIX = 5  # magic and id
GUID_HEADER = 17  # magic and GUID
HEADERS: dict[Field, str] = {"key": "__key_schema_id", "value": "__value_schema_id"}
MAX_SAFE_INTEGER = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


@dataclass(frozen=True, slots=True)
class Typed:
    """A key or value that names a schema: decoded (``error`` None, ``json`` the value) or not, and why.

    ``schema_id`` is None only for a header whose GUID resolves to no schema; ``subject`` and ``version``
    are None when no readable subject holds the id; ``record`` is the Protobuf message or the Avro named
    type the payload holds, where the format has one."""

    schema_id: int | None
    schema_type: str | None = None
    subject: str | None = None
    version: int | None = None
    record: str | None = None
    json: object = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where a field's schema is named: by id or by GUID, and where its payload (indexes first) starts."""

    schema_id: int | None
    guid: str | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class _Known:
    """One id, resolved: its parsed schema and the versions using it, as (subject, version, deleted)."""

    schema_id: int
    parsed: ParsedSchema
    usages: tuple[tuple[str, int, bool], ...]


def frame(data: bytes | None, guid_header: bytes | None) -> _Frame | None:
    """How the field names its schema, or None if it names none (a null field, other bytes)."""
    if data is None:
        return None
    if guid_header is not None:
        if len(guid_header) == GUID_HEADER and guid_header[0] == MAGIC_GUID:
            return _Frame(None, str(uuid.UUID(bytes=bytes(guid_header[1:]))), bytes(data))
        return None
    if len(data) >= ID_PREFIX and data[0] == MAGIC_ID:
        return _Frame(int.from_bytes(data[1:ID_PREFIX], "big"), None, bytes(data[ID_PREFIX:]))
    return None


def names_a_schema(data: bytes | None, headers: Sequence[tuple[str, bytes | None]], field: Field) -> bool:
    """Whether ``decode`` would try this field: a cheap test, so that a page without typed records never
    asks the registry anything."""
    return frame(data, _guid_header(headers, field)) is not None


def _guid_header(headers: Sequence[tuple[str, bytes | None]], field: Field) -> bytes | None:
    """The first ``__{field}_schema_id`` header's value, as confluent-kafka's deserializer reads it."""
    wanted = HEADERS[field]
    return next((value for name, value in headers if name == wanted and value is not None), None)


class RecordDecoder:
    """Decodes the keys and values of one topic's records for one reader; not thread-safe (one page, one
    thread)."""

    def __init__(self, registry: SchemaRegistry, topic: str, may_read: Callable[[str], bool]) -> None:
        self._registry = registry
        self._topic = topic
        self._may_read = may_read
        self._ids: dict[int, _Known | str] = {}
        self._guids: dict[str, int | None] = {}

    def decode(
        self, data: bytes | None, headers: Sequence[tuple[str, bytes | None]], field: Field
    ) -> Typed | None:
        """The field as JSON with its schema, or why it is not; None when it names no schema."""
        found = frame(data, _guid_header(headers, field))
        if found is None:
            return None
        schema_id = found.schema_id if found.guid is None else self._by_guid(found.guid)
        if schema_id is None:
            return Typed(None, error=f"schema guid {found.guid} is not registered")
        known = self._resolve(schema_id)
        if isinstance(known, str):
            return Typed(schema_id, error=known)
        chosen = self._usage(known, field)
        if chosen is None:
            return Typed(schema_id, error=f"not allowed to read a subject holding schema id {schema_id}")
        subject, version = chosen
        kind = str(known.parsed.schema_type)
        try:
            record, value = _decode(known.parsed, found.payload)
        except InvalidPayload as exc:
            return Typed(schema_id, kind, subject, version, error=str(exc))
        return Typed(schema_id, kind, subject, version, record, _plain(value))

    def _by_guid(self, guid: str) -> int | None:
        if guid not in self._guids:
            try:
                self._guids[guid] = self._registry.schema_by_guid(guid).schema_id
            except SchemaNotFound:
                self._guids[guid] = None
        return self._guids[guid]

    def _resolve(self, schema_id: int) -> _Known | str:
        """The id's schema and usages, or why it cannot be used (remembered either way)."""
        if schema_id not in self._ids:
            try:
                live = set(self._registry.schema_versions(schema_id))
                every = self._registry.schema_versions(schema_id, include_deleted=True)
                parsed = self._registry.parsed(schema_id)
            except SchemaNotFound:
                self._ids[schema_id] = f"schema id {schema_id} is not registered"
            except InvalidSchema as exc:  # stored before a parser change: shown, not fatal
                self._ids[schema_id] = f"schema id {schema_id} does not parse: {exc}"
            else:
                usages = tuple((s, v, (s, v) not in live) for s, v in every)
                self._ids[schema_id] = _Known(schema_id, parsed, usages)
        return self._ids[schema_id]

    def _usage(self, known: _Known, field: Field) -> tuple[str, int] | None:
        """The (subject, version) shown for the id: see the module docstring."""
        preferred = f"{self._topic}-{field}"
        readable = [u for u in known.usages if self._may_read(u[0])]
        if not readable:
            return None
        # Live first, then the preferred subject, then code-point order; the latest version of those.
        ranked = sorted(readable, key=lambda u: (u[2], u[0] != preferred, u[0], -u[1]))
        subject, version, _deleted = ranked[0]
        return subject, version


def _decode(parsed: ParsedSchema, payload: bytes) -> tuple[str | None, object]:
    """(the record's type name, its JSON value); InvalidPayload when the payload does not fit."""
    if isinstance(parsed, AvroSchema):
        names = parsed.record_names()
        return (names[0] if names else None), parsed.codec.to_json(payload)
    if isinstance(parsed, ProtobufSchema):
        name, message = protobuf_payload.decode_framed(parsed, payload)
        return name, protobuf_payload.to_json(message, parsed)
    if isinstance(parsed, JsonSchema):
        names = parsed.record_names()
        return (names[0] if names else None), parsed.validate_payload(payload)
    raise InvalidPayload(f"no codec reads {parsed.schema_type} payloads")


def _plain(value: object) -> object:
    """``value`` with the floats JSON cannot write and the integers JavaScript cannot hold as strings
    (module docstring)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
