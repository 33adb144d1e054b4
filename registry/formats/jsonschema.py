"""JSON Schema for the registry: parsed, checked against its draft's metaschema, normalized, and a cached
validator for payloads, sans IO.

**jsonschema** (with **referencing**, its reference resolver) is the reference Python implementation of
every draft the registry accepts: 4, 6, 7, 2019-09 and 2020-12. ``validator_for`` picks the draft from
``$schema``; a schema without one, or with one jsonschema does not know, is draft 7, the default of
Confluent's JSON Schema provider. ``check_schema`` validates the schema against its draft's metaschema.

**References** are other JSON schemas registered under other subjects, named as the ``$ref`` that uses them
(``address.json``, or a full URL). They become a ``referencing.Registry`` keyed by that name (and crawled,
so their ``$id`` and anchors resolve too); a ``$ref`` that resolves neither there nor inside the document
makes the schema invalid at registration, not at the first payload. Nothing is ever fetched.

**The canonical text** (``normalize=true``) is compact JSON with sorted keys: key order is never semantic in
JSON Schema, while array order is kept (``prefixItems`` positions are semantic; ``enum`` and ``required``
order is kept as written).

**Payloads** are validated with the draft's validator built once per schema, with format assertions on
(Confluent's JSON Schema validator asserts formats too). Bytes are read with the standard library's
parser, not orjson: orjson turns an integer beyond 64 bits into a float, which would validate an
approximation of the value (``maximum`` or ``multipleOf`` at the edge); the validator costs more anyway.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from registry.errors import InvalidSchema
from registry.formats.base import ParsedSchema, Resolved, SchemaType
from registry.formats.jsonschema_compat import check
from registry.formats.jsonschema_keywords import in_scope, specification_of, subschemas
from registry.formats.payload import InvalidPayload

if TYPE_CHECKING:
    # The resolver class, public through its instances (Registry.resolver) but not exported by name.
    from referencing._core import Resolver

DEFAULT_DRAFT: type[Validator] = jsonschema.Draft7Validator


@dataclass(frozen=True, eq=False)
class JsonSchema:
    """One JSON schema as registered: its document, its draft's validator (references resolved through
    ``registry``) and its references."""

    text: str
    schema: Any
    validator: Validator
    registry: referencing.Registry[Any]
    references: tuple[Resolved, ...] = field(default=())

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.JSON

    @property
    def specification(self) -> referencing.Specification[Any]:
        return specification_of(type(self.validator))

    def resolver(self) -> Resolver[Any]:
        """A resolver at the document's root: its own ``#/...`` pointers and its references resolve."""
        resource = referencing.Resource.from_contents(self.schema, default_specification=self.specification)
        return self.registry.resolver_with_root(resource)

    def canonical(self) -> str:
        return json.dumps(self.schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def record_names(self) -> Sequence[str]:
        title = self.schema.get("title") if isinstance(self.schema, dict) else None
        return (title,) if isinstance(title, str) and title else ()

    def validate_value(self, value: Any) -> None:
        """Raises ``InvalidPayload`` naming the most relevant error if the value does not validate."""
        try:
            error = best_match(self.validator.iter_errors(value))
        except referencing.exceptions.Unresolvable as exc:
            raise InvalidPayload(f"a $ref does not resolve: {exc}") from exc
        if error is not None:
            raise InvalidPayload(f"{error.message} (at {error.json_path}, keyword {error.validator})")

    def validate_payload(self, payload: bytes) -> Any:
        """Reads one JSON payload (UTF-8, no Confluent header) and validates it; returns the value."""
        try:
            value = json.loads(payload)
        except (ValueError, RecursionError) as exc:
            # ValueError: not JSON (JSONDecodeError), not UTF-8 (UnicodeDecodeError), or an integer past
            # Python's 4,300-digit limit; RecursionError: arrays or objects nested past the stack.
            raise InvalidPayload(f"not JSON: {exc}") from exc
        self.validate_value(value)
        return value


def _load(text: str, what: str) -> Any:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchema(f"Invalid {what}: not JSON: {exc}") from exc
    if not isinstance(document, dict | bool):
        raise InvalidSchema(f"Invalid {what}: a JSON schema is an object or a boolean")
    if isinstance(document, dict) and not isinstance(document.get("$schema", ""), str):
        raise InvalidSchema(f"Invalid {what}: $schema must be a string")
    return document


def _draft(document: Any) -> type[Validator]:
    cls: type[Validator] = validator_for(document, default=DEFAULT_DRAFT)
    return cls


def _dialect(document: Any) -> str:
    dialect = document.get("$schema") if isinstance(document, dict) else None
    return dialect if isinstance(dialect, str) else ""


def _check(document: Any, what: str) -> type[Validator]:
    cls = _draft(document)
    try:
        cls.check_schema(document)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise InvalidSchema(f"Invalid {what}: {exc.message}" + (f" (at /{where})" if where else "")) from exc
    return cls


def _check_refs(schema: Any, resolver: Resolver[Any], spec: Any, what: str, path: str) -> None:
    resolver = in_scope(resolver, schema, spec)
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        where = f"$ref {schema['$ref']} at {path or '/'}"
        try:
            target = resolver.lookup(schema["$ref"]).contents
        except referencing.exceptions.Unresolvable as exc:
            raise InvalidSchema(f"Invalid {what}: {where} does not resolve") from exc
        if not isinstance(target, dict | bool):
            raise InvalidSchema(f"Invalid {what}: {where} is not a schema")
    for segment, child in subschemas(schema):
        _check_refs(child, resolver, spec, what, f"{path}/{segment}")


class JsonSchemaFormat:
    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.JSON

    def parse(self, text: str, references: Sequence[Resolved]) -> JsonSchema:
        document = _load(text, "JSON schema")
        cls = _check(document, "JSON schema")
        spec = specification_of(cls)
        resources: list[tuple[str, referencing.Resource[Any]]] = []
        for ref in references:
            what = f"reference {ref.name}"
            if ref.schema_type is not SchemaType.JSON:
                raise InvalidSchema(f"Invalid {what}: a {ref.schema_type} schema in a JSON one")
            contents = _load(ref.text, what)
            _check(contents, what)
            resources.append(
                (ref.name, referencing.Resource.from_contents(contents, default_specification=spec))
            )
        try:
            registry = referencing.Registry().with_resources(resources).crawl()
        except referencing.exceptions.CannotDetermineSpecification as exc:
            raise InvalidSchema(f"Invalid JSON schema: {exc}") from exc
        for name, resource in resources:
            ref_spec = referencing.jsonschema.specification_with(_dialect(resource.contents), default=spec)
            _check_refs(resource.contents, registry.resolver(base_uri=name), ref_spec, name, "")
        validator = cls(document, registry=registry, format_checker=cls.FORMAT_CHECKER)
        parsed = JsonSchema(
            text=text, schema=document, validator=validator, registry=registry, references=tuple(references)
        )
        _check_refs(document, parsed.resolver(), spec, "JSON schema", "")
        return parsed

    def compatibility(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        if not isinstance(reader, JsonSchema) or not isinstance(writer, JsonSchema):
            return [f"cannot compare a {reader.schema_type} schema with a {writer.schema_type} one"]
        return check(reader, writer)


FORMAT = JsonSchemaFormat()
