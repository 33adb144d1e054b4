"""Avro payloads, sans IO: decode one binary payload (validation on produce), and convert between a JSON value
in Avro's JSON encoding and the binary encoding (typed HTTP produce, the console's record view).

fastavro does the binary work (``schemaless_reader`` and ``schemaless_writer``, compiled): it is what
confluent-kafka's own Avro serializer uses, so Strata reads and writes exactly the bytes the clients do.

**Avro's JSON encoding** (the Avro specification's, which Confluent's REST Proxy and console tools speak): a
union value other than null is wrapped as ``{"<branch name>": value}`` (a named branch by its full name),
``bytes`` and ``fixed`` are strings of code points 0-255, a logical type is its underlying type (a
``timestamp-millis`` is a number). Decoding tags each union value with its branch: exactly for named
branches, and for the others by the value's kind (a union holding both ``int`` and ``long``, or ``float``
and ``double``, names the first one the value fits).

The schema the codec works on is **standalone**: every named type the schema uses, its references'
included, is defined inline at its first use (as Avro's own writers print a schema), so fastavro's reader
and writer need no shared name table. Its "raw" twin has the logical types removed, so values stay in the
underlying types the JSON encoding uses.

A payload that does not fit raises ``InvalidPayload``, and nothing else.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from typing import Any

import fastavro

from registry.formats.payload import Decoded, InvalidPayload

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_INT32 = range(-(2**31), 2**31)
_INT64 = range(-(2**63), 2**63)
# What fastavro's compiled reader raises on bytes that do not fit the schema: a read past the end
# (EOFError), a union or enum index out of range (IndexError), invalid UTF-8 (UnicodeDecodeError, a
# ValueError), a negative or oversized length or a varint longer than 64 bits (ValueError, OverflowError,
# MemoryError).
_DECODE_ERRORS = (EOFError, IndexError, ValueError, OverflowError, MemoryError)


class AvroCodec:
    """The codec for one parsed schema; built once per schema and reused for every payload."""

    def __init__(self, parsed: Any, named: Mapping[str, Any]) -> None:
        self.standalone = standalone(parsed, named)
        raw = _strip_logical(self.standalone)
        self.definitions: dict[str, Any] = {}
        _collect_definitions(raw, self.definitions)
        self.raw = raw
        self._writer = fastavro.parse_schema(self.standalone, named_schemas={})
        self._raw = fastavro.parse_schema(raw, named_schemas={})
        self._guarded = _has_zero_width_items(raw, self.definitions, set())

    def decode(self, payload: bytes) -> Decoded:
        """Decodes one binary payload (no Confluent header) with logical types applied; ``complete`` says
        whether every byte was used."""
        return self._read(payload, self._writer, named=False)

    def decode_tagged(self, payload: bytes) -> Decoded:
        """Like ``decode``, with every value of a named type inside a union tagged as ``(full name,
        value)``, so a reader knows the branch (the lake's typed tables)."""
        return self._read(payload, self._writer, named=True)

    def to_json(self, payload: bytes) -> Any:
        """One binary payload as a value in Avro's JSON encoding; trailing bytes are an error here."""
        decoded = self._read(payload, self._raw, named=True)
        if not decoded.complete:
            raise InvalidPayload(f"{decoded.size - decoded.consumed} bytes left after the Avro value")
        return self._json(self.raw, decoded.value, "$")

    def from_json(self, value: Any) -> bytes:
        """A value in Avro's JSON encoding to its binary encoding."""
        # The walk checks every value against its type (ranges, symbols, sizes) as it converts, so the
        # writer only ever gets a datum it encodes faithfully.
        datum = self._datum(self.raw, value, "$")
        out = io.BytesIO()
        fastavro.schemaless_writer(out, self._raw, datum)
        return out.getvalue()

    def _read(self, payload: bytes, schema: Any, *, named: bool) -> Decoded:
        if self._guarded:
            _Skipper(self.definitions, payload).skip(self.raw)
        stream = io.BytesIO(payload)
        try:
            value = fastavro.schemaless_reader(stream, schema, None, return_named_type=named)
        except _DECODE_ERRORS as exc:
            raise InvalidPayload(f"not an Avro value of the schema: {type(exc).__name__}: {exc}") from exc
        return Decoded(value=value, consumed=stream.tell(), size=len(payload))

    def _resolve(self, schema: Any) -> Any:
        return self.definitions.get(schema, schema) if isinstance(schema, str) else schema

    def _json(self, schema: Any, datum: Any, path: str) -> Any:
        schema = self._resolve(schema)
        if isinstance(schema, list):
            return self._union_json(schema, datum, path)
        kind = schema if isinstance(schema, str) else schema["type"]
        if kind in ("bytes", "fixed"):
            return bytes(datum).decode("latin-1")
        if kind in ("record", "error"):
            return {
                f["name"]: self._json(f["type"], datum[f["name"]], f"{path}.{f['name']}")
                for f in schema["fields"]
            }
        if kind == "array":
            return [self._json(schema["items"], item, f"{path}[{i}]") for i, item in enumerate(datum)]
        if kind == "map":
            return {key: self._json(schema["values"], item, f"{path}.{key}") for key, item in datum.items()}
        return datum

    def _union_json(self, branches: list[Any], datum: Any, path: str) -> Any:
        if datum is None:
            return None
        if isinstance(datum, tuple):
            name, inner = datum
            return {name: self._json(name, inner, path)}
        name = _unnamed_branch(branches, datum)
        return {name: self._json(name, datum, path)}

    def _datum(self, schema: Any, value: Any, path: str) -> Any:
        schema = self._resolve(schema)
        if isinstance(schema, list):
            return self._union_datum(schema, value, path)
        kind = schema if isinstance(schema, str) else schema["type"]
        if kind in ("bytes", "fixed"):
            if not isinstance(value, str):
                raise InvalidPayload(f"{path}: {kind} is written as a string of code points 0-255")
            try:
                raw = value.encode("latin-1")
            except UnicodeEncodeError as exc:
                raise InvalidPayload(f"{path}: {kind} holds a code point above 255") from exc
            if kind == "fixed" and len(raw) != schema["size"]:
                raise InvalidPayload(
                    f"{path}: fixed {schema['name']} holds {schema['size']} bytes, not {len(raw)}"
                )
            return raw
        if kind in ("record", "error"):
            return self._record_datum(schema, value, path)
        if kind == "array":
            if not isinstance(value, list):
                raise InvalidPayload(f"{path}: expected an array")
            return [self._datum(schema["items"], item, f"{path}[{i}]") for i, item in enumerate(value)]
        if kind == "map":
            if not isinstance(value, dict):
                raise InvalidPayload(f"{path}: expected an object for a map")
            return {key: self._datum(schema["values"], item, f"{path}.{key}") for key, item in value.items()}
        return _primitive_datum(schema, kind, value, path)

    def _record_datum(self, schema: Mapping[str, Any], value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise InvalidPayload(f"{path}: expected an object for record {schema['name']}")
        known = {f["name"] for f in schema["fields"]}
        unknown = sorted(set(value) - known)
        if unknown:
            raise InvalidPayload(f"{path}: record {schema['name']} has no field {unknown[0]}")
        out: dict[str, Any] = {}
        for f in schema["fields"]:
            name = f["name"]
            if name in value:
                out[name] = self._datum(f["type"], value[name], f"{path}.{name}")
            elif "default" in f:
                # A default is written in the JSON encoding, except that a union's is its first branch's
                # value, unwrapped.
                ftype = f["type"]
                first = ftype[0] if isinstance(ftype, list) else ftype
                datum = self._datum(first, f["default"], f"{path}.{name}")
                out[name] = (
                    datum
                    if not isinstance(ftype, list) or datum is None
                    else (_name(self._resolve(first)), datum)
                )
            else:
                raise InvalidPayload(f"{path}: field {name} is missing and has no default")
        return out

    def _union_datum(self, branches: list[Any], value: Any, path: str) -> Any:
        if value is None:
            if "null" not in branches:
                raise InvalidPayload(f"{path}: null is not a branch of the union")
            return None
        if not isinstance(value, dict) or len(value) != 1:
            raise InvalidPayload(f'{path}: a union value is written as {{"<branch>": value}}')
        ((name, inner),) = value.items()
        for branch in branches:
            if _name(self._resolve(branch)) == name:
                return (name, self._datum(branch, inner, f"{path}.{name}"))
        raise InvalidPayload(f"{path}: {name} is not a branch of the union")


def _primitive_datum(schema: Any, kind: str, value: Any, path: str) -> Any:
    """A JSON value of a leaf type (primitive or enum), checked as the binary encoding needs it."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if kind == "null" and value is None:
        return None
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "int" and is_int and value in _INT32:
        return value
    if kind == "long" and is_int and value in _INT64:
        return value
    if kind in ("float", "double") and (is_int or isinstance(value, float)):
        return float(value)
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "enum" and isinstance(value, str) and value in schema["symbols"]:
        return value
    raise InvalidPayload(f"{path}: {value!r} is not a valid {kind}")


def _name(schema: Any) -> str:
    """A branch's name in the JSON encoding: a named type's full name, else its type."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        return str(schema["name"] if schema["type"] in _NAMED else schema["type"])
    return "union"


def _unnamed_branch(branches: list[Any], datum: Any) -> str:
    names = [_name(b) if not isinstance(b, str) or b in _PRIMITIVES else "" for b in branches]
    if isinstance(datum, bool):
        wanted = ["boolean"]
    elif isinstance(datum, int):
        wanted = ["int", "long"] if datum in _INT32 else ["long"]
    elif isinstance(datum, float):
        wanted = ["float", "double"] if math.isfinite(datum) else ["double", "float"]
    elif isinstance(datum, str):
        wanted = ["string"]
    elif isinstance(datum, bytes):
        wanted = ["bytes"]
    elif isinstance(datum, list):
        wanted = ["array"]
    else:
        wanted = ["map"]
    for name in names:
        if name in wanted:
            return name
    raise InvalidPayload(f"no union branch holds a {type(datum).__name__}")


def _has_zero_width_items(schema: Any, definitions: Mapping[str, Any], seen: set[str]) -> bool:
    """Whether an array in the schema holds items encoded in zero bytes (null, an empty record, a fixed of
    size 0): there a few bytes can declare billions of items, which fastavro would build as a list."""
    if isinstance(schema, list):
        return any(_has_zero_width_items(b, definitions, seen) for b in schema)
    if isinstance(schema, str):
        if schema in _PRIMITIVES or schema in seen:
            return False
        seen.add(schema)
        return _has_zero_width_items(definitions[schema], definitions, seen)
    kind = schema["type"]
    if kind == "array":
        return _zero_width(schema["items"], definitions, set()) or _has_zero_width_items(
            schema["items"], definitions, seen
        )
    if kind == "map":
        return _has_zero_width_items(schema["values"], definitions, seen)
    if kind in ("record", "error"):
        seen.add(schema["name"])
        return any(_has_zero_width_items(f["type"], definitions, seen) for f in schema["fields"])
    return False


def _zero_width(schema: Any, definitions: Mapping[str, Any], seen: set[str]) -> bool:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return schema == "null"
        if schema in seen:
            return False
        seen.add(schema)
        return _zero_width(definitions[schema], definitions, seen)
    if isinstance(schema, list):
        return False
    kind = schema["type"]
    if kind == "fixed":
        return bool(schema["size"] == 0)
    if kind in ("record", "error"):
        seen.add(schema["name"])
        return all(_zero_width(f["type"], definitions, seen) for f in schema["fields"])
    return bool(kind == "null")


class _Skipper:
    """Walks a payload without building values, counting array and map items against a bound; used only
    for schemas with zero-width array items, before fastavro decodes them."""

    MAX_ITEMS = 1 << 20

    def __init__(self, definitions: Mapping[str, Any], payload: bytes) -> None:
        self.definitions, self.data, self.pos, self.items = definitions, payload, 0, 0

    def varint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise InvalidPayload("not an Avro value of the schema: a truncated or overlong varint")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)

    def advance(self, count: int) -> None:
        if count < 0 or self.pos + count > len(self.data):
            raise InvalidPayload("not an Avro value of the schema: a length past the end")
        self.pos += count

    def skip(self, schema: Any) -> None:
        schema = self.definitions.get(schema, schema) if isinstance(schema, str) else schema
        if isinstance(schema, list):
            index = self.varint()
            if not 0 <= index < len(schema):
                raise InvalidPayload("not an Avro value of the schema: a union index out of range")
            return self.skip(schema[index])
        kind = schema if isinstance(schema, str) else schema["type"]
        if kind in ("boolean", "float", "double", "fixed"):
            self.advance({"boolean": 1, "float": 4, "double": 8}.get(kind) or schema["size"])
        elif kind in ("int", "long", "enum"):
            self.varint()
        elif kind in ("bytes", "string"):
            self.advance(self.varint())
        elif kind in ("record", "error"):
            for f in schema["fields"]:
                self.skip(f["type"])
        elif kind in ("array", "map"):
            self.blocks(schema)
        return None

    def blocks(self, schema: Mapping[str, Any]) -> None:
        while count := self.varint():
            if count < 0:
                count = -count
                self.varint()  # the block's size in bytes
            self.items += count
            if self.items > self.MAX_ITEMS:
                raise InvalidPayload(f"more than {self.MAX_ITEMS} array or map items in one payload")
            for _ in range(count):
                if schema["type"] == "map":
                    self.advance(self.varint())
                self.skip(schema["items"] if schema["type"] == "array" else schema["values"])


def standalone(parsed: Any, named: Mapping[str, Any]) -> Any:
    """The schema with every named type it uses defined inline at its first use, later uses by name."""
    defined: set[str] = set()

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVES or node in defined:
                return node
            return walk(named[node])
        if isinstance(node, list):
            return [walk(branch) for branch in node]
        out = dict(node)
        if out["type"] in _NAMED:
            defined.add(out["name"])
        if "fields" in out:
            out["fields"] = [{**f, "type": walk(f["type"])} for f in out["fields"]]
        for key in ("items", "values"):
            if key in out:
                out[key] = walk(out[key])
        return out

    return walk(parsed)


def _strip_logical(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip_logical(branch) for branch in node]
    if not isinstance(node, dict):
        return node
    out = {key: value for key, value in node.items() if key != "logicalType"}
    if "fields" in out:
        out["fields"] = [{**f, "type": _strip_logical(f["type"])} for f in out["fields"]]
    for key in ("items", "values"):
        if key in out:
            out[key] = _strip_logical(out[key])
    return out


def _collect_definitions(node: Any, into: dict[str, Any]) -> None:
    if isinstance(node, list):
        for branch in node:
            _collect_definitions(branch, into)
    elif isinstance(node, dict):
        if node["type"] in _NAMED:
            into[node["name"]] = node
        for f in node.get("fields", ()):
            _collect_definitions(f["type"], into)
        for key in ("items", "values"):
            if key in node:
                _collect_definitions(node[key], into)
