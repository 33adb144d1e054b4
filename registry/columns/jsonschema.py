"""JSON Schema values as table columns (registry/columns/__init__.py says what a shape is).

A table needs one type per column, so only schemas that give one are mapped: every subschema states its
``type`` (or is an object by its ``properties``, an array by its ``items``, a string by its string
``enum``), with ``null`` allowed beside one other type. ``$ref`` inside the document or to a reference is
followed. ``allOf``, ``anyOf``, ``oneOf``, tuples (``prefixItems`` or an ``items`` array) and several
non-null types are ``Unmappable``, as are recursive references. Redpanda's JSON Schema tables have the same
rule.

| JSON Schema | Arrow / Iceberg |
|---|---|
| boolean, integer, number | bool, int64, float64 |
| string; with format date-time; with format date | string; timestamp[us, UTC]; date32 |
| object with properties | struct (the top-level object's properties are the table's columns) |
| object with only additionalProperties | map<string, value> |
| object with neither | string (the object as JSON text) |
| array | list |
| ``[T, "null"]`` | T, nullable |

Every column is nullable except a required property whose type does not allow null. ``row`` validates the
payload with the schema first (registry/formats/jsonschema.py), so a value that reaches a column has its
type; a date-time without a zone is taken as UTC.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import referencing.exceptions

from registry.columns import VALUE_COLUMN, ColumnShape, Unmappable, top_level
from registry.formats.jsonschema import JsonSchema
from registry.formats.payload import InvalidPayload

if TYPE_CHECKING:
    from referencing._core import Resolver

_INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True, slots=True)
class _Node:
    type: pa.DataType
    nullable: bool
    convert: Callable[[Any], Any]


def shape(schema: JsonSchema) -> ColumnShape:
    node = _Mapper(schema.resolver()).map(schema.schema, "$", ())
    arrow, wrap = top_level(node.type, node.nullable)
    convert = node.convert

    def row(payload: bytes) -> dict[str, object]:
        value = convert(schema.validate_payload(payload))
        if wrap:
            return {VALUE_COLUMN: value}
        assert isinstance(value, dict)
        return value

    return ColumnShape(arrow, row)


class _Mapper:
    """Maps subschemas; ``resolver`` resolves the ``$ref`` of the resource being walked (a reference's own
    references resolve against it)."""

    def __init__(self, resolver: Resolver[Any]) -> None:
        self._resolver = resolver

    def map(self, node: Any, path: str, refs: tuple[str, ...]) -> _Node:
        if node is True or node == {}:
            raise Unmappable(f"{path}: a schema that takes any value has no column type")
        if not isinstance(node, Mapping):
            raise Unmappable(f"{path}: a schema that takes no value has no column type")
        if "$ref" in node:
            return self._ref(str(node["$ref"]), path, refs)
        for keyword in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if keyword in node:
                raise Unmappable(f"{path}: {keyword} has no column type (state one type)")
        kind, nullable = _kind(node, path)
        mapped = self._typed(kind, node, path, refs)
        return _Node(
            mapped.type, nullable or mapped.nullable, _or_null(mapped.convert) if nullable else mapped.convert
        )

    def _ref(self, ref: str, path: str, refs: tuple[str, ...]) -> _Node:
        if ref in refs:
            raise Unmappable(f"{path}: the recursive reference {ref} has no table form")
        try:
            resolved = self._resolver.lookup(ref)
        except referencing.exceptions.Unresolvable as exc:
            raise Unmappable(f"{path}: the reference {ref} does not resolve: {exc}") from None
        return _Mapper(resolved.resolver).map(resolved.contents, path, (*refs, ref))

    def _typed(self, kind: str, node: Mapping[str, Any], path: str, refs: tuple[str, ...]) -> _Node:
        if kind == "object":
            return self._object(node, path, refs)
        if kind == "array":
            items = node.get("items")
            if not isinstance(items, Mapping):
                raise Unmappable(f"{path}: an array without one items schema has no column type")
            item = self.map(items, f"{path}[]", refs)
            item_convert = item.convert
            return _Node(
                pa.list_(pa.field("element", item.type, nullable=item.nullable)),
                False,
                lambda v: [item_convert(x) for x in v],
            )
        if kind == "string":
            fmt = node.get("format")
            if fmt == "date-time":
                return _Node(pa.timestamp("us", tz="UTC"), False, _date_time)
            if fmt == "date":
                return _Node(pa.date32(), False, _date)
            return _Node(pa.string(), False, _same)
        if kind == "integer":
            return _Node(pa.int64(), False, _int64)
        if kind == "number":
            return _Node(pa.float64(), False, float)
        if kind == "boolean":
            return _Node(pa.bool_(), False, _same)
        raise Unmappable(f"{path}: a value of type {kind!r} has no column type")

    def _object(self, node: Mapping[str, Any], path: str, refs: tuple[str, ...]) -> _Node:
        properties = node.get("properties")
        if isinstance(properties, Mapping) and properties:
            required = set(node.get("required", ()))
            fields: list[pa.Field] = []
            converters: list[tuple[str, Callable[[Any], Any]]] = []
            for name, sub in properties.items():
                child = self.map(sub, f"{path}.{name}", refs)
                fields.append(pa.field(name, child.type, nullable=child.nullable or name not in required))
                converters.append((name, _or_null(child.convert)))

            def convert(value: Mapping[str, Any]) -> dict[str, Any]:
                return {name: c(value.get(name)) for name, c in converters}

            return _Node(pa.struct(fields), False, convert)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping) and extra:
            value = self.map(extra, f"{path}{{}}", refs)
            value_convert = value.convert
            return _Node(
                pa.map_(pa.string(), pa.field("value", value.type, nullable=value.nullable)),
                False,
                lambda v: [(k, value_convert(x)) for k, x in v.items()],
            )
        return _Node(pa.string(), False, lambda v: orjson.dumps(v).decode())


def _kind(node: Mapping[str, Any], path: str) -> tuple[str, bool]:
    """The one non-null type a subschema states, and whether it also allows null."""
    declared = node.get("type")
    if declared is None:
        if "properties" in node or "additionalProperties" in node:
            return "object", False
        if "items" in node:
            return "array", False
        enum = node.get("enum")
        if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
            return "string", False
        raise Unmappable(f"{path}: a schema without a type has no column type (state one type)")
    types = [declared] if isinstance(declared, str) else list(declared)
    others = [t for t in types if t != "null"]
    if len(others) != 1:
        raise Unmappable(f"{path}: the types {types} have no one column type")
    return str(others[0]), len(others) < len(types)


def _or_null(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def maybe(value: Any) -> Any:
        return None if value is None else convert(value)

    return maybe


def _same(value: Any) -> Any:
    return value


def _int64(value: Any) -> int:
    # JSON Schema's integer includes numbers with a zero fraction (1.0), as the validator does.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value not in _INT64:
        raise InvalidPayload(f"the integer {value} does not fit a 64-bit column")
    return value


def _date(value: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(value)
    except ValueError as exc:
        raise InvalidPayload(f"{value!r} is not a date: {exc}") from None


def _date_time(value: str) -> datetime.datetime:
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidPayload(f"{value!r} is not a date-time: {exc}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=datetime.UTC)
