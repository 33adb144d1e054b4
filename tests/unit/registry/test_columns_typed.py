"""A batch of values as typed rows (registry/columns/typed.py): grouped by the schema and message that
wrote each value, with every value that cannot become a row refused with its reason, and tombstones apart."""

from __future__ import annotations

import json
import struct

import pyarrow as pa
from google.protobuf import message_factory

from registry.columns.typed import Fixed, TypedRows
from registry.errors import SchemaNotFound
from registry.formats.avro import FORMAT as AVRO
from registry.formats.base import ParsedSchema
from registry.formats.jsonschema import FORMAT as JSON
from registry.formats.protobuf import FORMAT as PROTOBUF
from registry.formats.protobuf_wire import write_message_indexes
from tests.unit.registry.test_columns import ORDER, ORDER_AVRO, avro_payload

PROTO = """syntax = "proto3";
package shop;
message Order { int64 id = 1; }
message Refund { int64 order = 1; string why = 2; }
"""
SCHEMAS: dict[int, ParsedSchema] = {
    1: AVRO.parse(json.dumps(ORDER_AVRO), []),
    2: PROTOBUF.parse(PROTO, []),
    3: JSON.parse(json.dumps({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}), []),
    4: AVRO.parse('"string"', []),
}


def lookup(schema_id: int) -> ParsedSchema:
    if schema_id not in SCHEMAS:
        raise SchemaNotFound(f"Schema {schema_id} not found")
    return SCHEMAS[schema_id]


def framed(schema_id: int, payload: bytes, indexes: list[int] | None = None) -> bytes:
    head = b"\x00" + struct.pack(">I", schema_id)
    return head + (write_message_indexes(indexes) if indexes is not None else b"") + payload


def proto(name: str, **fields: object) -> bytes:
    cls = message_factory.GetMessageClass(SCHEMAS[2].pool.FindMessageTypeByName(name))  # type: ignore[attr-defined]
    return bytes(cls(**fields).SerializeToString())


def test_values_are_grouped_by_schema_and_message_and_the_rest_refused() -> None:
    values = [
        framed(1, avro_payload(ORDER_AVRO, ORDER)),
        framed(2, proto("shop.Refund", order=7, why="late"), [1]),
        None,
        b"plain text",
        framed(9, b"\x00"),
        framed(3, b"{}"),
        framed(1, b"\x02"),
        framed(2, proto("shop.Order", id=8), [0]),
        framed(1, avro_payload(ORDER_AVRO, {**ORDER, "id": 9})),
    ]
    converted = TypedRows(lookup).convert(values)
    assert [(g.schema_id, g.message, g.positions) for g in converted.groups] == [
        (1, None, [0, 8]),
        (2, "shop.Refund", [1]),
        (2, "shop.Order", [7]),
    ]
    assert converted.tombstones == [2]
    reasons = {r.position: (r.schema_id, r.reason) for r in converted.refusals}
    assert sorted(reasons) == [3, 4, 5, 6]
    assert reasons[3][0] is None
    assert "no schema id" in reasons[3][1]
    assert reasons[4] == (9, "schema id 9 is not registered")
    assert "no table form" in reasons[5][1]
    assert reasons[6][0] == 1
    refund = converted.groups[1]
    assert pa.Table.from_pylist(refund.rows, refund.shape.arrow).to_pylist() == [{"order": 7, "why": "late"}]
    assert [row["id"] for row in converted.groups[0].rows] == [7, 9]


def test_a_fixed_schema_reads_bare_payloads() -> None:
    rows = TypedRows(lookup)
    converted = rows.convert([avro_payload("string", "a"), b"\x05"], Fixed(4))
    assert [g.rows for g in converted.groups] == [[{"value": "a"}]]
    assert [r.position for r in converted.refusals] == [1]
    bare = rows.convert([proto("shop.Refund", order=1)], Fixed(2, "shop.Refund"))
    assert bare.groups[0].rows == [{"order": 1, "why": ""}]
    assert rows.convert([b"x"], Fixed(9)).refusals[0].reason == "schema id 9 is not registered"
