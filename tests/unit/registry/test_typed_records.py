"""The record browser's typed view (registry/typed_records.py): keys and values in Confluent's wire format
decoded with the registered schema, over a real registry service on SQLite.

The payloads are written here with the formats' own libraries (fastavro, protobuf's runtime, json), not
with Strata's codecs, so a decoder that agreed only with itself would fail.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pytest
from google.protobuf import message_factory

from registry.formats.base import SchemaType
from registry.formats.protobuf import ProtobufSchema
from registry.service import SchemaRegistry, default_formats
from registry.typed_records import Field, RecordDecoder, Typed, frame, names_a_schema
from storage.metadata import open_metadata_store

AVRO = {
    "type": "record",
    "name": "User",
    "namespace": "shop",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "nick", "type": ["null", "string"], "default": None},
        {"name": "score", "type": "double"},
        {"name": "big", "type": "long"},
    ],
}
PROTO = """syntax = "proto3";
package shop;
message Order {
  string id = 1;
  message Line { int32 qty = 1; }
}
message Refund { int64 amount = 1; }
"""
JSON_SCHEMA = {
    "type": "object",
    "title": "Item",
    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    "required": ["sku"],
}


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[SchemaRegistry]:
    store = open_metadata_store(f"sqlite:///{tmp_path / 'metadata.db'}")
    try:
        yield SchemaRegistry(store, default_formats())
    finally:
        store.close()


def prefixed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def avro_bytes(value: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), value)
    return out.getvalue()


def decoder(registry: SchemaRegistry, readable: set[str] | None = None) -> RecordDecoder:
    return RecordDecoder(registry, "orders", lambda s: readable is None or s in readable)


def typed_of(found: RecordDecoder, data: bytes, field: Field = "value") -> Typed:
    typed = found.decode(data, [], field)
    assert typed is not None, "the field names a schema"
    return typed


def test_an_avro_value_decodes_as_avro_json_with_its_subject_and_version(registry: SchemaRegistry) -> None:
    registry.register("orders-value", json.dumps({**AVRO, "fields": AVRO["fields"][:1]}))  # version 1
    registry.set_config("orders-value", "NONE")
    view = registry.register("orders-value", json.dumps(AVRO))
    value = {"name": "Ada", "nick": "ada", "score": float("nan"), "big": 2**60}
    typed = decoder(registry).decode(prefixed(view.schema_id, avro_bytes(value)), [], "value")
    assert typed == Typed(
        view.schema_id,
        "AVRO",
        "orders-value",
        2,
        "shop.User",
        # A union branch is wrapped; NaN and a long JavaScript cannot hold are strings.
        {"name": "Ada", "nick": {"string": "ada"}, "score": "NaN", "big": str(2**60)},
    )


def test_a_protobuf_value_decodes_the_message_its_indexes_name(registry: SchemaRegistry) -> None:
    view = registry.register("orders-value", PROTO, SchemaType.PROTOBUF)
    parsed = registry.parsed(view.schema_id)
    assert isinstance(parsed, ProtobufSchema)
    refund = message_factory.GetMessageClass(parsed.pool.FindMessageTypeByName("shop.Refund"))(amount=7)
    line = message_factory.GetMessageClass(parsed.pool.FindMessageTypeByName("shop.Order.Line"))(qty=3)
    # Indexes: [1] is written as count 1, index 1 (zig-zag 2, 2); [0, 0] as count 2 (4), 0, 0.
    at_refund = prefixed(view.schema_id, b"\x02\x02" + refund.SerializeToString())
    at_line = prefixed(view.schema_id, b"\x04\x00\x00" + line.SerializeToString())
    found = decoder(registry)
    assert found.decode(at_refund, [], "value") == Typed(
        view.schema_id, "PROTOBUF", "orders-value", 1, "shop.Refund", {"amount": "7"}
    )
    typed = typed_of(found, at_line)
    assert (typed.record, typed.json, typed.error) == ("shop.Order.Line", {"qty": 3}, None)
    bad = typed_of(found, prefixed(view.schema_id, b"\x02\x0a"))  # index 5: no such message
    assert (bad.json, bad.error) == (
        None,
        "message index 5 at depth 0 is out of range: the file has 2 message(s)",
    )


def test_a_json_value_is_validated_and_a_key_uses_the_key_subject(registry: SchemaRegistry) -> None:
    view = registry.register("orders-key", json.dumps(JSON_SCHEMA), SchemaType.JSON)
    registry.register("other-subject", json.dumps(JSON_SCHEMA), SchemaType.JSON)
    found = decoder(registry)
    typed = found.decode(prefixed(view.schema_id, b'{"sku": "a-1", "qty": 2}'), [], "key")
    assert typed == Typed(view.schema_id, "JSON", "orders-key", 1, "Item", {"sku": "a-1", "qty": 2})
    refused = typed_of(found, prefixed(view.schema_id, b'{"sku": "a-1", "qty": 0}'), "key")
    assert (refused.subject, refused.json) == ("orders-key", None)
    assert refused.error == "0 is less than the minimum of 1 (at $.qty, keyword minimum)"
    # As a value of this topic, no orders-value subject holds it: the first other subject is shown.
    typed = typed_of(found, prefixed(view.schema_id, b'{"sku": "b"}'))
    assert (typed.subject, typed.version) == ("orders-key", 1)


def test_bytes_that_name_no_schema_are_left_alone(registry: SchemaRegistry) -> None:
    found = decoder(registry)
    for data in (None, b"", b"plain text", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x01xyz"):
        assert frame(data, None) is None
        assert not names_a_schema(data, [], "value")
        assert found.decode(data, [], "value") is None
    assert names_a_schema(b"\x00\x00\x00\x00\x09", [], "value")


def test_an_unknown_id_a_bad_payload_and_an_unreadable_subject_say_why(registry: SchemaRegistry) -> None:
    view = registry.register("orders-value", json.dumps(AVRO))
    unknown = decoder(registry).decode(prefixed(999, b"x"), [], "value")
    assert unknown == Typed(999, error="schema id 999 is not registered")
    truncated = avro_bytes({"name": "Ada", "nick": None, "score": 1.5, "big": 1})[:-3]
    bad = typed_of(decoder(registry), prefixed(view.schema_id, truncated))
    assert (bad.subject, bad.json) == ("orders-value", None)
    assert bad.error is not None
    assert bad.error.startswith("not an Avro value of the schema")
    trailing = avro_bytes({"name": "Ada", "nick": None, "score": 1.5, "big": 1}) + b"\x00"
    bad = typed_of(decoder(registry), prefixed(view.schema_id, trailing))
    assert bad.error == "1 bytes left after the Avro value"
    # A reader of the topic who may read no subject holding the id sees neither the value nor the subject.
    hidden = decoder(registry, readable={"payments-value"}).decode(
        prefixed(view.schema_id, avro_bytes({"name": "A", "nick": None, "score": 0.0, "big": 0})), [], "value"
    )
    assert hidden == Typed(
        view.schema_id, error=f"not allowed to read a subject holding schema id {view.schema_id}"
    )


def test_a_soft_deleted_version_still_decodes_and_live_ones_come_first(registry: SchemaRegistry) -> None:
    view = registry.register("orders-value", json.dumps(AVRO))
    registry.register("archive", json.dumps(AVRO))
    registry.delete_version("orders-value", 1)
    data = prefixed(view.schema_id, avro_bytes({"name": "A", "nick": None, "score": 0.0, "big": 0}))
    typed = typed_of(decoder(registry), data)
    assert (typed.subject, typed.version) == ("archive", 1)
    typed = typed_of(decoder(registry, readable={"orders-value"}), data)
    assert (typed.subject, typed.version, typed.error) == ("orders-value", 1, None)


def test_the_header_form_names_the_schema_by_guid(registry: SchemaRegistry) -> None:
    view = registry.register("orders-value", json.dumps(JSON_SCHEMA), SchemaType.JSON)
    header = b"\x01" + uuid.UUID(view.schema.guid).bytes
    typed = decoder(registry).decode(b'{"sku": "h"}', [("__value_schema_id", header)], "value")
    assert typed == Typed(view.schema_id, "JSON", "orders-value", 1, "Item", {"sku": "h"})
    # The key's header names the key only; an unknown GUID says so.
    assert decoder(registry).decode(b'{"sku": "h"}', [("__key_schema_id", header)], "value") is None
    stranger = uuid.uuid4()
    typed = decoder(registry).decode(b"{}", [("__key_schema_id", b"\x01" + stranger.bytes)], "key")
    assert typed == Typed(None, error=f"schema guid {stranger} is not registered")
