"""Typed HTTP produce and decoding fetch (api/typed_produce.py, api/typed_records.py), against a real agent:
JSON values produced over HTTP by schema id and by subject, in Avro, Protobuf and JSON Schema, read back
by confluent-kafka's own deserializers over the Kafka door (the wire format is Confluent's) and by the HTTP
fetch with ``decode=schema``; values their schema refuses, unknown ids, subjects and versions, and bytes
that do not decode."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory

from registry.formats import protobuf
from tests.fixtures import registry_kafka
from tests.fixtures.principals import PASSWORDS, write_principals
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.kafka.schema_cases import ORDER, framed

pytestmark = pytest.mark.integration

PROTO = """syntax = "proto3";
package shop;
message Parcel {
  string id = 1;
  int32 qty = 2;
  message Line { string sku = 1; }
  repeated Line lines = 3;
}
"""
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("typed"))) as running:
        yield running


@pytest.fixture(scope="module")
def client(srv: RunningServer) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": srv.registry_url, "max.retries": 0}) as sr:
        yield sr


def register(srv: RunningServer, subject: str, schema: str, schema_type: str = "AVRO") -> int:
    body: dict[str, Any] = {"schema": schema}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    answer = httpx.post(f"{srv.registry_url}/subjects/{subject}/versions", json=body)
    assert answer.status_code == 200, answer.text
    schema_id: int = answer.json()["id"]
    return schema_id


def produce(srv: RunningServer, topic: str, body: dict[str, Any]) -> httpx.Response:
    return srv.client.post(f"/v1/topics/{topic}/records", json=body)


def consume(srv: RunningServer, topic: str, n: int) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of the first ``n`` records of partition 0, read over the Kafka door."""
    return [(msg.key(), msg.value()) for msg in registry_kafka.consume(srv.kafka_bootstrap, topic, n)]


def decoded(srv: RunningServer, topic: str, **params: Any) -> list[dict[str, Any]]:
    answer = srv.fetch(topic, 0, 0, decode="schema", **params)
    assert answer.status_code == 200, answer.text
    records: list[dict[str, Any]] = answer.json()["records"]
    return records


def test_avro_by_subject_and_by_id_reads_back_with_the_avro_deserializer(
    srv: RunningServer, client: SchemaRegistryClient
) -> None:
    topic = "typed-avro"
    # Validation on produce holds typed values to the same rule as any other.
    srv.create_topic(topic, 1, **{"confluent.value.schema.validation": "true"})
    key_id = register(srv, f"{topic}-key", json.dumps("string"))
    value_id = register(srv, f"{topic}-value", json.dumps(ORDER))
    orders = [{"id": 1, "item": "tea"}, {"id": 2, "item": "jam"}]
    by_subject = produce(
        srv,
        topic,
        {
            "key_schema_id": key_id,
            "value_subject": f"{topic}-value",
            "records": [{"key": "k1", "value": orders[0]}, {"key": "k2", "value": orders[1], "partition": 0}],
        },
    )
    assert by_subject.status_code == 200, by_subject.text
    by_id = produce(
        srv,
        topic,
        {
            "value_schema_id": value_id,
            "key_subject": None,  # null is the same as absent
            "records": [
                {"key": "plain", "value": {"id": 3, "item": "bread"}},
                {"key": "gone", "value": None},
            ],
        },
    )
    assert by_id.status_code == 200, by_id.text

    keys = AvroDeserializer(client)
    values = AvroDeserializer(client)
    got = consume(srv, topic, 4)
    assert keys(got[0][0], SerializationContext(topic, MessageField.KEY)) == "k1"
    assert got[2][0] == b"plain"  # no key schema: the key is text in the body's encoding
    assert got[3][1] is None  # a null value stays a tombstone
    read = [values(v, SerializationContext(topic, MessageField.VALUE)) for _, v in got[:3]]
    assert read == [*orders, {"id": 3, "item": "bread"}]

    records = decoded(srv, topic)
    assert [r["value"] for r in records] == [*orders, {"id": 3, "item": "bread"}, None]
    assert records[0]["value_schema"] == {
        "id": value_id,
        "type": "AVRO",
        "subject": f"{topic}-value",
        "version": 1,
    }
    assert records[0]["key"] == "k1"
    assert records[0]["key_schema"]["subject"] == f"{topic}-key"
    assert records[2]["key"] == "plain"
    assert records[2]["key_decode_error"] == (
        "no schema id: the key starts with byte 112, not magic byte 0 and a 4-byte id"
    )
    assert "value_decode_error" not in records[3]


def test_protobuf_by_id_reads_back_with_the_protobuf_deserializer(srv: RunningServer) -> None:
    topic = "typed-proto"
    srv.create_topic(topic, 1)
    schema_id = register(srv, f"{topic}-value", PROTO, "PROTOBUF")
    parcel = {"id": "p1", "qty": 2, "lines": [{"sku": "a"}, {"sku": "b"}]}
    answer = produce(srv, topic, {"value_schema_id": schema_id, "records": [{"value": parcel}]})
    assert answer.status_code == 200, answer.text

    pool = protobuf.FORMAT.parse(PROTO, []).pool
    parcel_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Parcel"))
    deserializer = ProtobufDeserializer(parcel_class, {"use.deprecated.format": False})
    [(_, value)] = consume(srv, topic, 1)
    message = deserializer(value, SerializationContext(topic, MessageField.VALUE))
    assert (message.id, message.qty, [line.sku for line in message.lines]) == ("p1", 2, ["a", "b"])
    [record] = decoded(srv, topic)
    assert record["value"] == parcel
    assert record["value_schema"]["type"] == "PROTOBUF"

    # A field the message does not declare: refused, naming the record, and nothing is written.
    unknown = produce(
        srv,
        topic,
        {"value_schema_id": schema_id, "records": [{"value": parcel}, {"value": {"colour": "red"}}]},
    )
    assert unknown.status_code == 422
    body = unknown.json()
    assert body["error_code"] == 42221
    assert body["record"] == 1
    assert body["message"].startswith(f"record 1: the value does not fit schema id {schema_id}: ")
    assert "colour" in body["message"]
    assert srv.fetch(topic, 0, 0).json()["high_watermark"] == 1


def test_json_schema_by_subject_reads_back_with_the_json_deserializer(srv: RunningServer) -> None:
    topic = "typed-json"
    srv.create_topic(topic, 1)
    register(srv, f"{topic}-value", json.dumps(PERSON), "JSON")
    people = [{"name": "Ada", "age": 36}, {"name": "Grace"}]
    answer = produce(
        srv, topic, {"value_subject": f"{topic}-value", "records": [{"value": p} for p in people]}
    )
    assert answer.status_code == 200, answer.text
    deserializer = JSONDeserializer(json.dumps(PERSON))
    got = [
        deserializer(v, SerializationContext(topic, MessageField.VALUE)) for _, v in consume(srv, topic, 2)
    ]
    assert got == people
    assert [r["value"] for r in decoded(srv, topic)] == people

    refused = produce(
        srv,
        topic,
        {"value_subject": f"{topic}-value", "records": [{"value": people[0]}, {"value": {"age": -1}}]},
    )
    assert refused.status_code == 422
    assert refused.json()["error_code"] == 42221
    assert refused.json()["record"] == 1
    assert "'name' is a required property" in refused.json()["message"]


def test_refusals(srv: RunningServer) -> None:
    topic = "typed-refused"
    srv.create_topic(topic, 1)
    value_id = register(srv, f"{topic}-value", json.dumps(ORDER))

    def answer(body: dict[str, Any]) -> tuple[int, int, str]:
        got = produce(srv, topic, body)
        return got.status_code, got.json()["error_code"], got.json()["message"]

    one = [{"value": {"id": 1, "item": "x"}}]
    status, code, message = answer({"value_schema_id": value_id, "records": [*one, {"value": {"id": "one"}}]})
    assert (status, code) == (422, 42221)
    assert message.startswith(f"record 1: the value does not fit schema id {value_id}: ")
    assert answer({"value_schema_id": 999_999, "records": one}) == (
        404,
        40408,
        "value: Schema 999999 not found",
    )
    assert answer({"value_subject": "nobody-value", "records": one})[:2] == (404, 40408)
    assert answer({"value_subject": f"{topic}-value", "value_schema_version": 7, "records": one})[:2] == (
        404,
        40408,
    )
    assert answer({"key_subject": f"{topic}-value", "key_schema_id": value_id, "records": one})[:2] == (
        422,
        42206,
    )
    # An untyped field keeps the plain rules: text in the body's encoding.
    assert answer({"key_schema_id": value_id, "records": [{"key": None, "value": {"id": 1}}]})[:2] == (
        422,
        42206,
    )
    assert answer({"value_schema_id": value_id, "value_subject": "x", "records": one})[:2] == (422, 42206)
    assert answer({"value_schema_id": value_id, "value_schema_version": 1, "records": one})[:2] == (
        422,
        42206,
    )
    written = produce(
        srv, topic, {"value_subject": f"{topic}-value", "value_schema_version": 1, "records": one}
    )
    assert written.status_code == 200, written.text
    assert srv.fetch(topic, 0, 0).json()["high_watermark"] == 1


def test_fetch_leaves_bytes_that_do_not_decode_with_a_reason(srv: RunningServer) -> None:
    topic = "typed-undecoded"
    srv.create_topic(topic, 1)
    value_id = register(srv, f"{topic}-value", json.dumps(ORDER))
    values = [framed(999_998, b"\x02"), framed(value_id, b"\x02"), b"text"]
    answer = srv.client.post(
        f"/v1/topics/{topic}/records",
        json={"encoding": "base64", "records": [{"value": _b64(v)} for v in values]},
    )
    assert answer.status_code == 200, answer.text
    records = decoded(srv, topic, encoding="base64")
    assert [r["value"] for r in records] == [_b64(v) for v in values]
    assert [r["value_decode_error"] for r in records] == [
        "schema id 999998 is not registered",
        f"not a value of schema id {value_id}: not an Avro value of the schema: EOFError: ",
        "no schema id: the value starts with byte 116, not magic byte 0 and a 4-byte id",
    ]


def test_fetch_leaves_a_protobuf_message_without_a_json_form_undecoded(srv: RunningServer) -> None:
    topic = "typed-no-json"
    srv.create_topic(topic, 1)
    stamped = 'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n'
    stamped += "message Stamped { google.protobuf.Timestamp at = 1; }\n"
    schema_id = register(srv, f"{topic}-value", stamped, "PROTOBUF")
    pool = protobuf.FORMAT.parse(stamped, []).pool
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName("Stamped"))()
    message.at.seconds = 2**62  # valid on the wire, past the year 9999 that JSON's form allows
    value = framed(schema_id, b"\x00" + message.SerializeToString())
    answer = srv.client.post(
        f"/v1/topics/{topic}/records", json={"encoding": "base64", "records": [{"value": _b64(value)}]}
    )
    assert answer.status_code == 200, answer.text
    [record] = decoded(srv, topic, encoding="base64")
    assert record["value"] == _b64(value)
    assert record["value_decode_error"].startswith(
        f"not a value of schema id {schema_id}: Stamped has no JSON form: "
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_decoding_names_a_schema_only_through_a_subject_the_reader_may_read(tmp_path: Path) -> None:
    settings = local_settings(tmp_path, principals_file=write_principals(tmp_path))
    with run_server(settings) as secured:
        admin = ("admin", PASSWORDS["admin"])
        subject = "orders.typed-value"
        answer = httpx.post(
            f"{secured.registry_url}/subjects/{subject}/versions",
            json={"schema": json.dumps(ORDER)},
            auth=admin,
        )
        assert answer.status_code == 200, answer.text
        assert httpx.post(f"{secured.url}/v1/topics", json={"name": "orders.typed"}, auth=admin).is_success
        body = {"value_subject": subject, "records": [{"value": {"id": 1, "item": "tea"}}]}
        assert httpx.post(f"{secured.url}/v1/topics/orders.typed/records", json=body, auth=admin).is_success
        url = f"{secured.url}/v1/topics/orders.typed/partitions/0/records"
        params = {"decode": "schema", "encoding": "base64", "max_wait_ms": 0}
        [as_admin] = httpx.get(url, params=params, auth=admin).json()["records"]
        assert as_admin["value"] == {"id": 1, "item": "tea"}
        assert as_admin["value_schema"]["subject"] == subject
        # bob may read the orders.* topics and no subject: the value stays bytes, and no subject is named.
        answer = httpx.get(url, params=params, auth=("bob", PASSWORDS["bob"]))
        assert answer.status_code == 200, answer.text
        [as_bob] = answer.json()["records"]
        assert isinstance(as_bob["value"], str)
        assert as_bob.get("value_schema") is None
        assert "not allowed to read a subject" in as_bob["value_decode_error"]
