"""Registered schemas as table columns: the Arrow (and so Iceberg) type of a schema's values, and each
payload decoded into a row of those columns, for the lake's typed tables. Sans IO.

``columns_for(parsed, message)`` gives the ``ColumnShape`` of one registered schema (of one Protobuf
message): ``arrow`` is the value's columns and ``row(payload)`` decodes one payload (without its Confluent
framing) into a dict with exactly those columns. A record value becomes its fields as top-level columns; any
other value one column, ``value``.

Why Arrow: pyiceberg builds an Iceberg schema from an Arrow schema (assigning field ids) and appends Arrow
tables, and every type used here has an Iceberg counterpart: bool, int32, int64, float32, float64,
decimal128 (precision at most 38), date32, time64[us], timestamp[us] (with UTC or without a zone), string,
binary, fixed_size_binary, struct, list and map. Timestamps of a finer unit are kept in microseconds, as
Iceberg v2 stores them.

Invariants:
- ``columns_for`` raises ``Unmappable`` for a schema that has no table form (a recursive type, a field that
  can only be null, a JSON Schema without explicit types, a column named ``strata``, which the typed
  tables' metadata struct takes); a writer sends such records to the dead-letter table with the reason.
- ``row`` raises ``InvalidPayload`` (registry/formats/payload.py) for a payload that does not fit the
  schema, and nothing else, so no client byte can stop a writer.
- Nullability: a column is nullable unless the schema says a value is always there (an Avro field whose type
  is not a union with null, a Protobuf proto3 scalar without presence); Iceberg requires a required column
  in every row, and a later schema may only relax it.

The type mapping of each format is in its module's docstring (``avro``, ``protobuf``, ``jsonschema``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from registry.formats.avro import AvroSchema
from registry.formats.base import ParsedSchema
from registry.formats.jsonschema import JsonSchema
from registry.formats.protobuf import ProtobufSchema

# The typed tables' metadata struct (partition, offset, timestamp, key, headers, schema id).
RESERVED_COLUMN = "strata"
VALUE_COLUMN = "value"


class Unmappable(ValueError):
    """A schema, or a part of one, that has no table form; the message says which part and why."""


@dataclass(frozen=True, slots=True)
class ColumnShape:
    """The columns of one schema's values, and the decoder of one payload into a row of them."""

    arrow: pa.Schema
    row: Callable[[bytes], dict[str, object]]


def columns_for(parsed: ParsedSchema, message: str | None = None) -> ColumnShape:
    """The columns of ``parsed``'s values; ``message`` names the Protobuf message (its full name), by
    default the schema's first."""
    from registry.columns import avro, jsonschema, protobuf

    if isinstance(parsed, AvroSchema):
        shape = avro.shape(parsed)
    elif isinstance(parsed, ProtobufSchema):
        shape = protobuf.shape(parsed, message)
    elif isinstance(parsed, JsonSchema):
        shape = jsonschema.shape(parsed)
    else:
        raise Unmappable(f"schemas of type {parsed.schema_type} have no table form")
    if RESERVED_COLUMN in shape.arrow.names:
        raise Unmappable(
            f"a value field named {RESERVED_COLUMN!r}: the table's metadata column has that name"
        )
    return shape


def top_level(value_type: pa.DataType, nullable: bool) -> tuple[pa.Schema, bool]:
    """The columns of a value of ``value_type``: a struct's fields, or one ``value`` column; and whether a
    converted value must be wrapped as ``{"value": ...}`` to be a row."""
    if pa.types.is_struct(value_type):
        return pa.schema([value_type.field(i) for i in range(value_type.num_fields)]), False
    return pa.schema([pa.field(VALUE_COLUMN, value_type, nullable=nullable)]), True
