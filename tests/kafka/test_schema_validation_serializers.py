"""Validation on produce with confluent-kafka's own serializers, registering through the agent's registry
(its Confluent-compatible HTTP API): what AvroSerializer, ProtobufSerializer and JSONSerializer write
passes, at ``payload`` level too, whether the id is in the value or in the header (GUID); a serializer
registering under another subject is refused with INVALID_RECORD; a RecordNameStrategy topic takes
Protobuf messages by their message indexes, nested ones included; and what passed reads back through the
deserializers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    header_schema_id_serializer,
    record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import message_factory

from registry.formats import protobuf
from tests.fixtures import registry_kafka
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.kafka.schema_cases import ORDER, PAYMENT, framed

pytestmark = pytest.mark.integration

PAYLOAD = {"confluent.value.schema.validation": "true", "strata.value.schema.validation.level": "payload"}
PROTO = protobuf.FORMAT.parse(
    """syntax = "proto3";
package shop;
message Order {
  string id = 1;
  message Line { int32 qty = 1; string sku = 2; }
  repeated Line lines = 2;
}
""",
    [],
)
OTHER = protobuf.FORMAT.parse('syntax = "proto3";\npackage audit;\nmessage Event { string what = 1; }\n', [])
Headers = list[tuple[str, bytes]]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("serializers"))) as running:
        yield running


@pytest.fixture(scope="module")
def client(srv: RunningServer) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": srv.registry_prefix_url, "max.retries": 0}) as sr:
        yield sr


def ctx(topic: str, headers: Headers | None = None) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE, headers)


def produce(srv: RunningServer, topic: str, values: list[tuple[bytes | None, Headers]]) -> list[int | None]:
    """Each value in its own flush (its own batch); the error code of each, None when written."""
    producer = Producer({"bootstrap.servers": srv.kafka_bootstrap, "linger.ms": 0})
    found: list[KafkaError | None] = []
    for value, headers in values:
        producer.produce(topic, value=value, headers=headers, on_delivery=lambda err, _m: found.append(err))
        assert producer.flush(30) == 0
    return [None if err is None else err.code() for err in found]


def consume(srv: RunningServer, topic: str, n: int) -> list[tuple[bytes, Headers]]:
    """(value, headers) of the first ``n`` records of partition 0, read over the Kafka door."""
    return [
        (msg.value(), msg.headers() or []) for msg in registry_kafka.consume(srv.kafka_bootstrap, topic, n)
    ]


def test_avro_serializer_at_payload_level(srv: RunningServer, client: SchemaRegistryClient) -> None:
    topic = "ser-avro"
    srv.create_topic(topic, 1, **PAYLOAD)
    prefixed = AvroSerializer(client, json.dumps(ORDER))
    in_header = AvroSerializer(
        client, json.dumps(ORDER), conf={"schema.id.serializer": header_schema_id_serializer}
    )
    elsewhere: Callable[[Any, Any], str] = lambda _ctx, _name: "elsewhere-value"  # noqa: E731
    other_subject = AvroSerializer(client, json.dumps(PAYMENT), conf={"subject.name.strategy": elsewhere})
    headers: Headers = []
    values = [
        (prefixed({"id": 1, "item": "tea"}, ctx(topic)), []),
        (in_header({"id": 2, "item": "marmalade"}, ctx(topic, headers)), headers),
        (other_subject({"cents": 3}, ctx(topic)), []),
        (None, []),
    ]
    assert [name for name, _ in headers] == ["__value_schema_id"]
    assert produce(srv, topic, values) == [None, None, KafkaError.INVALID_RECORD, None]
    deserializer = AvroDeserializer(client)
    got = [deserializer(v, ctx(topic, h)) if v else None for v, h in consume(srv, topic, 2)]
    assert got == [{"id": 1, "item": "tea"}, {"id": 2, "item": "marmalade"}]


def test_protobuf_serializer_by_record_name(srv: RunningServer, client: SchemaRegistryClient) -> None:
    topic = "ser-proto"
    srv.create_topic(topic, 1, **PAYLOAD, **{"confluent.value.subject.name.strategy": "RecordNameStrategy"})
    order = message_factory.GetMessageClass(PROTO.pool.FindMessageTypeByName("shop.Order"))
    line = message_factory.GetMessageClass(PROTO.pool.FindMessageTypeByName("shop.Order.Line"))
    conf = {"subject.name.strategy": record_subject_name_strategy, "use.deprecated.format": False}
    by_name = [ProtobufSerializer(cls, client, conf) for cls in (order, line)]
    values = [
        (by_name[0](order(id="o-1", lines=[line(qty=2, sku="x")]), ctx(topic)), []),
        (by_name[1](line(qty=5, sku="y"), ctx(topic)), []),  # message indexes [0, 0]: shop.Order.Line
    ]
    # A serializer naming its subject after the topic: the record name's subject has no version of it.
    other = message_factory.GetMessageClass(OTHER.pool.FindMessageTypeByName("audit.Event"))
    by_topic = ProtobufSerializer(other, client, {"use.deprecated.format": False})
    values.append((by_topic(other(what="x"), ctx(topic)), []))
    # Indexes that point at no message of the file ([1]: the file declares one top-level message).
    order_id = client.get_latest_version("shop.Order").schema_id
    values.append((framed(order_id, b"\x02\x02" + b"\x0a\x01z"), []))
    invalid = KafkaError.INVALID_RECORD
    assert produce(srv, topic, values) == [None, None, invalid, invalid]


def test_json_serializer_at_payload_level(srv: RunningServer, client: SchemaRegistryClient) -> None:
    topic = "ser-json"
    srv.create_topic(topic, 1, **PAYLOAD)
    schema = {
        "title": "Payment",
        "type": "object",
        "properties": {"cents": {"type": "integer"}},
        "required": ["cents"],
    }
    serializer = JSONSerializer(json.dumps(schema), client)
    good = serializer({"cents": 12}, ctx(topic))
    assert good is not None
    schema_id = int.from_bytes(good[1:5], "big")
    wrong = framed(schema_id, b'{"cents": "twelve"}')
    assert produce(srv, topic, [(good, []), (wrong, [])]) == [None, KafkaError.INVALID_RECORD]
