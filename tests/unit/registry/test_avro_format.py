"""Avro schemas: parsing (with references), the canonical text and its fingerprint, record names, invalid
schemas, and Apache Avro's compatibility verdicts for the classic evolutions."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from registry.errors import InvalidSchema
from registry.formats.avro import FORMAT, AvroSchema
from registry.formats.base import Resolved, SchemaType

PERSON = {
    "type": "record",
    "name": "Person",
    "namespace": "com.example",
    "doc": "a person",
    "fields": [
        {"name": "name", "type": "string", "doc": "full name"},
        {"name": "age", "type": {"type": "int"}, "default": 0, "aliases": ["years"]},
        {"name": "score", "type": "double", "default": 1},
        {"name": "born", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
    ],
}


def parse(schema: Any, *refs: Resolved) -> AvroSchema:
    return FORMAT.parse(json.dumps(schema), list(refs))


def fingerprint(schema: AvroSchema) -> str:
    return hashlib.sha256(schema.canonical().encode()).hexdigest()


def test_canonical_keeps_defaults_docs_aliases_and_logical_types() -> None:
    canonical = json.loads(parse(PERSON).canonical())
    assert canonical["name"] == "com.example.Person"
    assert "namespace" not in canonical
    assert canonical["doc"] == "a person"
    age = canonical["fields"][1]
    assert age == {"name": "age", "type": "int", "default": 0, "aliases": ["years"]}
    assert canonical["fields"][2]["default"] == 1.0
    assert isinstance(canonical["fields"][2]["default"], float)
    assert canonical["fields"][3]["type"] == {"type": "long", "logicalType": "timestamp-millis"}


def test_canonical_ignores_key_order_and_whitespace() -> None:
    reordered = {key: PERSON[key] for key in reversed(list(PERSON))}
    reordered["fields"] = [{k: f[k] for k in reversed(list(f))} for f in PERSON["fields"]]
    spaced = FORMAT.parse(json.dumps(reordered, indent=4), [])
    assert spaced.canonical() == parse(PERSON).canonical()
    assert fingerprint(spaced) == fingerprint(parse(PERSON))
    # Deterministic: sorted keys, no whitespace.
    assert parse(PERSON).canonical() == json.dumps(
        json.loads(parse(PERSON).canonical()), sort_keys=True, separators=(",", ":")
    )


def test_canonical_keeps_field_order() -> None:
    swapped = {**PERSON, "fields": [PERSON["fields"][1], PERSON["fields"][0], *PERSON["fields"][2:]]}
    assert fingerprint(parse(swapped)) != fingerprint(parse(PERSON))


def test_canonical_resolves_names_and_qualifies_aliases() -> None:
    short = {
        "type": "record",
        "name": "R",
        "namespace": "a.b",
        "aliases": ["Old"],
        "fields": [{"name": "x", "type": "int"}],
    }
    full = {
        "type": "record",
        "name": "a.b.R",
        "aliases": ["a.b.Old"],
        "fields": [{"name": "x", "type": "int"}],
    }
    assert parse(short).canonical() == parse(full).canonical()


def test_canonical_differs_where_the_meaning_does() -> None:
    with_default = {**PERSON, "fields": [*PERSON["fields"][:4], {**PERSON["fields"][4], "default": ["x"]}]}
    assert fingerprint(parse(with_default)) != fingerprint(parse(PERSON))


def test_record_names() -> None:
    assert parse(PERSON).record_names() == ("com.example.Person",)
    assert parse({"type": "enum", "name": "E", "namespace": "n", "symbols": ["A"]}).record_names() == ("n.E",)
    assert parse("string").record_names() == ()
    assert parse(["null", "string"]).record_names() == ()


ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "com.example",
    "fields": [{"name": "street", "type": "string"}],
}
COUNTRY = {"type": "enum", "name": "Country", "namespace": "geo", "symbols": ["FR", "DE"]}


def test_references_across_named_types() -> None:
    address_with_country = {
        **ADDRESS,
        "fields": [*ADDRESS["fields"], {"name": "country", "type": "geo.Country"}],
    }
    user = {
        "type": "record",
        "name": "User",
        "namespace": "com.example",
        "fields": [{"name": "home", "type": "Address"}],
    }
    refs = (
        Resolved("geo.Country", SchemaType.AVRO, json.dumps(COUNTRY)),
        Resolved("com.example.Address", SchemaType.AVRO, json.dumps(address_with_country)),
    )
    parsed = parse(user, *refs)
    # The reference stays a reference in the canonical text: the registry fingerprints references apart.
    assert json.loads(parsed.canonical())["fields"][0]["type"] == "com.example.Address"
    assert set(parsed.named) >= {"geo.Country", "com.example.Address", "com.example.User"}
    with pytest.raises(InvalidSchema, match="Address"):
        parse(user)  # the same schema without its reference


def test_reference_cannot_be_redefined() -> None:
    ref = Resolved("com.example.Address", SchemaType.AVRO, json.dumps(ADDRESS))
    redefining = {"type": "record", "name": "W", "fields": [{"name": "a", "type": ADDRESS}]}
    with pytest.raises(InvalidSchema):
        parse(redefining, ref)


def test_reference_of_another_type_is_invalid() -> None:
    with pytest.raises(InvalidSchema, match="JSON"):
        parse(PERSON, Resolved("x", SchemaType.JSON, "{}"))


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '"nope"',
        "5",
        "{}",
        '{"type": "record", "name": "R", "fields": 5}',
        '{"type": "record", "fields": []}',
        '{"type": "record", "name": "R", "fields": [{"name": "a"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "Missing"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, '
        '{"name": "a", "type": "int"}]}',
        '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
        '{"type": "fixed", "name": "F"}',
        '{"type": "array"}',
        '{"type": "map"}',
        '{"type": {"type": "int"}}',
        '["int", "int"]',
        '{"type": "record", "name": "1R", "fields": []}',
    ],
)
def test_invalid_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema) as caught:
        FORMAT.parse(text, [])
    assert caught.value.code == 42201
    assert caught.value.message


def test_unknown_logical_type_is_ignored_as_the_specification_says() -> None:
    parsed = parse({"type": "string", "logicalType": "not-a-type"})
    assert json.loads(parsed.canonical()) == {"type": "string", "logicalType": "not-a-type"}


def record(*fields: dict[str, Any], name: str = "R") -> AvroSchema:
    return parse({"type": "record", "name": name, "fields": list(fields)})


A = {"name": "a", "type": "int"}


def test_adding_a_field_with_a_default_is_backward_compatible() -> None:
    new = record(A, {"name": "b", "type": "string", "default": ""})
    assert FORMAT.compatibility(reader=new, writer=record(A)) == []


def test_adding_a_field_without_a_default_is_not() -> None:
    new = record(A, {"name": "b", "type": "string"})
    [reason] = FORMAT.compatibility(reader=new, writer=record(A))
    assert "reader_field_missing_default_value" in reason
    assert "/fields/1" in reason
    assert ": b" in reason


def test_removing_a_field() -> None:
    old, new = record(A, {"name": "b", "type": "string"}), record(A)
    assert FORMAT.compatibility(reader=new, writer=old) == []  # the reader skips it
    assert FORMAT.compatibility(reader=old, writer=new)  # an old reader misses it (no default)


def test_int_promotes_to_long_and_not_back() -> None:
    ints, longs = record(A), record({"name": "a", "type": "long"})
    assert FORMAT.compatibility(reader=longs, writer=ints) == []
    [reason] = FORMAT.compatibility(reader=ints, writer=longs)
    assert "type_mismatch" in reason
    assert "reader type: int not compatible with writer type: long" in reason


def test_enum_symbols_added_and_removed() -> None:
    def colors(*symbols: str) -> AvroSchema:
        return record({"name": "c", "type": {"type": "enum", "name": "Color", "symbols": list(symbols)}})

    assert FORMAT.compatibility(reader=colors("RED", "GREEN", "BLUE"), writer=colors("RED", "GREEN")) == []
    [reason] = FORMAT.compatibility(reader=colors("RED"), writer=colors("RED", "GREEN"))
    assert "missing_enum_symbols" in reason
    assert "GREEN" in reason


def test_renamed_record_is_incompatible() -> None:
    [reason] = FORMAT.compatibility(reader=record(A, name="S"), writer=record(A, name="R"))
    assert "name_mismatch" in reason


def test_compatibility_through_references() -> None:
    def user(address: dict[str, Any]) -> AvroSchema:
        ref = Resolved("com.example.Address", SchemaType.AVRO, json.dumps(address))
        schema = {
            "type": "record",
            "name": "User",
            "namespace": "com.example",
            "fields": [{"name": "home", "type": "Address"}],
        }
        return parse(schema, ref)

    wider = {**ADDRESS, "fields": [*ADDRESS["fields"], {"name": "zip", "type": "string"}]}
    assert FORMAT.compatibility(reader=user(ADDRESS), writer=user(wider)) == []
    assert FORMAT.compatibility(reader=user(wider), writer=user(ADDRESS))
