"""Avro payloads: binary decoding with the every-byte check, Avro's JSON encoding both ways, the bytes
checked against fastavro's own writer, bad values and bad bytes as InvalidPayload only."""

from __future__ import annotations

import datetime
import io
import json
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.formats.avro import FORMAT
from registry.formats.avro_codec import AvroCodec
from registry.formats.base import Resolved, SchemaType
from registry.formats.payload import InvalidPayload
from tests.examples import examples

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "com.example",
    "fields": [{"name": "street", "type": "string"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "com.example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ship", "type": "Address"},
        {
            "name": "alt",
            "type": [
                "null",
                "int",
                "long",
                "Address",
                {"type": "enum", "name": "Kind", "symbols": ["A", "B"]},
            ],
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "blob", "type": "bytes"},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 2}},
        {"name": "price", "type": "double"},
        {"name": "lines", "type": {"type": "array", "items": "Address"}},
        {"name": "attrs", "type": {"type": "map", "values": "boolean"}},
        {"name": "qty", "type": "int", "default": 1},
    ],
}
VALUE = {
    "id": 7,
    "note": {"string": "fragile"},
    "ship": {"street": "Rue"},
    "alt": {"com.example.Kind": "B"},
    "at": 1_700_000_000_000,
    "blob": "\u0000\u00ff",
    "tag": "ab",
    "price": 9.5,
    "lines": [{"street": "x"}],
    "attrs": {"gift": True},
    "qty": 3,
}


@pytest.fixture(scope="module")
def codec() -> AvroCodec:
    ref = Resolved("com.example.Address", SchemaType.AVRO, json.dumps(ADDRESS))
    return FORMAT.parse(json.dumps(ORDER), [ref]).codec


def fastavro_bytes(datum: Any) -> bytes:
    """The same value written by fastavro alone, from the schema with the reference inlined."""
    inlined = {
        **ORDER,
        "fields": [{**f, "type": ADDRESS} if f["name"] == "ship" else f for f in ORDER["fields"]],
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(inlined), datum)
    return out.getvalue()


def test_json_round_trip_and_bytes_match_fastavro(codec: AvroCodec) -> None:
    payload = codec.from_json(VALUE)
    assert codec.to_json(payload) == VALUE
    datum = {
        **VALUE,
        "note": "fragile",
        "alt": ("com.example.Kind", "B"),
        "at": datetime.datetime.fromtimestamp(1_700_000_000, tz=datetime.UTC),
        "blob": b"\x00\xff",
        "tag": b"ab",
    }
    assert payload == fastavro_bytes(datum)


@pytest.mark.parametrize(
    "alt",
    [
        None,
        {"int": 5},
        {"long": 5},
        {"long": 2**40},
        {"com.example.Address": {"street": "s"}},
        {"com.example.Kind": "A"},
    ],
)
def test_union_branches_round_trip(codec: AvroCodec, alt: Any) -> None:
    value = {**VALUE, "alt": alt}
    back = codec.to_json(codec.from_json(value))
    # An int-or-long union names the first branch the value fits: 5 reads back as int.
    assert back["alt"] == ({"int": 5} if alt == {"long": 5} else alt)


def test_decode_applies_logical_types_and_counts_bytes(codec: AvroCodec) -> None:
    payload = codec.from_json(VALUE)
    decoded = codec.decode(payload)
    assert decoded.complete
    assert decoded.consumed == len(payload)
    assert decoded.value["at"] == datetime.datetime.fromtimestamp(1_700_000_000, tz=datetime.UTC)  # type: ignore[index]
    trailing = codec.decode(payload + b"\x00")
    assert not trailing.complete
    assert trailing.consumed == len(payload)
    assert trailing.size == len(payload) + 1
    with pytest.raises(InvalidPayload, match="1 bytes left"):
        codec.to_json(payload + b"\x00")


def test_defaults_fill_missing_fields(codec: AvroCodec) -> None:
    value = {k: v for k, v in VALUE.items() if k not in ("note", "qty")}
    back = codec.to_json(codec.from_json(value))
    assert back["note"] is None
    assert back["qty"] == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": "7"}, "not a valid long"),
        ({"id": 2**63}, "not a valid long"),
        ({"qty": 2**31}, "not a valid int"),
        ({"qty": True}, "not a valid int"),
        ({"note": "bare"}, "union value"),
        ({"note": {"int": 1}}, "int is not a branch"),
        ({"alt": {"com.example.Kind": "C"}}, "not a valid enum"),
        ({"blob": "\u0100"}, "above 255"),
        ({"tag": "abc"}, "holds 2 bytes, not 3"),
        ({"lines": {}}, "expected an array"),
        ({"attrs": []}, "expected an object for a map"),
        ({"ship": {"street": "s", "city": "c"}}, "no field city"),
        ({"ship": {}}, "street is missing"),
        ({"price": "x"}, "not a valid double"),
    ],
)
def test_bad_values_raise_invalid_payload(codec: AvroCodec, change: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidPayload, match=message):
        codec.from_json({**VALUE, **change})


def test_missing_required_field(codec: AvroCodec) -> None:
    with pytest.raises(InvalidPayload, match="id is missing and has no default"):
        codec.from_json({k: v for k, v in VALUE.items() if k != "id"})


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_give_only_invalid_payload(codec: AvroCodec, data: bytes) -> None:
    for read in (codec.decode, codec.to_json):
        try:
            read(data)
        except InvalidPayload:
            pass


def test_truncated_payloads_are_invalid(codec: AvroCodec) -> None:
    payload = codec.from_json(VALUE)
    for cut in range(len(payload)):
        with pytest.raises(InvalidPayload):
            codec.decode(payload[:cut])


def test_zero_width_items_are_bounded() -> None:
    """Six bytes can declare half a billion nulls: the count is checked before fastavro builds the list."""
    codec = FORMAT.parse('{"type": "array", "items": "null"}', []).codec
    with pytest.raises(InvalidPayload, match="more than"):
        codec.decode(b"\x80\x80\x80\x80\x04\x00")
    assert codec.decode(b"\x06\x00").value == [None, None, None]
    empty = {"type": "record", "name": "E", "fields": []}
    nested = FORMAT.parse(json.dumps({"type": "map", "values": {"type": "array", "items": empty}}), []).codec
    with pytest.raises(InvalidPayload, match="more than"):
        nested.decode(b"\x02\x02k\x80\x80\x80\x80\x04\x00\x00")
    assert nested.to_json(nested.from_json({"k": [{}, {}]})) == {"k": [{}, {}]}


def test_top_level_union_of_references() -> None:
    ref = Resolved("com.example.Address", SchemaType.AVRO, json.dumps(ADDRESS))
    codec = FORMAT.parse('["null", "com.example.Address"]', [ref]).codec
    for value in (None, {"com.example.Address": {"street": "s"}}):
        assert codec.to_json(codec.from_json(value)) == value
