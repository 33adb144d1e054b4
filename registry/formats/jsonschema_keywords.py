"""JSON Schema's keywords as the registry's JSON Schema modules see them: which hold subschemas, which
assert and which only annotate, and how to walk a schema's subschemas with the right base URI.

The lists cover drafts 4, 6, 7, 2019-09 and 2020-12 together: a keyword that one draft does not define is
ignored by that draft's validator, as any unknown keyword is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import referencing
import referencing.jsonschema
from jsonschema.protocols import Validator

if TYPE_CHECKING:
    # The resolver class, public through its instances (Registry.resolver) but not exported by name.
    from referencing._core import Resolver

# Keywords whose values are one subschema, a map of them, or a list of them (every draft's).
SCHEMA_KEYWORDS = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
SCHEMA_MAP_KEYWORDS = frozenset(
    {"$defs", "definitions", "dependentSchemas", "patternProperties", "properties", "dependencies"}
)
SCHEMA_LIST_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
# Keywords that only annotate: no value is valid or invalid because of them.
ANNOTATIONS = frozenset(
    {
        "$anchor",
        "$comment",
        "$defs",
        "$dynamicAnchor",
        "$id",
        "$recursiveAnchor",
        "$schema",
        "$vocabulary",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "default",
        "definitions",
        "deprecated",
        "description",
        "examples",
        "id",
        "readOnly",
        "title",
        "writeOnly",
    }
)
# Assertions the compatibility checker compares by their meaning.
ANALYSED = frozenset(
    {
        "$ref",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "const",
        "contains",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "items",
        "maxContains",
        "maxItems",
        "maxLength",
        "maxProperties",
        "maximum",
        "minContains",
        "minItems",
        "minLength",
        "minProperties",
        "minimum",
        "multipleOf",
        "not",
        "oneOf",
        "pattern",
        "patternProperties",
        "prefixItems",
        "properties",
        "propertyNames",
        "required",
        "type",
        "uniqueItems",
    }
)
# Assertions it does not analyse: a reader that has one the writer does not have identically is
# incompatible (conservative); one only the writer has can only have narrowed what the writer accepted.
UNANALYSED = frozenset(
    {"$dynamicRef", "$recursiveRef", "else", "if", "then", "unevaluatedItems", "unevaluatedProperties"}
)
ASSERTIONS = ANALYSED | UNANALYSED


def specification_of(validator: type[Validator]) -> referencing.Specification[Any]:
    return referencing.jsonschema.specification_with(validator.META_SCHEMA["$schema"])


def subschemas(schema: Any) -> Iterator[tuple[str, Any]]:
    """The direct subschemas of a schema, each with its path segment (``properties/name``)."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key in SCHEMA_KEYWORDS and isinstance(value, dict | bool):
            yield key, value
        elif key in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            for i, item in enumerate(value):
                yield f"{key}/{i}", item
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            for name, item in value.items():
                if isinstance(item, dict | bool):
                    yield f"{key}/{name}", item


def in_scope(resolver: Resolver[Any], schema: Any, spec: referencing.Specification[Any]) -> Any:
    """The resolver for a subschema: one that has an ``$id`` (``id`` in draft 4) changes the base URI."""
    if not isinstance(schema, dict):
        return resolver
    # Beside a keyword this draft does not know, an id was never checked to be a string.
    if all(isinstance(schema.get(k, ""), str) for k in ("$id", "id")) and spec.id_of(schema):
        return resolver.in_subresource(spec.create_resource(schema))
    return resolver
