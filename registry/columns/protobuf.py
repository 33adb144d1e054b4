"""Protobuf messages as table columns (registry/columns/__init__.py says what a shape is).

The shape is one message's (by default the schema's first): its fields are the table's columns, and
``row`` takes that message's bytes (after the Confluent framing and the message indexes). The type
mapping (Redpanda's, where it documents one):

| Protobuf | Arrow / Iceberg |
|---|---|
| double, float, bool, string, bytes | float64, float32, bool, string, binary |
| int32, sint32, sfixed32 | int32 |
| int64, sint64, sfixed64, uint32, fixed32 | int64 (an unsigned 32-bit value fits a signed 64-bit one) |
| uint64, fixed64 | decimal128(20, 0) (every unsigned 64-bit value, exactly) |
| enum | string (the value's name; a number the enum does not declare, as its digits) |
| message | struct, null when unset |
| repeated; map<K, V> | list; map<K, V> |
| google.protobuf.Timestamp | timestamp[us, UTC] |
| google.protobuf wrappers (StringValue, Int64Value, ...) | the wrapped type, null when unset |

A scalar is nullable when it has presence (proto2 optional, proto3 ``optional``, a oneof member): unset, it
is null; a proto3 scalar without presence always has a value (its default). A recursive message is
``Unmappable``.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from registry.columns import ColumnShape, Unmappable, top_level
from registry.formats import protobuf_payload
from registry.formats.protobuf import ProtobufSchema

_SCALARS: dict[int, pa.DataType] = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.decimal128(20, 0),
    FieldDescriptor.TYPE_FIXED64: pa.decimal128(20, 0),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
}
_UNSIGNED_64 = frozenset({FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64})
_TIMESTAMP = "google.protobuf.Timestamp"
_WRAPPERS = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)


@dataclass(frozen=True, slots=True)
class _Node:
    type: pa.DataType
    nullable: bool
    convert: Callable[[Any], Any]


def shape(schema: ProtobufSchema, message: str | None = None) -> ColumnShape:
    name = message if message is not None else schema.message_name([0])
    try:
        descriptor = schema.pool.FindMessageTypeByName(name)
    except KeyError:
        raise Unmappable(f"the schema declares no message {name}") from None
    node = _message(descriptor, name, ())
    arrow, _ = top_level(node.type, nullable=False)
    convert = node.convert

    def row(payload: bytes) -> dict[str, object]:
        value = convert(protobuf_payload.decode(schema, name, payload))
        assert isinstance(value, dict)
        return value

    return ColumnShape(arrow, row)


def _message(descriptor: Descriptor, path: str, stack: tuple[str, ...]) -> _Node:
    if descriptor.full_name in stack:
        raise Unmappable(f"{path}: the recursive message {descriptor.full_name} has no table form")
    inner = (*stack, descriptor.full_name)
    fields: list[pa.Field] = []
    converters: list[tuple[str, FieldDescriptor, Callable[[Any], Any], bool]] = []
    for field in descriptor.fields:
        node = _field(field, f"{path}.{field.name}", inner)
        fields.append(pa.field(field.name, node.type, nullable=node.nullable))
        # A singular field with presence reads as null when unset (HasField); without, its value.
        unset_is_null = not field.is_repeated and field.has_presence
        converters.append((field.name, field, node.convert, unset_is_null))

    def convert(message: Message) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, _field_descriptor, field_convert, unset_is_null in converters:
            if unset_is_null and not message.HasField(name):
                out[name] = None
            else:
                out[name] = field_convert(getattr(message, name))
        return out

    return _Node(pa.struct(fields), False, convert)


def _field(field: FieldDescriptor, path: str, stack: tuple[str, ...]) -> _Node:
    if field.is_repeated:
        message_type = field.message_type
        if message_type is not None and message_type.GetOptions().map_entry:
            key = _single(message_type.fields_by_name["key"], f"{path}.key", stack)
            value = _single(message_type.fields_by_name["value"], f"{path}.value", stack)
            key_convert, value_convert = key.convert, value.convert
            return _Node(
                pa.map_(key.type, pa.field("value", value.type, nullable=value.nullable)),
                False,
                lambda m: [(key_convert(k), value_convert(v)) for k, v in m.items()],
            )
        item = _single(field, path, stack)
        item_convert = item.convert
        return _Node(
            pa.list_(pa.field("element", item.type, nullable=item.nullable)),
            False,
            lambda items: [item_convert(x) for x in items],
        )
    node = _single(field, path, stack)
    return _Node(node.type, node.nullable or field.has_presence, node.convert)


def _single(field: FieldDescriptor, path: str, stack: tuple[str, ...]) -> _Node:
    """One value of the field's type (an element, for a repeated field)."""
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        message_type = field.message_type
        assert message_type is not None  # a message field always names its message
        if message_type.full_name == _TIMESTAMP:
            return _Node(pa.timestamp("us", tz="UTC"), True, _timestamp_micros)
        if message_type.full_name in _WRAPPERS:
            wrapped = _single(message_type.fields_by_name["value"], path, stack)
            wrapped_convert = wrapped.convert
            return _Node(wrapped.type, True, lambda m: wrapped_convert(m.value))
        node = _message(message_type, path, stack)
        return _Node(node.type, True, node.convert)
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum_type = field.enum_type
        assert enum_type is not None  # an enum field always names its enum
        values = {v.number: v.name for v in enum_type.values}
        return _Node(pa.string(), False, lambda n: values.get(n, str(n)))
    if field.type in _UNSIGNED_64:
        return _Node(_SCALARS[field.type], False, decimal.Decimal)
    return _Node(_SCALARS[field.type], False, _same)


def _same(value: Any) -> Any:
    return value


def _timestamp_micros(message: Any) -> int:
    return int(message.seconds) * 1_000_000 + int(message.nanos) // 1000
