"""Registered schemas as table columns (registry/columns): each format's type mapping, payloads decoded
into rows of those columns, what has no table form, and the columns taken by a real Iceberg table
(pyiceberg's SQL catalog on a temporary SQLite file) and read back by DuckDB."""

from __future__ import annotations

import datetime
import decimal
import io
import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from google.protobuf import message_factory

from registry.columns import Unmappable, columns_for
from registry.formats.avro import FORMAT as AVRO
from registry.formats.jsonschema import FORMAT as JSON
from registry.formats.payload import InvalidPayload
from registry.formats.protobuf import FORMAT as PROTOBUF

UTC = datetime.UTC

ORDER_AVRO = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "stock", "type": {"type": "map", "values": "int"}},
        {"name": "ref", "type": {"type": "fixed", "name": "Ref", "size": 4}},
        {
            "name": "payer",
            "type": [
                "null",
                "string",
                {"type": "record", "name": "Card", "fields": [{"name": "last4", "type": "string"}]},
            ],
        },
        {"name": "ratio", "type": ["float", "double"]},
    ],
}
ORDER = {
    "id": 7,
    "item": "tea",
    "note": None,
    "price": decimal.Decimal("12.50"),
    "placed": datetime.datetime(2026, 11, 28, 12, 0, tzinfo=UTC),
    "day": datetime.date(2026, 11, 28),
    "state": "PAID",
    "tags": ["hot", "green"],
    "stock": {"eu": 3},
    "ref": b"\x00\x01\x02\x03",
    "payer": {"last4": "4242"},
    "ratio": 0.5,
}


def avro_payload(schema: object, value: object) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def test_an_avro_record_becomes_its_fields() -> None:
    shape = columns_for(AVRO.parse(json.dumps(ORDER_AVRO), []))
    types = {f.name: f.type for f in shape.arrow}
    assert types["id"] == pa.int64()
    assert not shape.arrow.field("id").nullable
    assert types["note"] == pa.string()
    assert shape.arrow.field("note").nullable
    assert types["price"] == pa.decimal128(9, 2)
    assert types["placed"] == pa.timestamp("us", tz="UTC")
    assert types["day"] == pa.date32()
    assert types["state"] == pa.string()
    assert types["tags"] == pa.list_(pa.field("element", pa.string(), nullable=False))
    assert types["ref"] == pa.binary(4)
    assert types["payer"] == pa.struct(
        [
            pa.field("string", pa.string()),
            pa.field("Card", pa.struct([pa.field("last4", pa.string(), False)])),
        ]
    )
    row = shape.row(avro_payload(ORDER_AVRO, ORDER))
    table = pa.Table.from_pylist([row], shape.arrow)
    got = table.to_pylist()[0]
    assert got["payer"] == {"string": None, "Card": {"last4": "4242"}}
    assert got["stock"] == [("eu", 3)]
    assert got["ratio"] == {"float": 0.5, "double": None}
    assert {k: got[k] for k in ("id", "item", "note", "price", "placed", "day", "state", "tags", "ref")} == {
        k: ORDER[k] for k in ("id", "item", "note", "price", "placed", "day", "state", "tags", "ref")
    }
    with pytest.raises(InvalidPayload):
        shape.row(avro_payload(ORDER_AVRO, ORDER) + b"\x00")
    with pytest.raises(InvalidPayload):
        shape.row(b"\x02")


def test_a_value_that_is_not_a_record_is_one_value_column() -> None:
    shape = columns_for(AVRO.parse('["null", "long"]', []))
    assert shape.arrow == pa.schema([pa.field("value", pa.int64(), nullable=True)])
    assert shape.row(avro_payload(["null", "long"], 5)) == {"value": 5}
    assert shape.row(avro_payload(["null", "long"], None)) == {"value": None}


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (
            {
                "type": "record",
                "name": "Node",
                "fields": [{"name": "next", "type": ["null", "Node"]}],
            },
            "recursive",
        ),
        ({"type": "record", "name": "R", "fields": [{"name": "nothing", "type": "null"}]}, "only be null"),
        ({"type": "record", "name": "R", "fields": [{"name": "strata", "type": "int"}]}, "strata"),
        (
            {
                "type": "record",
                "name": "R",
                "fields": [
                    {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40}}
                ],
            },
            "precision 40",
        ),
    ],
)
def test_avro_schemas_without_a_table_form(schema: object, reason: str) -> None:
    with pytest.raises(Unmappable, match=reason):
        columns_for(AVRO.parse(json.dumps(schema), []))


ORDER_PROTO = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
enum State { NEW = 0; PAID = 1; }
message Order {
  int64 id = 1;
  string item = 2;
  optional string note = 3;
  uint64 big = 4;
  uint32 small = 5;
  State state = 6;
  repeated string tags = 7;
  map<string, int32> stock = 8;
  message Line { int32 qty = 1; }
  repeated Line lines = 9;
  Line first = 10;
  google.protobuf.Timestamp placed = 11;
  google.protobuf.StringValue coupon = 12;
  oneof pay { string cash = 13; int32 card = 14; }
}
message Tree { repeated Tree children = 1; }
"""


def test_a_protobuf_message_becomes_its_fields() -> None:
    schema = PROTOBUF.parse(ORDER_PROTO, [])
    shape = columns_for(schema)
    types = {f.name: f.type for f in shape.arrow}
    assert types["big"] == pa.decimal128(20, 0)
    assert types["small"] == pa.int64()
    assert types["state"] == pa.string()
    assert types["placed"] == pa.timestamp("us", tz="UTC")
    assert types["coupon"] == pa.string()
    assert types["stock"] == pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))
    assert not shape.arrow.field("item").nullable
    assert shape.arrow.field("note").nullable
    assert shape.arrow.field("cash").nullable
    assert shape.arrow.field("first").nullable
    cls = message_factory.GetMessageClass(schema.pool.FindMessageTypeByName("shop.Order"))
    message = cls(id=1, item="tea", big=2**64 - 1, small=2**32 - 1, state=1, tags=["a"], card=4)
    message.stock["eu"] = 3
    message.lines.add(qty=2)
    message.placed.seconds = 1_800_000_000
    message.placed.nanos = 5_000
    table = pa.Table.from_pylist([shape.row(message.SerializeToString())], shape.arrow)
    got = table.to_pylist()[0]
    assert got["big"] == decimal.Decimal(2**64 - 1)
    assert got["small"] == 2**32 - 1
    assert got["note"] is None
    assert got["coupon"] is None
    assert got["first"] is None
    assert got["state"] == "PAID"
    assert got["tags"] == ["a"]
    assert got["lines"] == [{"qty": 2}]
    assert got["cash"] is None
    assert got["card"] == 4
    assert got["placed"] == datetime.datetime.fromtimestamp(1_800_000_000, UTC) + datetime.timedelta(
        microseconds=5
    )
    with pytest.raises(InvalidPayload):
        shape.row(b"\xff\xff")
    with pytest.raises(Unmappable, match="recursive"):
        columns_for(schema, "shop.Tree")


ORDER_JSON = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "note": {"type": ["string", "null"]},
        "placed": {"type": "string", "format": "date-time"},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/line"}},
        "stock": {"type": "object", "additionalProperties": {"type": "integer"}},
        "extra": {"type": "object"},
    },
    "required": ["id", "item"],
    "definitions": {"line": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
}


def test_a_json_object_becomes_its_properties() -> None:
    shape = columns_for(JSON.parse(json.dumps(ORDER_JSON), []))
    assert not shape.arrow.field("id").nullable
    assert shape.arrow.field("note").nullable
    assert shape.arrow.field("placed").type == pa.timestamp("us", tz="UTC")
    assert shape.arrow.field("lines").type == pa.list_(
        pa.field("element", pa.struct([pa.field("qty", pa.int64())]), nullable=False)
    )
    value = {
        "id": 3,
        "item": "tea",
        "placed": "2026-11-28T12:00:00Z",
        "lines": [{"qty": 1}],
        "stock": {"eu": 2},
        "extra": {"b": [1]},
    }
    got = pa.Table.from_pylist([shape.row(json.dumps(value).encode())], shape.arrow).to_pylist()[0]
    assert got["placed"] == datetime.datetime(2026, 11, 28, 12, tzinfo=UTC)
    assert got["note"] is None
    assert got["lines"] == [{"qty": 1}]
    assert got["stock"] == [("eu", 2)]
    assert got["extra"] == '{"b":[1]}'
    with pytest.raises(InvalidPayload):
        shape.row(json.dumps({"id": "three", "item": "tea"}).encode())
    with pytest.raises(InvalidPayload):
        shape.row(json.dumps({"id": 2**64, "item": "tea"}).encode())


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
        {"type": "object", "properties": {"a": {"type": ["string", "integer"]}}},
        {"type": "object", "properties": {"a": {}}},
        {"type": "object", "properties": {"next": {"$ref": "#"}}},
    ],
)
def test_json_schemas_without_one_type_per_column(schema: object) -> None:
    with pytest.raises(Unmappable):
        columns_for(JSON.parse(json.dumps(schema), []))


@pytest.mark.integration  # a real table in a temporary directory: IO, so not in test-fast
def test_the_columns_make_an_iceberg_table_that_duckdb_reads(tmp_path: Path) -> None:
    import duckdb
    from pyiceberg.catalog.sql import SqlCatalog

    from tests.fixtures.duck import connect

    catalog = SqlCatalog(
        "t", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=(tmp_path / "lake").as_uri()
    )
    catalog.create_namespace("ns")
    shapes = {
        "avro": (columns_for(AVRO.parse(json.dumps(ORDER_AVRO), [])), avro_payload(ORDER_AVRO, ORDER)),
        "json": (
            columns_for(JSON.parse(json.dumps(ORDER_JSON), [])),
            json.dumps({"id": 1, "item": "x", "stock": {"a": 1}, "placed": "2026-01-01T00:00:00Z"}).encode(),
        ),
    }
    proto = PROTOBUF.parse(ORDER_PROTO, [])
    cls = message_factory.GetMessageClass(proto.pool.FindMessageTypeByName("shop.Order"))
    shapes["proto"] = (columns_for(proto), cls(id=5, big=2**64 - 1, tags=["t"]).SerializeToString())
    con: duckdb.DuckDBPyConnection = connect()
    for name, (shape, payload) in shapes.items():
        table = catalog.create_table(f"ns.{name}", schema=shape.arrow)
        table.append(pa.Table.from_pylist([shape.row(payload)], shape.arrow))
        location = catalog.load_table(f"ns.{name}").metadata_location
        rows = con.execute(f"SELECT * FROM iceberg_scan('{location}')").fetchall()
        assert len(rows) == 1, name
    big = con.execute(
        f"SELECT big FROM iceberg_scan('{catalog.load_table('ns.proto').metadata_location}')"
    ).fetchone()
    assert big == (decimal.Decimal(2**64 - 1),)
