"""What the validation-on-produce tests share: an in-memory ``SchemaLookup`` that counts its reads, real
parsed schemas of each format, and Confluent's framing written by hand.

The fake stands for the metadata store behind the lookup interface; the schemas are the registry's own
formats' parses, so the checks run on exactly what the agent runs them on.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from collections import Counter
from typing import Any

import fastavro

from registry.formats import avro, jsonschema, protobuf
from registry.formats.base import ParsedSchema
from registry.formats.protobuf_wire import write_message_indexes
from registry.schema_cache import SchemaCache
from registry.validate import RecordValidator
from registry.verdicts import FieldRule, SchemaValidator, Tally
from storage import records
from storage.clock import ManualClock

ORDER_AVSC = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
    }
)
KEY_AVSC = json.dumps("string")
PROTO = """syntax = "proto3";
package shop;
message Order {
  string id = 1;
  message Line { int32 qty = 1; }
  repeated Line lines = 2;
  map<string, int32> stock = 3;
}
message Refund { string order_id = 1; }
"""
JSON_SCHEMA = json.dumps(
    {
        "title": "shop.Payment",
        "type": "object",
        "properties": {"amount": {"type": "integer"}},
        "required": ["amount"],
    }
)

AVRO = avro.FORMAT.parse(ORDER_AVSC, [])
AVRO_KEY = avro.FORMAT.parse(KEY_AVSC, [])
PROTOBUF = protobuf.FORMAT.parse(PROTO, [])
JSON = jsonschema.FORMAT.parse(JSON_SCHEMA, [])


class FakeLookup:
    """The registry's facts in memory; ``reads`` counts each kind of read, as the store would see them."""

    def __init__(self) -> None:
        self.schemas: dict[int, ParsedSchema] = {}
        self.guids: dict[str, int] = {}
        self.usages: dict[int, set[str]] = {}
        self.reads: Counter[str] = Counter()

    def register(self, schema_id: int, subject: str, parsed: ParsedSchema) -> str:
        """Register ``parsed`` as a version of ``subject`` with ``schema_id``; returns its GUID."""
        self.schemas[schema_id] = parsed
        guid = str(uuid.uuid5(uuid.NAMESPACE_OID, str(schema_id)))
        self.guids[guid] = schema_id
        self.usages.setdefault(schema_id, set()).add(subject)
        return guid

    def schema(self, schema_id: int) -> ParsedSchema | None:
        self.reads["schema"] += 1
        return self.schemas.get(schema_id)

    def schema_id(self, guid: str) -> int | None:
        self.reads["guid"] += 1
        return self.guids.get(guid)

    def subjects(self, schema_id: int) -> frozenset[str]:
        self.reads["subjects"] += 1
        return frozenset(self.usages.get(schema_id, ()))


class Counts:
    """A ``ValidationMetrics`` and ``CacheMetrics`` that keeps what it is told."""

    def __init__(self) -> None:
        self.validated: Counter[tuple[str, str, str]] = Counter()
        self.cache: Counter[tuple[str, bool]] = Counter()

    def schema_validated(self, topic: str, field: str, result: str, n: int) -> None:
        self.validated[(topic, field, result)] += n

    def schema_cache(self, cache: str, hit: bool) -> None:
        self.cache[(cache, hit)] += 1


def validator(
    lookup: FakeLookup, clock: ManualClock | None = None, metrics: Counts | None = None
) -> RecordValidator:
    cache = SchemaCache(lookup, (clock or ManualClock()).monotonic, metrics=metrics)
    return RecordValidator(cache, metrics)


def avro_bytes(value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(ORDER_AVSC)), value)
    return out.getvalue()


def framed(schema_id: int, payload: bytes, indexes: list[int] | None = None) -> bytes:
    """Confluent's prefix form: magic 0, the id, the message indexes (Protobuf), the payload."""
    tail = write_message_indexes(indexes) if indexes is not None else b""
    return b"\x00" + struct.pack(">I", schema_id) + tail + payload


def guid_header(field: str, guid: str, indexes: list[int] | None = None) -> records.Header:
    """Confluent's header form: magic 1 and the GUID's bytes (and the message indexes) in the header."""
    tail = write_message_indexes(indexes) if indexes is not None else b""
    name = "__key_schema_id" if field == "key" else "__value_schema_id"
    return records.Header(name, b"\x01" + uuid.UUID(guid).bytes + tail)


def batch(values: list[bytes | None], keys: list[bytes | None] | None = None, **kw: Any) -> bytes:
    """One uncompressed batch of records with these values (and keys, and ``headers`` per record)."""
    headers = kw.pop("headers", {})
    recs = [
        records.Record(i, 1_700_000_000_000, keys[i] if keys else b"k", v, tuple(headers.get(i, ())))
        for i, v in enumerate(values)
    ]
    return records.encode_batch(recs, **kw)


def check(v: SchemaValidator, topic: str, rules: list[FieldRule], data: bytes, *, load: bool = True) -> Tally:
    """``SchemaValidator.check`` of the batch in ``data`` (decompressed first if it is compressed)."""
    header = records.read_header(data, 0, True)
    buf, start, end = records.expand_records(data, header)
    tally = Tally()
    v.check(
        topic, rules, buf, start, end, header.records_count, header.last_offset_delta, load=load, tally=tally
    )
    v.record(tally)
    return tally


VALUE = FieldRule("value", "TopicNameStrategy", payload=False)
KEY = FieldRule("key", "TopicNameStrategy", payload=False)
