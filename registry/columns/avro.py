"""Avro values as table columns (registry/columns/__init__.py says what a shape is).

The type mapping (Redpanda's, where it documents one, so tables made by either look alike):

| Avro | Arrow / Iceberg |
|---|---|
| boolean, int, long, float, double | bool, int32, int64, float32, float64 |
| string; uuid | string |
| bytes, fixed | binary, fixed_size_binary |
| decimal (bytes or fixed), precision at most 38 | decimal128(precision, scale) |
| date; time-millis, time-micros | date32; time64[us] |
| timestamp-millis, -micros; local-timestamp-millis, -micros | timestamp[us, UTC]; timestamp[us] |
| enum | string (the symbol) |
| record | struct (the top-level record's fields are the table's columns) |
| array; map | list; map<string, value> |
| union of null and one type | that type, nullable |
| any other union | a struct of one nullable field per branch (see below) |

A union of several types is a struct with a field per branch, named after the branch's type (a named type
by its name without its namespace): the branch a value took is set, the others are null.

A field whose type can only be null, a recursive type, and a decimal beyond 38 digits are ``Unmappable``.
A logical type the table has no type for (timestamp-nanos, duration, or one Avro does not define) is its
underlying type, as the Avro specification says readers treat logical types they do not know.

Payloads are decoded by the schema's codec (fastavro, registry/formats/avro_codec.py) with named union
branches tagged, so a union value finds its branch exactly; an unnamed branch is found by the value's kind,
the first branch that takes it.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from registry.columns import VALUE_COLUMN, ColumnShape, Unmappable, top_level
from registry.formats.avro import AvroSchema
from registry.formats.payload import InvalidPayload

_MAX_DECIMAL_PRECISION = 38
_UTC = "UTC"


@dataclass(frozen=True, slots=True)
class _Node:
    type: pa.DataType
    nullable: bool
    convert: Callable[[Any], Any]
    # Which Python values this branch takes, when it is an unnamed branch of a union.
    accepts: Callable[[Any], bool]
    name: str


def _same(value: Any) -> Any:
    return value


def shape(schema: AvroSchema) -> ColumnShape:
    node = _Mapper(schema.named).map(schema.parsed, "$", ())
    arrow, wrap = top_level(node.type, node.nullable)
    codec = schema.codec
    convert = node.convert

    def row(payload: bytes) -> dict[str, object]:
        decoded = codec.decode_tagged(payload)
        if not decoded.complete:
            raise InvalidPayload(f"{decoded.size - decoded.consumed} bytes left after the Avro value")
        value = convert(decoded.value)
        if wrap:
            return {VALUE_COLUMN: value}
        assert isinstance(value, dict)
        return value

    return ColumnShape(arrow, row)


class _Mapper:
    def __init__(self, named: Mapping[str, Any]) -> None:
        self._named = named

    def map(self, node: Any, path: str, stack: tuple[str, ...]) -> _Node:
        if isinstance(node, list):
            return self._union(node, path, stack)
        if isinstance(node, str):
            if node in self._named:
                if node in stack:
                    raise Unmappable(f"{path}: the recursive type {node} has no table form")
                return self.map(self._named[node], path, stack)
            return _primitive(node, None, {}, path)
        kind = node["type"]
        if kind in ("record", "error"):
            return self._record(node, path, stack)
        if kind == "enum":
            return _Node(pa.string(), False, _same, lambda v: isinstance(v, str), node["name"])
        if kind == "array":
            item = self.map(node["items"], f"{path}[]", stack)
            item_convert = item.convert
            return _Node(
                pa.list_(pa.field("element", item.type, nullable=item.nullable)),
                False,
                lambda v: [item_convert(x) for x in v],
                lambda v: isinstance(v, list),
                "array",
            )
        if kind == "map":
            value = self.map(node["values"], f"{path}{{}}", stack)
            value_convert = value.convert
            return _Node(
                pa.map_(pa.string(), pa.field("value", value.type, nullable=value.nullable)),
                False,
                lambda v: [(k, value_convert(x)) for k, x in v.items()],
                lambda v: isinstance(v, dict),
                "map",
            )
        if kind == "fixed":
            if node.get("logicalType") == "decimal":
                return _decimal(node, path, node["name"])
            return _Node(pa.binary(int(node["size"])), False, bytes, _is_bytes, node["name"])
        return _primitive(kind, node.get("logicalType"), node, path)

    def _record(self, node: Mapping[str, Any], path: str, stack: tuple[str, ...]) -> _Node:
        name = str(node["name"])
        if name in stack:
            raise Unmappable(f"{path}: the recursive type {name} has no table form")
        fields: list[pa.Field] = []
        converters: list[tuple[str, Callable[[Any], Any]]] = []
        for f in node["fields"]:
            child = self.map(f["type"], f"{path}.{f['name']}", (*stack, name))
            fields.append(pa.field(f["name"], child.type, nullable=child.nullable))
            converters.append((f["name"], child.convert))

        def convert(datum: Any) -> Any:
            return {field: c(datum[field]) for field, c in converters}

        return _Node(pa.struct(fields), False, convert, lambda v: isinstance(v, dict), name)

    def _union(self, branches: list[Any], path: str, stack: tuple[str, ...]) -> _Node:
        others = [b for b in branches if b != "null"]
        has_null = len(others) < len(branches)
        if not others:
            raise Unmappable(f"{path}: a value that can only be null has no column type")
        mapped = [self.map(b, path, stack) for b in others]
        if len(mapped) == 1:
            only = mapped[0]
            inner = only.convert

            def convert_one(value: Any) -> Any:
                if value is None:
                    return None
                return inner(value[1] if isinstance(value, tuple) else value)

            return _Node(only.type, has_null or only.nullable, convert_one, only.accepts, only.name)
        return _branches(mapped, others, has_null, path)


def _branches(mapped: list[_Node], others: list[Any], has_null: bool, path: str) -> _Node:
    """A union of several types: a struct of one nullable field per branch."""
    names: list[str] = []
    for node in mapped:
        short = node.name.rpartition(".")[2]
        names.append(short if short not in names else f"{short}_{len(names)}")
    by_full_name = {
        (b if isinstance(b, str) else b.get("name")): i for i, b in enumerate(others) if _named(b)
    }
    fields = [pa.field(n, node.type, nullable=True) for n, node in zip(names, mapped, strict=True)]

    def convert(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, tuple):
            index = by_full_name.get(value[0])
            value = value[1]
        else:
            index = next((i for i, node in enumerate(mapped) if node.accepts(value)), None)
        if index is None:
            raise InvalidPayload(f"{path}: a union value of no branch of the schema")
        row: dict[str, Any] = dict.fromkeys(names)
        row[names[index]] = mapped[index].convert(value)
        return row

    return _Node(pa.struct(fields), has_null, convert, lambda v: True, "union")


_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def _named(branch: Any) -> bool:
    """A branch fastavro tags with its name: a named type, defined here or referred to by its name."""
    if isinstance(branch, str):
        return branch not in _PRIMITIVES
    return isinstance(branch, dict) and branch.get("type") in ("record", "error", "enum", "fixed")


def _is_bytes(value: Any) -> bool:
    return isinstance(value, bytes | bytearray)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _primitive(kind: str, logical: str | None, node: Mapping[str, Any], path: str) -> _Node:
    if kind == "null":
        raise Unmappable(f"{path}: a value that can only be null has no column type")
    if logical == "decimal" and kind == "bytes":
        return _decimal(node, path, "bytes")
    if kind == "int" and logical == "date":
        return _Node(pa.date32(), False, _same, _is_date, kind)
    if logical in ("time-millis", "time-micros") and kind in ("int", "long"):
        return _Node(pa.time64("us"), False, _same, lambda v: isinstance(v, datetime.time), kind)
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return _Node(pa.timestamp("us", tz=_UTC), False, _same, _is_datetime, kind)
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return _Node(pa.timestamp("us"), False, _same, _is_datetime, kind)
    if kind == "string" and logical == "uuid":
        return _Node(pa.string(), False, str, lambda v: isinstance(v, str | uuid.UUID), kind)
    simple = {
        "boolean": (pa.bool_(), lambda v: isinstance(v, bool)),
        "int": (pa.int32(), _is_int),
        "long": (pa.int64(), _is_int),
        "float": (pa.float32(), lambda v: isinstance(v, float)),
        "double": (pa.float64(), lambda v: isinstance(v, float)),
        "bytes": (pa.binary(), _is_bytes),
        "string": (pa.string(), lambda v: isinstance(v, str)),
    }
    if kind not in simple:
        raise Unmappable(f"{path}: the Avro type {kind!r} has no column type")
    arrow, accepts = simple[kind]
    return _Node(arrow, False, _same, accepts, kind)


def _is_date(value: Any) -> bool:
    return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)


def _is_datetime(value: Any) -> bool:
    return isinstance(value, datetime.datetime)


def _decimal(node: Mapping[str, Any], path: str, name: str) -> _Node:
    precision = int(node.get("precision", 0))
    scale = int(node.get("scale", 0))
    if not 1 <= precision <= _MAX_DECIMAL_PRECISION:
        raise Unmappable(
            f"{path}: a decimal of precision {precision} (a table's decimals hold 1 to 38 digits)"
        )
    return _Node(
        pa.decimal128(precision, scale), False, _same, lambda v: isinstance(v, decimal.Decimal), name
    )
