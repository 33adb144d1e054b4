"""JSON schemas: drafts from $schema, metaschema checks, references as a registry, the canonical text,
record names, and payload validation."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from registry.errors import InvalidSchema
from registry.formats.base import Resolved, SchemaType
from registry.formats.jsonschema import FORMAT, JsonSchema
from registry.formats.payload import InvalidPayload


def parse(schema: Any, *refs: Resolved) -> JsonSchema:
    return FORMAT.parse(json.dumps(schema), list(refs))


@pytest.mark.parametrize(
    ("dialect", "validator"),
    [
        ("http://json-schema.org/draft-04/schema#", jsonschema.Draft4Validator),
        ("http://json-schema.org/draft-06/schema#", jsonschema.Draft6Validator),
        ("http://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator),
        ("https://json-schema.org/draft/2019-09/schema", jsonschema.Draft201909Validator),
        ("https://json-schema.org/draft/2020-12/schema", jsonschema.Draft202012Validator),
        (None, jsonschema.Draft7Validator),
        ("http://example.com/unknown-dialect", jsonschema.Draft7Validator),
    ],
)
def test_draft_from_schema_keyword(dialect: str | None, validator: type) -> None:
    schema = {"type": "object"} | ({"$schema": dialect} if dialect else {})
    assert type(parse(schema).validator) is validator


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "5",
        '"string"',
        '{"$schema": 7}',
        '{"type": "nope"}',
        '{"minLength": -1}',
        '{"properties": {"a": 5}}',
        '{"$ref": "#/definitions/missing"}',
        '{"properties": {"a": {"$ref": "other.json"}}}',
    ],
)
def test_invalid_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema) as caught:
        FORMAT.parse(text, [])
    assert caught.value.code == 42201
    assert caught.value.message


def test_boolean_schemas_are_valid() -> None:
    assert FORMAT.parse("true", []).canonical() == "true"
    assert FORMAT.parse("false", []).record_names() == ()


def test_references_resolve_by_name_and_by_id() -> None:
    address = {
        "$id": "https://example.com/address.json",
        "type": "object",
        "properties": {"street": {"type": "string"}},
    }
    ref = Resolved("address.json", SchemaType.JSON, json.dumps(address))
    by_name = parse({"properties": {"home": {"$ref": "address.json"}}}, ref)
    by_id = parse({"properties": {"home": {"$ref": "https://example.com/address.json"}}}, ref)
    for schema in (by_name, by_id):
        schema.validate_value({"home": {"street": "x"}})
        with pytest.raises(InvalidPayload, match="not of type 'string'"):
            schema.validate_value({"home": {"street": 5}})


def test_reference_with_its_own_broken_ref_is_invalid() -> None:
    ref = Resolved("a.json", SchemaType.JSON, json.dumps({"$ref": "#/$defs/nothing"}))
    with pytest.raises(InvalidSchema, match=r"a\.json"):
        parse({"$ref": "a.json"}, ref)


def test_reference_of_another_type_is_invalid() -> None:
    with pytest.raises(InvalidSchema, match="AVRO"):
        parse({"$ref": "a"}, Resolved("a", SchemaType.AVRO, '"int"'))


def test_canonical_is_sorted_compact_json() -> None:
    a = FORMAT.parse('{"type": "object", "required": ["b", "a"], "properties": {"b": {}, "a": {}}}', [])
    b = FORMAT.parse('{"properties":{"a":{},"b":{}},"required":["b","a"],"type":"object"}', [])
    assert (
        a.canonical()
        == b.canonical()
        == '{"properties":{"a":{},"b":{}},"required":["b","a"],"type":"object"}'
    )


def test_record_names_is_the_title() -> None:
    assert parse({"title": "com.example.Order", "type": "object"}).record_names() == ("com.example.Order",)
    assert parse({"type": "object"}).record_names() == ()


ORDER = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "day": {"type": "string", "format": "date"}},
    "required": ["id"],
}


def test_payload_validation() -> None:
    schema = parse(ORDER)
    assert schema.validate_payload(b'{"id": 3, "day": "2024-01-31"}') == {"id": 3, "day": "2024-01-31"}
    assert (
        schema.validate_payload(b'{"id": 123456789012345678901234567890}')["id"]
        == 123456789012345678901234567890
    )
    with pytest.raises(InvalidPayload, match="'id' is a required property"):
        schema.validate_payload(b"{}")
    with pytest.raises(InvalidPayload, match="keyword type"):
        schema.validate_payload(b'{"id": "x"}')
    with pytest.raises(InvalidPayload, match="format"):
        schema.validate_payload(b'{"id": 1, "day": "31/01/2024"}')
    with pytest.raises(InvalidPayload, match="not JSON"):
        schema.validate_payload(b'{"id": ')
    with pytest.raises(InvalidPayload, match="not JSON"):
        schema.validate_payload(b"\xff\xfe\x00")
    # Bytes Python's parser refuses with other exceptions: a 5,000-digit integer, nesting past the stack.
    with pytest.raises(InvalidPayload, match="not JSON: Exceeds the limit"):
        schema.validate_payload(b'{"id": ' + b"1" * 5000 + b"}")
    with pytest.raises(InvalidPayload, match="not JSON: maximum recursion depth"):
        schema.validate_payload(b"[" * 100_000)
