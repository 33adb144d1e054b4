"""Typed HTTP produce: keys and values given as JSON with a registered schema, encoded by the agent in
Confluent's wire format, in the style of Confluent's REST Proxy v2.

A body names a schema per field, by id (``value_schema_id``) or by subject and version
(``value_subject``, ``value_schema_version``: a number, ``latest`` or ``-1``, the latest by default); each
record's ``value`` is then any JSON value, encoded as the schema's format says:

- Avro: Avro's JSON encoding (a non-null union value wrapped as ``{"branch": value}``) to the binary
  encoding (registry/formats/avro_codec.py);
- Protobuf: protobuf's canonical JSON mapping to the schema's first message, as REST Proxy does, after
  its message indexes (registry/formats/protobuf_payload.py); a field the message does not declare is
  refused;
- JSON Schema: the value validated against the schema, then written as compact UTF-8 JSON.

Each is framed as confluent-kafka's serializers frame it (registry/framing.py): magic byte 0, the 4-byte
big-endian id, then the payload, so any Confluent deserializer reads it back. A null key or value stays
null (no key; a tombstone). Untyped fields and headers keep the body's ``encoding``.

The encoded records then take the request's usual path, validation on produce included. Failures:
``UnknownSchema`` (40408) for an id, subject or version the registry does not hold; ``TypedValueInvalid``
(42221, ``record`` in the body) for a value its schema refuses, naming the record and the reason;
``InvalidPayload`` (42206) for a body that names a schema twice or a malformed subject or version.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from agents.encode import ProduceRecord
from api.context import HttpContext
from api.models import Encoding, decode_field, header_name
from api.produce_body import TypedBody, TypedRecords
from registry.errors import (
    InvalidSchema,
    InvalidSubject,
    InvalidVersion,
    SchemaNotFound,
    SubjectNotFound,
    VersionNotFound,
)
from registry.formats.base import ParsedSchema
from registry.formats.payload import InvalidPayload as PayloadRefused
from registry.framing import MAGIC_ID
from registry.service import SchemaRegistry
from storage import records
from storage.errors import InvalidPayload, TypedValueInvalid, UnknownSchema

FIELDS = ("key", "value")


@dataclass(frozen=True, slots=True)
class Target:
    """The schema a field is encoded with: its id, and the parsed schema."""

    schema_id: int
    schema: ParsedSchema

    def prefix(self) -> bytes:
        return bytes([MAGIC_ID]) + self.schema_id.to_bytes(4, "big")


async def encode_typed(ctx: HttpContext, typed: TypedRecords) -> list[ProduceRecord]:
    """The body's records, typed fields encoded: in a worker thread, which reads the schemas from the
    metadata store and runs the format libraries."""
    if ctx.schema_registry is None:
        raise UnknownSchema("this agent serves no schema registry: typed keys and values cannot be encoded")
    return await asyncio.to_thread(encode_records, ctx.schema_registry(), typed.body)


def encode_records(registry: SchemaRegistry, body: TypedBody) -> list[ProduceRecord]:
    targets = {field: resolve(registry, body, field) for field in FIELDS}
    encoding: Encoding = body.get("encoding", "utf8")
    out = []
    for i, rec in enumerate(body["records"]):
        headers = tuple(
            records.Header(
                header_name(h["name"], i, j), decode_field(h.get("value"), encoding, i, "value", j)
            )
            for j, h in enumerate(rec.get("headers", ()))
        )
        key, value = (_field(targets[f], rec.get(f), encoding, i, f) for f in FIELDS)
        out.append(ProduceRecord(key, value, headers, rec.get("partition"), rec.get("timestamp")))
    return out


def resolve(registry: SchemaRegistry, body: TypedBody, field: str) -> Target | None:
    """The schema the body names for ``field`` (``key`` or ``value``), or None when it names none."""
    given: dict[str, Any] = dict(body)
    schema_id: int | None = given.get(f"{field}_schema_id")
    subject: str | None = given.get(f"{field}_subject")
    version: int | str | None = given.get(f"{field}_schema_version")
    if schema_id is not None and subject is not None:
        raise InvalidPayload(f"{field}_schema_id and {field}_subject: name the {field}'s schema one way")
    if version is not None and subject is None:
        raise InvalidPayload(f"{field}_schema_version: a version is of a subject; give {field}_subject")
    if schema_id is None and subject is None:
        return None
    try:
        if subject is not None:
            schema_id = registry.version(subject, "latest" if version is None else version).schema_id
        assert schema_id is not None
        return Target(schema_id, registry.parsed(schema_id))
    except (SubjectNotFound, VersionNotFound, SchemaNotFound) as exc:
        raise UnknownSchema(f"{field}: {exc.message}") from None
    except (InvalidSubject, InvalidVersion) as exc:
        raise InvalidPayload(
            f"{field}_{'subject' if isinstance(exc, InvalidSubject) else 'schema_version'}: {exc.message}"
        ) from None
    except InvalidSchema as exc:
        # Registered, so it parsed once; a stricter parser since may refuse it. Nothing can encode with it.
        raise UnknownSchema(f"{field}: schema id {schema_id} does not parse: {exc.message}") from None


def _field(target: Target | None, value: object, encoding: Encoding, i: int, name: str) -> bytes | None:
    if target is None:
        if value is not None and not isinstance(value, str):
            raise InvalidPayload(
                f"records[{i}].{name}: a string in the body's encoding, unless the body names a schema "
                f"for the {name} ({name}_schema_id or {name}_subject)"
            )
        return decode_field(value, encoding, i, name)
    if value is None:
        return None
    try:
        return target.prefix() + encode_payload(target.schema, value)
    except PayloadRefused as exc:
        reason = str(exc)
    except RecursionError:
        reason = "the value nests too deeply to encode"
    except UnicodeEncodeError:
        # A lone surrogate ("\\ud800") in a string: it has no UTF-8 form.
        reason = "a string in it is not valid Unicode text"
    raise TypedValueInvalid(
        f"record {i}: the {name} does not fit schema id {target.schema_id}: {reason}", i
    ) from None


def encode_payload(schema: ParsedSchema, value: object) -> bytes:
    """A JSON value as the payload that follows the schema id (``PayloadRefused`` if it does not fit)."""
    # The format modules are imported here, not at the top (registry/formats/lazy.py): a schema of the
    # type was parsed, so they are loaded already.
    from registry.formats import protobuf_payload
    from registry.formats.avro import AvroSchema
    from registry.formats.jsonschema import JsonSchema
    from registry.formats.protobuf import ProtobufSchema

    if isinstance(schema, AvroSchema):
        return schema.codec.from_json(value)
    if isinstance(schema, ProtobufSchema):
        names = schema.record_names()
        if not names:
            raise PayloadRefused("the schema declares no message")
        return protobuf_payload.encode_framed(schema, names[0], value)
    if isinstance(schema, JsonSchema):
        schema.validate_value(value)
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        except ValueError as exc:
            # NaN or an infinity (JSON has no such number), or a lone surrogate (no UTF-8 form): values
            # the body's lenient parser reads.
            raise PayloadRefused(f"not JSON text: {exc}") from None
    raise PayloadRefused(f"no encoder for a {schema.schema_type} schema")
