"""JSON Schema compatibility, one case per rule: the writer is the old schema, and for each rule a reader
that keeps every writer value valid (compatible) and one that does not, whose message names the rule and
the JSON path. Then references, recursion, drafts and the checker's limits."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import pytest

from registry.formats.avro import FORMAT as AVRO
from registry.formats.base import Resolved, SchemaType
from registry.formats.jsonschema import FORMAT, JsonSchema
from registry.formats.jsonschema_compat import BUDGET

D4 = "http://json-schema.org/draft-04/schema#"
D2020 = "https://json-schema.org/draft/2020-12/schema"


def parse(schema: Any, *refs: Resolved) -> JsonSchema:
    return FORMAT.parse(json.dumps(schema), list(refs))


def reasons(reader: Any, writer: Any) -> list[str]:
    return FORMAT.compatibility(reader=parse(reader), writer=parse(writer))


class Rule(NamedTuple):
    expected: str  # the rule and path the incompatible reader's message must name
    writer: Any
    compatible: Any  # a reader that accepts every writer value; None where the rule has no such side
    incompatible: Any


def obj(props: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, **more}


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}

RULES = [
    Rule("TYPE_CHANGED at #", STR, {"type": ["string", "null"]}, INT),
    Rule(
        "TYPE_NARROWED at #/type", {"type": ["string", "null"]}, {"type": ["null", "string", "integer"]}, STR
    ),
    Rule("TYPE_NARROWED at #/type", NUM, NUM, INT),
    Rule("TYPE_NARROWED at #/type", {}, True, STR),
    Rule("TYPE_NARROWED at #/properties/a", obj({"a": STR}), obj({"a": {}}), obj({"a": False})),
    Rule(
        "MIN_LENGTH_INCREASED at #/minLength",
        {**STR, "minLength": 2},
        {**STR, "minLength": 1},
        {**STR, "minLength": 3},
    ),
    Rule("MIN_LENGTH_ADDED at #/minLength", STR, {**STR, "minLength": 0}, {**STR, "minLength": 1}),
    Rule(
        "MAX_LENGTH_DECREASED at #/maxLength",
        {**STR, "maxLength": 5},
        {**STR, "maxLength": 9},
        {**STR, "maxLength": 4},
    ),
    Rule("MAX_LENGTH_ADDED at #/maxLength", STR, STR, {**STR, "maxLength": 4}),
    Rule("PATTERN_ADDED at #/pattern", STR, STR, {**STR, "pattern": "^a"}),
    Rule("PATTERN_CHANGED at #/pattern", {**STR, "pattern": "^a"}, STR, {**STR, "pattern": "^b"}),
    Rule("FORMAT_ADDED at #/format", STR, {"type": "string"}, {**STR, "format": "email"}),
    Rule(
        "MINIMUM_INCREASED at #/minimum", {**NUM, "minimum": 1}, {**NUM, "minimum": 0}, {**NUM, "minimum": 2}
    ),
    Rule("MINIMUM_ADDED at #/minimum", NUM, NUM, {**NUM, "minimum": 0}),
    Rule(
        "MAXIMUM_DECREASED at #/maximum", {**NUM, "maximum": 9}, {**NUM, "maximum": 10}, {**NUM, "maximum": 8}
    ),
    Rule("MAXIMUM_ADDED at #/maximum", NUM, NUM, {**NUM, "maximum": 8}),
    Rule(
        "EXCLUSIVE_MINIMUM_INCREASED at #/exclusiveMinimum",
        {**NUM, "minimum": 1},
        {**NUM, "exclusiveMinimum": 0},
        {**NUM, "exclusiveMinimum": 1},
    ),
    Rule("EXCLUSIVE_MINIMUM_ADDED at #/exclusiveMinimum", NUM, NUM, {**NUM, "exclusiveMinimum": 0}),
    Rule(
        "EXCLUSIVE_MAXIMUM_DECREASED at #/exclusiveMaximum",
        {**NUM, "exclusiveMaximum": 5},
        {**NUM, "maximum": 5},
        {**NUM, "exclusiveMaximum": 4},
    ),
    Rule(
        "EXCLUSIVE_MAXIMUM_DECREASED at #/exclusiveMaximum",
        {"$schema": D4, **NUM, "maximum": 5},
        {"$schema": D4, **NUM, "maximum": 6, "exclusiveMaximum": True},
        {"$schema": D4, **NUM, "maximum": 5, "exclusiveMaximum": True},
    ),
    Rule("MULTIPLE_OF_ADDED at #/multipleOf", NUM, NUM, {**NUM, "multipleOf": 2}),
    Rule(
        "MULTIPLE_OF_EXPANDED at #/multipleOf",
        {**NUM, "multipleOf": 10},
        {**NUM, "multipleOf": 5},
        {**NUM, "multipleOf": 20},
    ),
    Rule(
        "MULTIPLE_OF_CHANGED at #/multipleOf",
        {**NUM, "multipleOf": 0.3},
        {**NUM, "multipleOf": 0.1},
        {**NUM, "multipleOf": 0.2},
    ),
    Rule("ENUM_ARRAY_NARROWED at #/enum", {"enum": ["a", "b"]}, {"enum": ["b", "a", "c"]}, {"enum": ["a"]}),
    Rule("ENUM_ARRAY_NARROWED at #/enum", STR, STR, {"enum": ["a"]}),
    Rule("ENUM_ARRAY_CHANGED at #/const", {"const": "a"}, {"enum": ["a", "b"]}, {"const": "b"}),
    Rule("ENUM_ARRAY_CHANGED at #/const", {"type": "boolean"}, {"enum": [True, False]}, {"const": True}),
    Rule(
        "MAX_LENGTH_NARROWED at #/maxLength",
        {"enum": ["ab", "abc"]},
        {**STR, "maxLength": 3},
        {**STR, "maxLength": 2},
    ),
    Rule(
        "REQUIRED_ATTRIBUTE_ADDED at #/required/a",
        obj({"a": STR}),
        obj({"a": {**STR, "default": ""}}, required=["a"]),
        obj({"a": STR}, required=["a"]),
    ),
    Rule(
        "REQUIRED_ATTRIBUTE_ADDED at #/required/b",
        obj({"a": STR}, required=["a"]),
        obj({"a": STR}),
        obj({"a": STR}, required=["b"]),
    ),
    Rule(
        "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at #/properties/b",
        obj({"a": STR}),
        obj({"a": STR, "b": {}}),
        obj({"a": STR, "b": STR}),
    ),
    Rule(
        "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at #/properties/b",
        obj({"a": STR}),
        obj({"a": STR, "b": {"description": "anything"}}),
        obj({"a": STR, "b": STR}, required=["b"]),
    ),
    Rule(
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL at #/properties/b",
        obj({"a": STR}, additionalProperties=STR),
        obj({"a": STR, "b": {**STR, "description": "b"}}, additionalProperties=STR),
        obj({"a": STR, "b": INT}, additionalProperties=STR),
    ),
    Rule(
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL at #/properties/x1",
        obj({}, patternProperties={"^x": INT}),
        obj({"x1": NUM}, patternProperties={"^x": INT}),
        obj({"x1": STR}, patternProperties={"^x": INT}),
    ),
    Rule(
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at #/properties/b",
        obj({"a": STR, "b": STR}, additionalProperties=False),
        obj({"a": STR}),
        obj({"a": STR}, additionalProperties=False),
    ),
    Rule(
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL at #/properties/b",
        obj({"a": STR, "b": INT}, additionalProperties=False),
        obj({"a": STR}, additionalProperties={"type": ["string", "integer"]}),
        obj({"a": STR}, additionalProperties=STR),
    ),
    Rule(
        "ADDITIONAL_PROPERTIES_NARROWED at #/additionalProperties",
        obj({}, additionalProperties={"type": ["string", "integer"]}),
        obj({}, additionalProperties=True),
        obj({}, additionalProperties=STR),
    ),
    Rule(
        "ADDITIONAL_PROPERTIES_REMOVED at #/additionalProperties",
        obj({"a": STR}),
        obj({"a": STR}, additionalProperties=True),
        obj({"a": STR}, additionalProperties=False),
    ),
    Rule(
        "PATTERN_PROPERTIES_NARROWED at #/patternProperties/^x",
        obj({}, patternProperties={"^x": NUM}),
        obj({}, patternProperties={"^x": {"type": ["number", "null"]}}),
        obj({}, patternProperties={"^x": INT}),
    ),
    Rule(
        "MIN_PROPERTIES_INCREASED at #/minProperties",
        obj({}, minProperties=1),
        obj({}),
        obj({}, minProperties=2),
    ),
    Rule("MAX_PROPERTIES_ADDED at #/maxProperties", obj({}), obj({}), obj({}, maxProperties=3)),
    Rule(
        "MAX_PROPERTIES_DECREASED at #/maxProperties",
        obj({}, maxProperties=3),
        obj({}, maxProperties=4),
        obj({}, maxProperties=2),
    ),
    Rule("DEPENDENCY_ARRAY_ADDED at #/dependencies/a", obj({}), obj({}), obj({}, dependencies={"a": ["b"]})),
    Rule(
        "DEPENDENCY_ARRAY_EXTENDED at #/dependencies/a",
        obj({}, dependencies={"a": ["b"]}),
        obj({}),
        obj({}, dependencies={"a": ["b", "c"]}),
    ),
    Rule(
        "DEPENDENCY_SCHEMA_ADDED at #/dependencies/a",
        obj({}),
        obj({}, dependencies={"a": {}}),
        obj({}, dependencies={"a": {"required": ["b"]}}),
    ),
    Rule(
        "TYPE_CHANGED at #/dependencies/a/properties/b",
        obj({}, dependencies={"a": obj({"b": STR})}),
        obj({}, dependencies={"a": obj({"b": {"type": ["string", "integer"]}})}),
        obj({}, dependencies={"a": obj({"b": INT})}),
    ),
    Rule(
        "DEPENDENCY_ARRAY_EXTENDED at #/dependencies/a",
        {"$schema": D2020, "dependentRequired": {"a": ["b"]}},
        {"$schema": D2020},
        {"$schema": D2020, "dependentRequired": {"a": ["b", "c"]}},
    ),
    Rule(
        "PROPERTY_NAMES_NARROWED at #/propertyNames",
        obj({}),
        obj({}, propertyNames=STR),
        obj({}, propertyNames={"maxLength": 3}),
    ),
    Rule(
        "TYPE_CHANGED at #/items",
        {"type": "array", "items": STR},
        {"type": "array", "items": {"type": ["string", "null"]}},
        {"type": "array", "items": INT},
    ),
    Rule(
        "ITEM_ADDED_TO_OPEN_CONTENT_MODEL at #/prefixItems/1",
        {"$schema": D2020, "type": "array", "prefixItems": [STR]},
        {"$schema": D2020, "type": "array", "prefixItems": [STR, {}]},
        {"$schema": D2020, "type": "array", "prefixItems": [STR, INT]},
    ),
    Rule(
        "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL at #/prefixItems/1",
        {"$schema": D2020, "type": "array", "prefixItems": [STR], "items": INT},
        {"$schema": D2020, "type": "array", "prefixItems": [STR, NUM], "items": INT},
        {"$schema": D2020, "type": "array", "prefixItems": [STR, STR], "items": INT},
    ),
    Rule(
        "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL at #/additionalItems",
        {"type": "array", "items": [STR, INT], "additionalItems": False},
        {"type": "array", "items": [STR]},
        {"type": "array", "items": [STR], "additionalItems": False},
    ),
    Rule(
        "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL at #/additionalItems",
        {"type": "array", "items": [STR, INT], "additionalItems": False},
        {"type": "array", "items": [STR], "additionalItems": INT},
        {"type": "array", "items": [STR], "additionalItems": STR},
    ),
    Rule(
        "ADDITIONAL_ITEMS_NARROWED at #/additionalItems",
        {"type": "array", "items": [STR], "additionalItems": {"type": ["string", "integer"]}},
        {"type": "array", "items": [STR]},
        {"type": "array", "items": [STR], "additionalItems": STR},
    ),
    Rule(
        "ADDITIONAL_ITEMS_REMOVED at #/additionalItems",
        {"type": "array", "items": [STR]},
        {"type": "array", "items": [STR], "additionalItems": True},
        {"type": "array", "items": [STR], "additionalItems": False},
    ),
    Rule(
        "MIN_ITEMS_INCREASED at #/minItems",
        {"type": "array", "minItems": 1},
        {"type": "array"},
        {"type": "array", "minItems": 2},
    ),
    Rule(
        "MAX_ITEMS_DECREASED at #/maxItems",
        {"type": "array", "maxItems": 3},
        {"type": "array", "maxItems": 3},
        {"type": "array", "maxItems": 2},
    ),
    Rule(
        "UNIQUE_ITEMS_ADDED at #/uniqueItems",
        {"type": "array"},
        {"type": "array", "uniqueItems": False},
        {"type": "array", "uniqueItems": True},
    ),
    Rule(
        "CONTAINS_ADDED at #/contains",
        {"type": "array", "minItems": 1},
        {"type": "array", "contains": {}},
        {"type": "array", "contains": STR},
    ),
    Rule(
        "CONTAINS_ADDED at #/contains",
        {"type": "array"},
        {"type": "array"},
        {"type": "array", "contains": {}},
    ),
    Rule(
        "MIN_CONTAINS_INCREASED at #/minContains",
        {"$schema": D2020, "contains": STR, "minContains": 2},
        {"$schema": D2020, "contains": STR},
        {"$schema": D2020, "contains": STR, "minContains": 3},
    ),
    Rule(
        "MAX_CONTAINS_DECREASED at #/maxContains",
        {"$schema": D2020, "contains": STR, "maxContains": 2},
        {"$schema": D2020, "contains": STR, "maxContains": 3},
        {"$schema": D2020, "contains": STR, "maxContains": 1},
    ),
    Rule(
        "TYPE_CHANGED at #/contains",
        {"type": "array", "contains": STR},
        {"type": "array", "contains": {"type": ["string", "null"]}},
        {"type": "array", "contains": INT},
    ),
    Rule(
        "SUM_TYPE_NARROWED at #/oneOf",
        {"oneOf": [STR, INT]},
        {"oneOf": [INT, STR, {"type": "null"}]},
        {"oneOf": [STR]},
    ),
    Rule("SUM_TYPE_NARROWED at #/anyOf", STR, {"anyOf": [INT, STR]}, {"anyOf": [INT, {"type": "null"}]}),
    Rule(
        "SUM_TYPE_NARROWED at #/anyOf",
        {"anyOf": [STR, INT]},
        {"anyOf": [{"type": ["string", "integer"]}]},
        {"anyOf": [STR, {"type": "null"}]},
    ),
    Rule(
        "MIN_LENGTH_ADDED at #/allOf/2/minLength",
        {"allOf": [STR, {"maxLength": 5}]},
        {"allOf": [STR]},
        {"allOf": [STR, {"maxLength": 5}, {"minLength": 1}]},
    ),
    Rule(
        "MAX_LENGTH_ADDED at #/maxLength",
        {"allOf": [STR, {"minLength": 1}]},
        {**STR, "minLength": 1},
        {**STR, "maxLength": 5},
    ),
    Rule("TYPE_CHANGED at #/allOf/0", STR, {"allOf": [STR]}, {"allOf": [INT]}),
    Rule(
        "NOT_TYPE_EXTENDED at #/not",
        {"not": STR},
        {"not": {**STR, "maxLength": 1}},
        {"not": {"type": ["string", "integer"]}},
    ),
    Rule("NOT_TYPE_EXTENDED at #/not", INT, {"not": STR}, {"not": {"type": "number"}}),
    Rule(
        "KEYWORD_CHANGED at #/if",
        obj({}, **{"if": {"required": ["a"]}, "then": {"required": ["b"]}}),
        obj({}, **{"if": {"required": ["a"]}, "then": {"required": ["b"]}}),
        obj({}, **{"if": {"required": ["c"]}, "then": {"required": ["b"]}}),
    ),
    Rule(
        "TYPE_CHANGED at #/properties/a",
        obj({"a": {"$ref": "#/$defs/t"}}, **{"$defs": {"t": STR}}),
        obj({"a": STR}),
        obj({"a": {"$ref": "#/$defs/t"}}, **{"$defs": {"t": INT}}),
    ),
    Rule(
        "TYPE_CHANGED at #/properties/a",
        obj({"a": STR}),
        obj({"a": {"$ref": "#/definitions/t"}}, definitions={"t": STR}),
        obj({"a": {"$ref": "#/definitions/t"}}, definitions={"t": NUM}),
    ),
]


@pytest.mark.parametrize("rule", RULES, ids=[f"{i:02}-{r.expected.split()[0]}" for i, r in enumerate(RULES)])
def test_rule(rule: Rule) -> None:
    if rule.compatible is not None:
        assert reasons(rule.compatible, rule.writer) == []
    found = reasons(rule.incompatible, rule.writer)
    assert any(rule.expected in reason for reason in found), found


def test_identical_schemas_are_compatible() -> None:
    for rule in RULES:
        assert reasons(rule.writer, rule.writer) == []
        assert reasons(rule.incompatible, rule.incompatible) == []


def test_annotations_and_unknown_keywords_do_not_matter() -> None:
    writer = obj({"a": STR}, title="Old", description="d", **{"connect.index": 1})
    reader = obj(
        {"a": {**STR, "default": "x", "examples": ["y"]}},
        title="New",
        **{"connect.index": 2, "x-extra": True},
    )
    assert reasons(reader, writer) == []


def test_closed_writer_lets_the_reader_add_any_property() -> None:
    """OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL: no writer value has the property."""
    assert (
        reasons(
            obj({"a": STR, "b": INT}, additionalProperties=False), obj({"a": STR}, additionalProperties=False)
        )
        == []
    )
    assert reasons(obj({"a": STR}), obj({"a": STR, "b": False})) == []


def test_unevaluated_properties_as_a_content_model() -> None:
    closed = {"$schema": D2020, "properties": {"a": STR}, "unevaluatedProperties": False}
    added = {"$schema": D2020, "properties": {"a": STR, "b": INT}, "unevaluatedProperties": False}
    assert reasons(added, closed) == []
    [reason] = reasons(closed, added)
    assert reason.startswith("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at #/properties/b")
    beside_applicator = {
        "$schema": D2020,
        "allOf": [{"properties": {"a": STR}}],
        "unevaluatedProperties": False,
    }
    assert any("KEYWORD_CHANGED at #/unevaluatedProperties" in r for r in reasons(beside_applicator, closed))


def test_combined_writer_branches() -> None:
    writer = {
        "type": "object",
        "properties": {"a": STR, "b": STR},
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
    }
    assert reasons(writer, writer) == []
    assert reasons(obj({"a": STR, "b": STR}), writer) == []
    assert reasons(obj({"a": STR, "b": STR}, required=["a"]), writer)
    merged = {"allOf": [{"type": "object"}, {"properties": {"a": STR}}, {"required": ["a"]}]}
    assert reasons(obj({"a": STR}, required=["a"]), merged) == []


def test_references_to_other_subjects() -> None:
    def order(street: Any) -> JsonSchema:
        address = {"type": "object", "properties": {"street": street}}
        ref = Resolved("address.json", SchemaType.JSON, json.dumps(address))
        return parse(obj({"ship": {"$ref": "address.json"}}), ref)

    assert FORMAT.compatibility(reader=order({"type": ["string", "null"]}), writer=order(STR)) == []
    [reason] = FORMAT.compatibility(reader=order(INT), writer=order(STR))
    assert reason.startswith("TYPE_CHANGED at #/properties/ship/properties/street")


def test_ref_beside_keywords_from_2019_09() -> None:
    writer = {"$schema": D2020, "$defs": {"s": STR}, "$ref": "#/$defs/s", "maxLength": 5}
    assert reasons({"$schema": D2020, "$defs": {"s": STR}, "$ref": "#/$defs/s"}, writer) == []
    assert any("MAX_LENGTH_DECREASED" in r for r in reasons({**writer, "maxLength": 4}, writer))
    # Draft 7: $ref replaces its siblings, so the reader's maxLength is no constraint at all.
    draft7 = {"definitions": {"s": STR}, "$ref": "#/definitions/s", "maxLength": 4}
    assert reasons(draft7, {"definitions": {"s": STR}, "$ref": "#/definitions/s"}) == []


TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"v": STR, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        }
    },
    "$ref": "#/$defs/node",
}


def test_recursive_schemas() -> None:
    assert reasons(TREE, TREE) == []
    leaf_changed = json.loads(json.dumps(TREE).replace('"v": {"type": "string"}', '"v": {"type": "integer"}'))
    assert any(r.startswith("TYPE_CHANGED at #/properties/v") for r in reasons(leaf_changed, TREE))


def test_too_complex_is_incompatible() -> None:
    """Every reader branch is tried against every writer branch: the budget stops the product."""
    writer = {"anyOf": [{"const": f"a{i}"} for i in range(150)] + [INT]}
    [reason] = reasons({"oneOf": [STR] * 150}, writer)
    assert reason.startswith("TOO_COMPLEX")
    assert str(BUDGET) in reason


def test_another_format_is_incompatible() -> None:
    avro = AVRO.parse('"string"', [])
    assert FORMAT.compatibility(reader=parse(STR), writer=avro) == [
        "cannot compare a JSON schema with a AVRO one"
    ]
