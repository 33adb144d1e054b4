"""Avro schemas for the registry: parsed, normalized, named and checked for compatibility, sans IO.

Two parsers, each for what it is best at:
- **fastavro** (compiled) gives the parsed form the payload codec uses (``avro_codec``) and the one the
  canonical text is built from: it resolves every name to its full name and drops ``namespace``.
- **Apache Avro** (``avro`` on PyPI) gives the schema objects its ``avro.compatibility`` checker takes:
  the port of Avro's own Java ``SchemaCompatibility``, which Confluent's registry applies and Karapace uses
  too, so verdicts match theirs. The same parse also catches what fastavro lets through (duplicate field
  names, invalid names, a union holding the same type twice).

References are Avro named types registered under other subjects. The service hands them over in
dependency order; each is parsed into the same name tables (fastavro's ``named_schemas``, Apache's
``Names``), so the schema can use their names and neither parser inlines them. Redefining a referenced
name is invalid, as in Avro itself.

**The canonical text** (``normalize=true``) is a deterministic JSON: object keys sorted, no whitespace,
every name full (``namespace`` folded into ``name``, named types' aliases qualified and sorted), a bare
primitive written as ``"int"`` rather than ``{"type": "int"}``, an integral default of a float or double
field written as a float. It keeps what Avro's Parsing Canonical Form drops (``default``, ``aliases``,
``doc``, ``order``, logical types and every custom property such as Kafka Connect's), because those change
how data is read or shown. Field order, union branch order and enum symbol order are semantic in Avro and
are kept. Referenced types stay references (by full name): the registry fingerprints the references too.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import avro.compatibility
import avro.errors
import avro.name
import avro.schema
import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from registry.errors import InvalidSchema
from registry.formats.avro_codec import AvroCodec
from registry.formats.base import ParsedSchema, Resolved, SchemaType

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED_TYPES = frozenset({"record", "error", "enum", "fixed"})
# fastavro reports some malformed shapes (a ``fields`` that is not a list, a fixed without ``size``) with
# the built-in exceptions its parser happens to hit; Apache Avro's parse runs first and refuses most of
# them with its own errors, and these are caught from fastavro's parse only.
_FASTAVRO_PARSE_ERRORS = (SchemaParseException, UnknownType, KeyError, TypeError, AttributeError)


@dataclass(frozen=True, eq=False)
class AvroSchema:
    """One Avro schema as registered, with its references resolved.

    ``parsed`` is fastavro's form (full names, no hints); ``named`` maps every full name the schema can
    use, its references' included, to fastavro's parsed definition; ``apache`` is Apache Avro's object."""

    text: str
    parsed: Any
    named: Mapping[str, Any]
    apache: avro.schema.Schema
    references: tuple[Resolved, ...] = field(default=())

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.AVRO

    def canonical(self) -> str:
        return self._canonical

    @cached_property
    def _canonical(self) -> str:
        return json.dumps(normalize(self.parsed), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def record_names(self) -> Sequence[str]:
        if isinstance(self.parsed, dict) and self.parsed.get("type") in NAMED_TYPES:
            return (str(self.parsed["name"]),)
        return ()

    @cached_property
    def codec(self) -> AvroCodec:
        """The payload codec (decode on produce, Avro JSON both ways), built on first use."""
        return AvroCodec(self.parsed, self.named)


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchema(f"Invalid {what}: not JSON: {exc}") from exc


def _parse_one(text: str, named: dict[str, Any], names: avro.name.Names, what: str) -> tuple[Any, Any]:
    """Parses one schema text into both parsers' name tables; returns (fastavro's form, Apache's object)."""
    try:
        # Apache Avro warns and ignores a logical type it does not know or that does not fit its type
        # (the Avro specification's rule); that is not an error, and tests turn warnings into errors.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", avro.errors.IgnoredLogicalType)
            apache = avro.schema.make_avsc_object(_load_json(text, what), names)
    except (avro.errors.AvroException, TypeError) as exc:
        # TypeError: Apache Avro looks a logicalType up in a table, which fails on an object or a list.
        raise InvalidSchema(f"Invalid {what}: {exc}") from exc
    try:
        parsed = fastavro.parse_schema(_load_json(text, what), named_schemas=named, _write_hint=False)
    except UnknownType as exc:
        raise InvalidSchema(f"Invalid {what}: unknown type {exc.name}") from exc
    except _FASTAVRO_PARSE_ERRORS as exc:
        raise InvalidSchema(f"Invalid {what}: {exc}") from exc
    return parsed, apache


class AvroFormat:
    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.AVRO

    def parse(self, text: str, references: Sequence[Resolved]) -> AvroSchema:
        named: dict[str, Any] = {}
        names = avro.name.Names(validate_names=True)
        for ref in references:
            if ref.schema_type is not SchemaType.AVRO:
                raise InvalidSchema(
                    f"Invalid reference {ref.name}: a {ref.schema_type} schema in an Avro one"
                )
            _parse_one(ref.text, named, names, f"reference {ref.name}")
            # Each reference is parsed from the top, outside any namespace, as it was registered.
            names.default_namespace = None
        parsed, apache = _parse_one(text, named, names, "Avro schema")
        return AvroSchema(
            text=text, parsed=parsed, named=dict(named), apache=apache, references=tuple(references)
        )

    def compatibility(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        if not isinstance(reader, AvroSchema) or not isinstance(writer, AvroSchema):
            return [f"cannot compare a {reader.schema_type} schema with a {writer.schema_type} one"]
        return check_compatibility(reader.apache, writer.apache)


def check_compatibility(reader: avro.schema.Schema, writer: avro.schema.Schema) -> list[str]:
    """Apache Avro's verdict, one readable line per incompatibility: its kind, where (a JSON pointer into
    the reader's schema) and its message."""
    checker = avro.compatibility.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(reader, writer)
    if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
        return []
    kinds = sorted({kind.value for kind in result.incompatibilities})
    messages = sorted(result.messages) or ["incompatible"]
    locations = sorted(result.locations)
    return [f"{', '.join(kinds)} at {', '.join(locations)}: {message}" for message in messages]


def normalize(node: Any) -> Any:
    """fastavro's parsed form (full names already) to the canonical structure; keys are sorted on dump."""
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return [normalize(branch) for branch in node]
    kind = node["type"]
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "fields":
            out[key] = [_normalize_field(f) for f in value]
        elif key in ("items", "values"):
            out[key] = normalize(value)
        elif key == "aliases" and kind in NAMED_TYPES and isinstance(value, list):
            out[key] = sorted({_qualify(alias, _space(node["name"])) for alias in value})
        else:
            out[key] = value
    if set(out) == {"type"} and out["type"] in PRIMITIVES:
        return out["type"]
    return out


def _normalize_field(fld: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in fld.items()}
    out["type"] = normalize(fld["type"])
    if isinstance(out.get("aliases"), list):
        out["aliases"] = sorted(set(out["aliases"]))
    default = out.get("default")
    floating = _first_branch(out["type"]) in ("float", "double")
    if floating and isinstance(default, int) and not isinstance(default, bool):
        out["default"] = float(default)
    return out


def _first_branch(schema: Any) -> Any:
    """The type a default must match: a union's first branch (the Avro specification's rule)."""
    first = schema[0] if isinstance(schema, list) and schema else schema
    return first.get("type") if isinstance(first, dict) else first


def _space(fullname: str) -> str:
    return fullname.rpartition(".")[0]


def _qualify(name: str, space: str) -> str:
    return name if "." in name or not space else f"{space}.{name}"


FORMAT = AvroFormat()
