"""Protobuf payloads: what confluent-kafka's ProtobufSerializer writes decodes with Strata's schema, what
Strata encodes from JSON its ProtobufDeserializer reads, and bad bytes or values are InvalidPayload.

confluent-kafka's MockSchemaRegistryClient is its own in-memory registry (no IO), so the serializer runs
exactly as against a server.
"""

from __future__ import annotations

import struct

import pytest
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory
from google.protobuf.message import Message

from registry.formats.payload import InvalidPayload
from registry.formats.protobuf import FORMAT
from registry.formats.protobuf_payload import decode, decode_framed, encode_framed, from_json, to_json

SCHEMA = FORMAT.parse(
    """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  map<string, int32> stock = 2;
  message Line {
    int32 qty = 1;
    string sku_code = 2;
  }
  repeated Line lines = 3;
  google.protobuf.Timestamp placed_at = 4;
}
""",
    [],
)
CONTEXT = SerializationContext("orders", MessageField.VALUE)


def generated(name: str) -> type[Message]:
    return message_factory.GetMessageClass(SCHEMA.pool.FindMessageTypeByName(name))


def test_confluent_serializer_output_decodes() -> None:
    client = MockSchemaRegistryClient({"url": "mock://registry"})
    order_class, line_class = generated("shop.Order"), generated("shop.Order.Line")
    order = order_class(id="o-1", stock={"a": 2}, lines=[line_class(qty=3, sku_code="x")])
    order.placed_at.seconds = 1_700_000_000
    framed = ProtobufSerializer(order_class, client)(order, CONTEXT)
    line = ProtobufSerializer(line_class, client, {"auto.register.schemas": True})(line_class(qty=7), CONTEXT)
    assert framed[0] == 0
    assert line is not None
    assert framed is not None

    registered = client.get_latest_version("orders-value").schema
    schema = FORMAT.parse(registered.schema_str, [])  # the base64 descriptor the client registered
    name, decoded = decode_framed(schema, framed[5:])
    assert name == "shop.Order"
    assert decoded.SerializeToString() == order.SerializeToString()
    name, decoded = decode_framed(schema, line[5:])
    assert name == "shop.Order.Line"  # indexes [0, 1]: the map entry counts, as the client counts it
    assert to_json(decoded, schema) == {"qty": 7}


def test_json_encodes_to_what_confluent_deserializer_reads() -> None:
    client = MockSchemaRegistryClient({"url": "mock://registry"})
    schema_id = client.register_schema("orders-value", Schema(SCHEMA.serialized(), "PROTOBUF"))
    value = {
        "id": "o-2",
        "stock": {"b": 5},
        "lines": [{"qty": 1, "skuCode": "y"}],
        "placedAt": "2024-01-02T03:04:05Z",
    }
    framed = struct.pack(">bI", 0, schema_id) + encode_framed(SCHEMA, "shop.Order", value)
    read = ProtobufDeserializer(generated("shop.Order"), {"use.deprecated.format": False}, client)(
        framed, CONTEXT
    )
    assert read is not None
    assert to_json(read, SCHEMA) == value
    line = struct.pack(">bI", 0, schema_id) + encode_framed(SCHEMA, "shop.Order.Line", {"qty": 4})
    assert line[5:8] == b"\x04\x00\x02"  # two indexes, 0 and 1


def test_json_round_trip_and_field_names() -> None:
    decoded = from_json(SCHEMA, "shop.Order.Line", {"sku_code": "z", "qty": 2})
    assert to_json(decoded, SCHEMA) == {"skuCode": "z", "qty": 2}
    stamp = from_json(SCHEMA, "google.protobuf.Timestamp", "2024-01-02T03:04:05Z")
    assert to_json(stamp, SCHEMA) == "2024-01-02T03:04:05Z"
    with pytest.raises(InvalidPayload, match=r"not a google\.protobuf\.Timestamp message"):
        from_json(SCHEMA, "google.protobuf.Timestamp", 12)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"qty": "many"}, "not a shop.Order.Line message"),
        ({"nope": 1}, "not a shop.Order.Line message"),
        ([1, 2], "is a JSON object, not list"),
    ],
)
def test_bad_json(value: object, reason: str) -> None:
    with pytest.raises(InvalidPayload, match=reason):
        from_json(SCHEMA, "shop.Order.Line", value)


def test_bad_bytes_and_names() -> None:
    with pytest.raises(InvalidPayload, match=r"not a shop\.Order message"):
        decode(SCHEMA, "shop.Order", b"\x0a\xff")  # a string field claiming 255 bytes
    with pytest.raises(InvalidPayload, match=r"declares no message shop\.Nope"):
        decode(SCHEMA, "shop.Nope", b"")
    with pytest.raises(InvalidPayload, match="out of range"):
        decode_framed(SCHEMA, b"\x02\x08")
    with pytest.raises(InvalidPayload, match="not declared in the schema's own file"):
        encode_framed(SCHEMA, "google.protobuf.Timestamp", "2024-01-01T00:00:00Z")


def test_strict_refuses_undeclared_fields_at_any_depth() -> None:
    top_level_unknown = b"\x0a\x01a" + b"\xa0\x06\x01"  # id = "a", then field 100 = 1
    assert decode(SCHEMA, "shop.Order", top_level_unknown).id == "a"
    with pytest.raises(InvalidPayload, match=r"shop.Order has undeclared field\(s\) \[100\]"):
        decode(SCHEMA, "shop.Order", top_level_unknown, strict=True)
    nested_unknown = b"\x1a\x03" + b"\xa0\x06\x01"  # lines = [Line{field 100 = 1}]
    with pytest.raises(InvalidPayload, match=r"shop.Order.Line has undeclared field\(s\) \[100\]"):
        decode(SCHEMA, "shop.Order", nested_unknown, strict=True)


def test_proto2_required_field_missing_cannot_be_encoded() -> None:
    schema = FORMAT.parse('syntax = "proto2";\nmessage R {\n  required int32 n = 1;\n}\n', [])
    with pytest.raises(InvalidPayload, match="not a complete R message"):
        encode_framed(schema, "R", {})
    assert encode_framed(schema, "R", {"n": 1}) == b"\x00\x08\x01"
