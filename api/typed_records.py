"""Typed records: a record's key or value decoded back to JSON with the registered schema that its
Confluent framing names (magic byte 0, a 4-byte big-endian id, registry/framing.py). The HTTP records
read uses it (``decode=schema``, api/routes/records.py); it holds no HTTP so that the console's record
browser can share it.

A field decodes when its id is registered and its payload is a value of the schema that uses every byte:
Avro's binary encoding to Avro's JSON encoding (registry/formats/avro_codec.py), a Protobuf message (of
the message its indexes name) to protobuf's JSON mapping, a JSON Schema payload parsed and validated.
Anything else stays bytes, with the reason it did not decode; no client byte makes decoding raise.

Schemas are read from the registry (the metadata store: blocking, so callers run this in a thread) once
per id per ``SchemaReader``, with the subject and version that use the id: the topic's own
TopicNameStrategy subject when it is one of them, else the first. Ids in the header form (a
``__value_schema_id`` header with a GUID) are not decoded here.

A reader given ``may_read`` (the console's record browser) considers only the subjects it allows, as the
registry's ``GET /schemas/ids/{id}`` asks READ on a subject holding the schema: an id whose subjects it may
read none of stays bytes, and none of them is named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from api.models import Encoding, record_out
from registry.errors import InvalidSchema, SchemaNotFound
from registry.formats.base import ParsedSchema
from registry.formats.payload import InvalidPayload
from registry.framing import ID_PREFIX, MAGIC_ID
from registry.service import SchemaRegistry
from storage.records import Record


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """The registered schema a field names: its id and type, and a subject and version using it (None
    when every version using it was deleted permanently)."""

    schema_id: int
    schema_type: str
    subject: str | None
    version: int | None

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.schema_id,
            "type": self.schema_type,
            "subject": self.subject,
            "version": self.version,
        }


@dataclass(frozen=True, slots=True)
class Typed:
    """A field decoded: ``value`` is JSON-ready (dicts, lists, strings, numbers, booleans, None)."""

    value: object
    schema: SchemaInfo


@dataclass(frozen=True, slots=True)
class Undecoded:
    """A field that stays bytes, and why."""

    reason: str


@dataclass(frozen=True, slots=True)
class _Known:
    info: SchemaInfo
    parsed: ParsedSchema


class SchemaReader:
    """Decodes the fields of one answer's records; caches each id's schema for its lifetime."""

    def __init__(
        self, registry: SchemaRegistry, topic: str, may_read: Callable[[str], bool] | None = None
    ) -> None:
        self._registry = registry
        self._topic = topic
        self._may_read = may_read
        self._schemas: dict[tuple[int, str], _Known | Undecoded] = {}

    def decode(self, data: bytes, field: str) -> Typed | Undecoded:
        """``data``, a non-null key (``field`` "key") or value ("value"), decoded."""
        if len(data) < ID_PREFIX or data[0] != MAGIC_ID:
            first = f"starts with byte {data[0]}" if data else "is empty"
            return Undecoded(f"no schema id: the {field} {first}, not magic byte 0 and a 4-byte id")
        schema_id = int.from_bytes(data[1:ID_PREFIX], "big")
        known = self._schemas.get((schema_id, field))
        if known is None:
            known = self._schemas[(schema_id, field)] = self._load(schema_id, field)
        if isinstance(known, Undecoded):
            return known
        try:
            return Typed(decode_payload(known.parsed, data[ID_PREFIX:]), known.info)
        except InvalidPayload as exc:
            return Undecoded(f"not a value of schema id {schema_id}: {exc}")
        except RecursionError:
            return Undecoded(f"not a value of schema id {schema_id}: it nests too deeply to decode")

    def _load(self, schema_id: int, field: str) -> _Known | Undecoded:
        try:
            parsed = self._registry.parsed(schema_id)
            usages = self._registry.schema_versions(schema_id, include_deleted=True)
        except SchemaNotFound:
            return Undecoded(f"schema id {schema_id} is not registered")
        except InvalidSchema as exc:
            return Undecoded(f"schema id {schema_id} does not parse: {exc.message}")
        if self._may_read is not None:
            usages = [(s, v) for s, v in usages if self._may_read(s)]
            if not usages:
                return Undecoded(f"not allowed to read a subject holding schema id {schema_id}")
        own = f"{self._topic}-{field}"
        subject, version = next(
            ((s, v) for s, v in usages if s == own), usages[0] if usages else (None, None)
        )
        return _Known(SchemaInfo(schema_id, str(parsed.schema_type), subject, version), parsed)


def typed_record_out(reader: SchemaReader, record: Record, encoding: Encoding) -> dict[str, object]:
    """``models.record_out``'s dict, with each field that decodes as its JSON value and a
    ``{field}_schema`` object, and each non-null one that does not left in ``encoding`` with a
    ``{field}_decode_error`` reason."""
    decoded = {
        field: reader.decode(data, field)
        for field, data in (("key", record.key), ("value", record.value))
        if data is not None
    }
    key, value = (decoded.get(f) for f in ("key", "value"))
    # Decoded fields are left out of the plain rendering: their bytes need not be valid in ``encoding``.
    plain = replace(
        record,
        key=None if isinstance(key, Typed) else record.key,
        value=None if isinstance(value, Typed) else record.value,
    )
    out = record_out(plain, encoding)
    for field, result in decoded.items():
        if isinstance(result, Typed):
            out[field] = result.value
            out[f"{field}_schema"] = result.schema.as_json()
        else:
            out[f"{field}_decode_error"] = result.reason
    return out


def decode_payload(schema: ParsedSchema, payload: bytes) -> object:
    """The payload after the schema id as a JSON value (``InvalidPayload`` if it is not one of the
    schema's, every byte used)."""
    # The format modules are imported here, not at the top (registry/formats/lazy.py): a schema of the
    # type was parsed, so they are loaded already.
    from registry.formats import protobuf_payload
    from registry.formats.avro import AvroSchema
    from registry.formats.jsonschema import JsonSchema
    from registry.formats.protobuf import ProtobufSchema

    if isinstance(schema, AvroSchema):
        return schema.codec.to_json(payload)
    if isinstance(schema, ProtobufSchema):
        _, message = protobuf_payload.decode_framed(schema, payload)
        return protobuf_payload.to_json(message, schema)
    if isinstance(schema, JsonSchema):
        return schema.validate_payload(payload)
    raise InvalidPayload(f"no decoder for a {schema.schema_type} schema")
