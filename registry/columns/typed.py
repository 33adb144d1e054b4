"""A batch of a topic's values as typed rows, grouped by the schema that wrote each one: the transform step
of the lake's typed tables, sans IO (schemas come through ``parsed_by_id``).

Two ways to name the schema, Redpanda's two typed modes:
- **framed** (``value_schema_id_prefix``): each value carries Confluent's prefix framing (magic byte 0, a
  4-byte big-endian id, and for Protobuf the message indexes; registry/framing.py), and is decoded with the
  schema (and message) it names.
- **fixed** (``value_schema_latest``): every value is a bare payload of one given schema and message.

Each value either becomes a row of its group (one group per schema id and Protobuf message, in the order
they first appear) or a ``Refusal`` with its position and the reason: no framing, an id the registry does
not hold, a schema without a table form (``Unmappable``), a payload that does not fit. A null value (a
tombstone) is neither: it is listed in ``tombstones``, since whether it means anything (a delete in an
upsert table) is the writer's business. Nothing a client wrote makes ``convert`` raise.

The header form of the framing (a ``__value_schema_id`` header with a schema GUID) is not read here: such
values are refused as unframed.

Shapes are built once per (schema id, message) and kept, with the reason when there is none, so a batch of
one schema costs one registry lookup.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from registry.columns import ColumnShape, Unmappable, columns_for
from registry.errors import InvalidSchema, SchemaNotFound
from registry.formats.base import ParsedSchema
from registry.formats.payload import InvalidPayload
from registry.formats.protobuf import ProtobufSchema
from registry.formats.protobuf_wire import read_message_indexes
from registry.framing import ID_PREFIX, MAGIC_ID

_ID = struct.Struct(">I")


@dataclass
class Group:
    """The rows of the values one schema (one Protobuf message) wrote, with their positions in the batch."""

    schema_id: int
    message: str | None
    shape: ColumnShape
    positions: list[int] = field(default_factory=list)
    rows: list[dict[str, object]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Refusal:
    position: int
    schema_id: int | None
    reason: str


@dataclass
class Converted:
    groups: list[Group] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    tombstones: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Fixed:
    """Every value is a bare payload of this schema (and Protobuf message, by default the first)."""

    schema_id: int
    message: str | None = None


class TypedRows:
    def __init__(self, parsed_by_id: Callable[[int], ParsedSchema]) -> None:
        self._parsed_by_id = parsed_by_id
        self._parsed: dict[int, ParsedSchema | str] = {}
        self._shapes: dict[tuple[int, str | None], ColumnShape | str] = {}

    def convert(self, values: Sequence[bytes | None], fixed: Fixed | None = None) -> Converted:
        out = Converted()
        groups: dict[tuple[int, str | None], Group] = {}
        for position, value in enumerate(values):
            if value is None:
                out.tombstones.append(position)
                continue
            try:
                schema_id, message, payload = self._locate(value, fixed)
            except InvalidPayload as exc:
                out.refusals.append(Refusal(position, None, str(exc)))
                continue
            shape = self._shape(schema_id, message)
            if isinstance(shape, str):
                out.refusals.append(Refusal(position, schema_id, shape))
                continue
            try:
                row = shape.row(payload)
            except InvalidPayload as exc:
                out.refusals.append(Refusal(position, schema_id, f"schema id {schema_id}: {exc}"))
                continue
            group = groups.get((schema_id, message))
            if group is None:
                group = groups[schema_id, message] = Group(schema_id, message, shape)
                out.groups.append(group)
            group.positions.append(position)
            group.rows.append(row)
        return out

    def _locate(self, value: bytes, fixed: Fixed | None) -> tuple[int, str | None, bytes]:
        """The schema id, the Protobuf message (None for other formats) and the payload of ``value``."""
        if fixed is not None:
            parsed = self._schema(fixed.schema_id)
            if isinstance(parsed, ProtobufSchema):
                return fixed.schema_id, fixed.message or parsed.message_name([0]), value
            return fixed.schema_id, None, value
        if len(value) < ID_PREFIX or value[0] != MAGIC_ID:
            raise InvalidPayload("the value has no schema id (Confluent framing: magic byte 0 and an id)")
        (schema_id,) = _ID.unpack_from(value, 1)
        parsed = self._schema(schema_id)
        if not isinstance(parsed, ProtobufSchema):
            return schema_id, None, value[ID_PREFIX:]
        indexes, used = read_message_indexes(value, ID_PREFIX)
        return schema_id, parsed.message_name(indexes), value[ID_PREFIX + used :]

    def _schema(self, schema_id: int) -> ParsedSchema | None:
        """The schema ``schema_id`` names, or None when it cannot be had (the shape says why)."""
        found = self._parsed.get(schema_id)
        if found is None:
            try:
                found = self._parsed_by_id(schema_id)
            except SchemaNotFound:
                found = f"schema id {schema_id} is not registered"
            except InvalidSchema as exc:
                found = f"schema id {schema_id} does not parse: {exc}"
            self._parsed[schema_id] = found
        return None if isinstance(found, str) else found

    def _shape(self, schema_id: int, message: str | None) -> ColumnShape | str:
        key = (schema_id, message)
        shape = self._shapes.get(key)
        if shape is None:
            parsed = self._parsed.get(schema_id)
            if parsed is None or isinstance(parsed, str):
                shape = parsed or f"schema id {schema_id} is not registered"
            else:
                try:
                    shape = columns_for(parsed, message)
                except Unmappable as exc:
                    shape = f"schema id {schema_id} has no table form: {exc}"
            self._shapes[key] = shape
        return shape
