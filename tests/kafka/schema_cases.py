"""What the validation-on-produce tests of every client share: values written by confluent-kafka's
AvroSerializer through the agent's registry (``Serialized``), or framed by hand (``framed``: magic byte 0,
the 4-byte id, the Avro binary written by fastavro, as the serializer writes it), and the scenarios each
client runs, with what the agent must answer.

Each scenario is one flush of the client (records of one partition go in one batch): the partition's
records are all accepted, or all refused with INVALID_RECORD (87) and a message naming the record.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from dataclasses import dataclass, field
from typing import Any

import fastavro
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from storage.metadata.base import MetadataStore
from tests.fixtures.server import RunningServer

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
PAYMENT = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop",
    "fields": [{"name": "cents", "type": "int"}],
}
PARTITIONS = 2


def avro(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


class Serialized:
    """Values written by confluent-kafka's AvroSerializer, which registers its schemas through the agent's
    registry (its HTTP API under /schema-registry): orders under ``<topic>-value``, the subject the topic's
    TopicNameStrategy names, and payments under ``<topic>-payments-value``, which is not."""

    def __init__(self, registry_url: str, topic: str) -> None:
        self.client = SchemaRegistryClient({"url": registry_url, "max.retries": 0})
        self._ctx = SerializationContext(topic, MessageField.VALUE)
        self._order = AvroSerializer(self.client, json.dumps(ORDER))
        elsewhere = f"{topic}-payments-value"
        self._payment = AvroSerializer(
            self.client, json.dumps(PAYMENT), conf={"subject.name.strategy": lambda _ctx, _name: elsewhere}
        )

    def __enter__(self) -> Serialized:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__()

    def order(self, i: int) -> bytes:
        value = self._order({"id": i, "item": f"item-{i}"}, self._ctx)
        assert value is not None
        return value

    def payment(self) -> bytes:
        value = self._payment({"cents": 5}, self._ctx)
        assert value is not None
        return value


def create_validating(metadata: MetadataStore, topic: str, **configs: str) -> None:
    metadata.create_topic(topic, PARTITIONS, {"confluent.value.schema.validation": "true", **configs}, 0)


@dataclass
class Send:
    """One flush: ``records`` (partition, key, value); ``refused``: partition -> what the agent's message
    says (it also names the record); partitions not in it are accepted."""

    name: str
    records: list[tuple[int, bytes | None, bytes | None]]
    codec: str = "none"
    refused: dict[int, str] = field(default_factory=dict)


def scenarios(topic: str, values: Serialized, codec: str) -> list[Send]:
    """accepted; a tombstone; refused (no framing); a wrong subject; a compressed batch accepted and one
    refused; and a refused partition beside an accepted one in the same request."""
    bad = b"plain text, no schema id"
    payment = values.payment()
    payment_id = int.from_bytes(payment[1:5], "big")
    compressed = [(0, b"c", values.order(100 + i)) for i in range(20)]
    with_bad: list[tuple[int, bytes | None, bytes | None]] = [
        (0, b"c", values.order(200 + i)) for i in range(10)
    ]
    with_bad.insert(7, (0, b"c", bad))
    return [
        Send("accepted", [(0, f"k{i}".encode(), values.order(i)) for i in range(5)]),
        Send("tombstone", [(0, b"k1", None)]),
        Send("refused", [(0, b"k", bad)], refused={0: "record 0: the value starts with byte 112"}),
        Send(
            "wrong subject",
            [(0, b"k", payment)],
            refused={0: f"record 0: schema id {payment_id} is not registered under subject {topic}-value"},
        ),
        Send("compressed", compressed, codec),
        Send("compressed refused", with_bad, codec, refused={0: "record 7: the value starts with byte 112"}),
        Send(
            "other partitions",
            [(0, b"k", bad), (1, b"k", values.order(300))],
            refused={0: "record 0: the value starts with byte 112"},
        ),
    ]


def stored(sends: list[Send]) -> dict[int, list[bytes | None]]:
    """The values each partition must hold afterwards, in order: every accepted partition's records."""
    out: dict[int, list[bytes | None]] = {p: [] for p in range(PARTITIONS)}
    for send in sends:
        for partition, _, value in send.records:
            if partition not in send.refused:
                out[partition].append(value)
    return out


def values(srv: RunningServer, topic: str, partition: int) -> list[bytes | None]:
    """The partition's values as stored, read over HTTP."""
    out: list[bytes | None] = []
    offset = 0
    while True:
        response = srv.fetch(topic, partition, offset, encoding="base64")
        assert response.status_code == 200, response.text
        body = response.json()
        out += [None if r["value"] is None else base64.b64decode(r["value"]) for r in body["records"]]
        if body["next_offset"] >= body["high_watermark"]:
            return out
        offset = body["next_offset"]
