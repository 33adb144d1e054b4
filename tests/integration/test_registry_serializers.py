"""confluent-kafka's serializers end to end through one agent: each record is serialized against the
registry (at the root of its own port), produced through the Kafka door, consumed back through it and
deserialized against the registry, for Avro, JSON Schema and Protobuf.

What each test holds, beyond the plain round trip of tests/integration/test_registry_client.py:
- ``auto.register.schemas``: keys and values under TopicNameStrategy, the id on the wire the registered one;
- ``use.latest.version`` with auto-registration off: the latest version, registered by another client (as
  text, Protobuf included), is what the serializer writes with; without it, a lookup finds a registered
  schema and refuses an unregistered one, registering nothing;
- ``normalize.schemas``: two spellings of one schema are one id and one version, stored in normal form;
- RecordNameStrategy (two record types on one topic) and TopicRecordNameStrategy;
- Protobuf imports: a message importing another file, which the serializer registers as its own subject
  and references, and ``google/protobuf/timestamp.proto``, which it leaves to the registry; the
  deserializer resolves the reference through the registry (``format=serialized``);
- an Avro named type and a JSON ``$ref`` registered under other subjects and referenced;
- the header form of the schema id (``header_schema_id_serializer``: magic 1 and the schema's guid in
  ``__value_schema_id``), which the deserializers read first.

One agent on the embedded default (SQLite) serves the module; the registry on both metadata backends is
tests/integration/test_registry_client.py's business. Protobuf classes come from ``.proto`` text compiled
here by grpcio-tools' protoc, as generated code would be.
"""

from __future__ import annotations

import importlib.resources
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
    header_schema_id_serializer,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

from tests.fixtures.registry_kafka import Headers, round_trip
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

WELL_KNOWN = str(importlib.resources.files("grpc_tools") / "_proto")
FORMATS = ("avro", "json", "protobuf")
# A field kind as each format spells it: Avro, JSON Schema, Protobuf.
KINDS = {"string": ("string", "string", "string"), "long": ("long", "integer", "int64")}
Serde = Callable[..., Any]


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("serializers"))) as server:
        yield server


@pytest.fixture(scope="module")
def registry(srv: RunningServer) -> Iterator[SchemaRegistryClient]:
    """The producers' client."""
    with SchemaRegistryClient({"url": srv.registry_url, "max.retries": 0}) as client:
        yield client


@pytest.fixture(scope="module")
def reader(srv: RunningServer) -> Iterator[SchemaRegistryClient]:
    """The consumers' client, apart as in an application: the client caches a schema by id whatever the
    format asked, so one client holding the text a registration answered would hand that text to a
    Protobuf deserializer that asks for the serialized descriptor."""
    with SchemaRegistryClient({"url": srv.registry_url, "max.retries": 0}) as client:
        yield client


# --- schemas, message classes and the trip through Kafka ----------------------------------------------------
def proto(package: str, body: str, *imports: str) -> str:
    head = "".join(f'import "{name}";\n' for name in imports)
    return f'syntax = "proto3";\npackage {package};\n{head}{body}'


def compile_protos(workdir: Path, files: dict[str, str]) -> descriptor_pool.DescriptorPool:
    """A pool holding ``files`` (import path → text) and what they import, compiled by protoc."""
    src = workdir / "src"
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    out = workdir / "set.pb"
    args = ["protoc", f"-I{src}", f"-I{WELL_KNOWN}", f"--descriptor_set_out={out}", "--include_imports"]
    assert protoc.main([*args, *files]) == 0, f"protoc refused {sorted(files)}"
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:  # dependencies first
        pool.Add(file)
    return pool


def message_class(pool: descriptor_pool.DescriptorPool, full_name: str) -> Any:
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


@dataclass(frozen=True)
class Record:
    """One record type in the three formats: Avro and JSON Schema text, ``.proto`` text and its class."""

    avro: str
    json: str
    proto: str
    message: Any

    def texts(self) -> dict[str, str]:
        return {"avro": self.avro, "json": self.json, "protobuf": self.proto}

    def serializers(self, registry: SchemaRegistryClient, conf: dict[str, Any]) -> dict[str, Serde]:
        return {
            "avro": AvroSerializer(registry, self.avro, conf=conf),
            "json": JSONSerializer(self.json, registry, conf=conf),
            "protobuf": ProtobufSerializer(self.message, registry, conf=conf),
        }

    def deserializers(self, reader: SchemaRegistryClient) -> dict[str, Serde]:
        return {
            "avro": AvroDeserializer(reader),
            "json": JSONDeserializer(None, schema_registry_client=reader),
            "protobuf": ProtobufDeserializer(self.message, schema_registry_client=reader),
        }

    def values(self, value: dict[str, Any]) -> dict[str, Any]:
        return {"avro": value, "json": value, "protobuf": self.message(**value)}


def record(workdir: Path, full_name: str, fields: dict[str, str], **defaults: Any) -> Record:
    """``full_name`` with ``fields`` (name → kind, in order; Protobuf numbers them so) in each format. A
    default goes to Avro; JSON requires the fields without one, in a closed content model (adding an
    optional property to it is backward compatible, to an open one it is not)."""
    namespace, _, name = full_name.rpartition(".")
    avro_fields = [
        {"name": f, "type": KINDS[k][0], **({"default": defaults[f]} if f in defaults else {})}
        for f, k in fields.items()
    ]
    avro = {"type": "record", "name": name, "namespace": namespace, "fields": avro_fields}
    json_schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": full_name,
        "type": "object",
        "properties": {f: {"type": KINDS[k][1]} for f, k in fields.items()},
        "required": [f for f in fields if f not in defaults],
        "additionalProperties": False,
    }
    lines = "".join(f"  {KINDS[k][2]} {f} = {i};\n" for i, (f, k) in enumerate(fields.items(), 1))
    text = proto(namespace, f"message {name} {{\n{lines}}}\n")
    pool = compile_protos(workdir / full_name, {f"{name.lower()}.proto": text})
    return Record(json.dumps(avro), json.dumps(json_schema), text, message_class(pool, full_name))


def ctx(
    topic: str, headers: Headers | None = None, field: MessageField = MessageField.VALUE
) -> SerializationContext:
    return SerializationContext(topic, field, headers)


def send(srv: RunningServer, topic: str, items: list[tuple[Serde, Any]]) -> list[tuple[bytes, Headers]]:
    """Each (serializer, value) serialized for ``topic`` in turn, produced, and consumed back: each record's
    value and headers as the consumer got them."""
    records: list[tuple[bytes | None, bytes, Headers]] = []
    for serialize, value in items:
        headers: Headers = []
        records.append((None, serialize(value, ctx(topic, headers)), headers))
    out: list[tuple[bytes, Headers]] = []
    for msg in round_trip(srv.kafka_bootstrap, topic, records):
        got, got_headers = msg.value(), msg.headers() or []
        assert got is not None
        assert isinstance(got_headers, list)
        out.append((got, got_headers))
    return out


def read_back(topic: str, deserializers: list[Serde], got: list[tuple[bytes, Headers]]) -> list[Any]:
    """Each record deserialized by its own deserializer (a Protobuf one reads into one class)."""
    return [d(value, ctx(topic, headers)) for d, (value, headers) in zip(deserializers, got, strict=True)]


def wire_id(data: bytes) -> int:
    """The schema id of Confluent's prefix form: magic byte 0, then the id, big-endian."""
    assert data[0] == 0, data[:5]
    return int.from_bytes(data[1:5], "big")


def text_of(schema: Schema) -> str:
    assert schema.schema_str is not None
    return schema.schema_str


def latest_guid(srv: RunningServer, subject: str) -> uuid.UUID:
    """The guid of the subject's latest version (answers name it to clients that accept unknown fields)."""
    answer = httpx.get(
        f"{srv.registry_url}/subjects/{subject}/versions/latest",
        headers={"Confluent-Accept-Unknown-Properties": "true"},
    )
    assert answer.status_code == 200, answer.text
    return uuid.UUID(answer.json()["guid"])


ORDER = {"id": "string", "cents": "long"}
VALUE = {"id": "o-1", "cents": 4200}


# --- the tests ----------------------------------------------------------------------------------------------
def test_auto_registration_keys_and_values(
    srv: RunningServer, registry: SchemaRegistryClient, reader: SchemaRegistryClient, tmp_path: Path
) -> None:
    """Each format registers its value schema under ``{topic}-value`` on first use (and an Avro key under
    ``{topic}-key``); what is consumed deserializes to what was produced, with the registered id."""
    order = record(tmp_path, "auto.Order", ORDER)
    serializers, deserializers = order.serializers(registry, {}), order.deserializers(reader)
    for kind in FORMATS:
        topic, values = (
            f"auto-{kind}",
            [order.values(VALUE)[kind], order.values({"id": "o-2", "cents": 7})[kind]],
        )
        got = send(srv, topic, [(serializers[kind], v) for v in values])
        assert read_back(topic, [deserializers[kind]] * 2, got) == values, kind
        latest = registry.get_latest_version(f"{topic}-value")
        assert (latest.version, latest.schema.schema_type) == (1, kind.upper())
        assert {wire_id(value) for value, _ in got} == {latest.schema_id}
    key = SerializationContext("auto-key", MessageField.KEY)
    serialized = AvroSerializer(registry, '"string"')("o-1", key)
    (msg,) = round_trip(srv.kafka_bootstrap, "auto-key", [(serialized, b"v", [])])
    assert AvroDeserializer(reader)(msg.key(), key) == "o-1"
    assert registry.get_subjects(subject_prefix="auto-key") == ["auto-key-key"]


def test_latest_version_without_auto_registration(
    srv: RunningServer, registry: SchemaRegistryClient, reader: SchemaRegistryClient, tmp_path: Path
) -> None:
    """Another client registers v1 and v2 (Protobuf as ``.proto`` text). A serializer holding v1, with
    auto-registration off and ``use.latest.version``, writes with v2: the id on the wire is v2's and an Avro
    reader gets v2's default. With neither, a serializer looks its schema up: v1 is found (Protobuf: the
    class's descriptor matches the text), an unregistered schema is refused and nothing is registered."""
    v1 = record(tmp_path, "latest.Order", ORDER)
    v2 = record(tmp_path / "v2", "latest.Order", {**ORDER, "note": "string"}, note="none")
    stranger = record(tmp_path, "latest.Stranger", {"id": "long"})
    latest = v1.serializers(registry, {"auto.register.schemas": False, "use.latest.version": True})
    lookup = v1.serializers(registry, {"auto.register.schemas": False})
    refused = stranger.serializers(registry, {"auto.register.schemas": False})
    expected = {**v2.values(VALUE), "avro": {**VALUE, "note": "none"}}
    deserializers = v2.deserializers(reader)
    for kind in FORMATS:
        subject, topic = f"latest-{kind}-value", f"latest-{kind}"
        ids = [registry.register_schema(subject, Schema(r.texts()[kind], kind.upper())) for r in (v1, v2)]
        (got,) = send(srv, topic, [(latest[kind], v1.values(VALUE)[kind])])
        assert wire_id(got[0]) == ids[1], kind
        assert read_back(topic, [deserializers[kind]], [got]) == [expected[kind]], kind
        assert wire_id(lookup[kind](v1.values(VALUE)[kind], ctx(topic))) == ids[0], kind
        with pytest.raises(SchemaRegistryError) as refusal:
            refused[kind](stranger.values({"id": 1})[kind], ctx(topic))
        assert (refusal.value.http_status_code, refusal.value.error_code) == (404, 40403), kind
        assert registry.get_versions(subject) == [1, 2], kind


def test_normalized_schemas_are_one_version(
    srv: RunningServer, registry: SchemaRegistryClient, reader: SchemaRegistryClient, tmp_path: Path
) -> None:
    """Two spellings of one schema, each from a serializer with ``normalize.schemas``: the same id and one
    version, stored in normal form (Avro and JSON: sorted keys, full names; Protobuf: fields by number)."""
    one = record(tmp_path, "norm.Order", ORDER)
    respelled = {**json.loads(one.avro), "name": "norm.Order"}
    del respelled["namespace"]
    body = "message Order {\n  int64 cents = 2;\n  string id = 1;\n}\n"
    other_proto = proto("norm", body)
    other = Record(
        json.dumps(dict(reversed(respelled.items())), indent=2),
        json.dumps(dict(reversed(json.loads(one.json).items())), indent=1),
        other_proto,
        message_class(compile_protos(tmp_path / "other", {"order.proto": other_proto}), "norm.Order"),
    )
    # The spelling that is not the normal form goes first: what is stored shows that normalizing was asked.
    conf, spellings = {"normalize.schemas": True}, (other, one)
    pairs = [r.serializers(registry, conf) for r in spellings]
    deserializers = one.deserializers(reader)
    for kind in FORMATS:
        topic = f"norm-{kind}"
        got = send(
            srv,
            topic,
            [(pair[kind], r.values(VALUE)[kind]) for pair, r in zip(pairs, spellings, strict=True)],
        )
        assert len({wire_id(v) for v, _ in got}) == 1, kind
        assert read_back(topic, [deserializers[kind]] * 2, got) == [one.values(VALUE)[kind]] * 2, kind
        assert registry.get_versions(f"{topic}-value") == [1], kind
        stored = text_of(registry.get_latest_version(f"{topic}-value").schema)
        if kind == "protobuf":
            assert stored.index("string id = 1;") < stored.index("int64 cents = 2;"), stored
        else:
            assert stored == json.dumps(json.loads(stored), sort_keys=True, separators=(",", ":")), stored
    assert '"name":"norm.Order"' in text_of(registry.get_latest_version("norm-avro-value").schema)


def test_record_name_strategies(
    srv: RunningServer, registry: SchemaRegistryClient, reader: SchemaRegistryClient, tmp_path: Path
) -> None:
    """RecordNameStrategy: two record types on one topic, each under its full name (an Avro record's, a
    Protobuf message's, a JSON schema's ``title``); TopicRecordNameStrategy: the topic, a hyphen, the name."""
    for kind in FORMATS:
        order = record(tmp_path, f"rec.{kind}.Order", {"id": "string"})
        refund = record(tmp_path, f"rec.{kind}.Refund", ORDER)
        values = [order.values({"id": "o-1"})[kind], refund.values(VALUE)[kind]]
        names = [f"rec.{kind}.Order", f"rec.{kind}.Refund"]
        deserializers = [r.deserializers(reader)[kind] for r in (order, refund)]
        for topic, strategy, subjects in (
            (f"events-{kind}", record_subject_name_strategy, names),
            (f"audit-{kind}", topic_record_subject_name_strategy, [f"audit-{kind}-{n}" for n in names]),
        ):
            conf = {"subject.name.strategy": strategy}
            serializers = [r.serializers(registry, conf)[kind] for r in (order, refund)]
            got = send(srv, topic, list(zip(serializers * 2, values * 2, strict=True)))
            assert read_back(topic, deserializers * 2, got) == values * 2, topic
            for subject, (data, _) in zip(subjects, got[:2], strict=True):
                assert wire_id(data) == registry.get_latest_version(subject).schema_id, subject
        assert not registry.get_subjects(subject_prefix=f"events-{kind}")  # no TopicNameStrategy subject


MONEY_PROTO = proto("shop", "message Money {\n  string currency = 1;\n  int64 units = 2;\n}\n")
IMPORTING_PROTO = proto(
    "shop",
    "message Line {\n  string sku = 1;\n}\n"
    "message Order {\n  string id = 1;\n  Money total = 2;\n  google.protobuf.Timestamp placed = 3;\n"
    "  repeated Line lines = 4;\n}\n",
    "shop/money.proto",
    "google/protobuf/timestamp.proto",
)


def test_protobuf_imports(
    srv: RunningServer, registry: SchemaRegistryClient, reader: SchemaRegistryClient, tmp_path: Path
) -> None:
    """A message importing another file and ``google/protobuf/timestamp.proto``: the serializer registers the
    other file under its import path and references it, and leaves the well-known type to the registry;
    the second message of its file goes with message index [1]; the deserializer rebuilds the writer's
    files from the registry (the reference read back as a serialized descriptor) and reads the record."""
    pool = compile_protos(tmp_path, {"shop/money.proto": MONEY_PROTO, "shop/order.proto": IMPORTING_PROTO})
    order_cls = message_class(pool, "shop.Order")
    order = order_cls(id="o-1", lines=[{"sku": "a"}, {"sku": "b"}])
    order.total.currency, order.total.units = "EUR", 42
    order.placed.FromSeconds(1_700_000_000)
    (got,) = send(srv, "imports", [(ProtobufSerializer(order_cls, registry), order)])
    deserialize = ProtobufDeserializer(order_cls, schema_registry_client=reader)
    assert read_back("imports", [deserialize], [got]) == [order]
    assert got[0][5:7] == b"\x02\x02"  # one index (zig-zag 1), the second message (zig-zag 1)
    assert {"shop/money.proto", "imports-value"} <= set(registry.get_subjects())
    assert not [s for s in registry.get_subjects() if s.startswith("google/")]
    latest = registry.get_latest_version("imports-value")
    assert wire_id(got[0]) == latest.schema_id
    assert [(r.name, r.subject, r.version) for r in latest.schema.references or []] == [
        ("shop/money.proto", "shop/money.proto", 1)
    ]
    text = text_of(registry.get_schema(latest.schema_id))  # the .proto text, as other clients read it
    assert 'import "google/protobuf/timestamp.proto";' in text
    assert 'import "shop/money.proto";' in text


def test_avro_and_json_references(
    srv: RunningServer, registry: SchemaRegistryClient, reader: SchemaRegistryClient, tmp_path: Path
) -> None:
    """An Avro record using a named type registered under another subject, and a JSON schema whose
    ``$ref`` names another subject's schema: both serialize, their readers resolve the reference through
    the registry, and the referenced version cannot go while it is used (42206)."""
    money = record(tmp_path, "shop.Money", {"currency": "string", "units": "long"})
    order_avro = json.dumps(
        {"type": "record", "name": "refs.Order", "fields": [{"name": "id", "type": "string"},
                                                            {"name": "total", "type": "shop.Money"}]}
    )  # fmt: skip
    order_json = json.dumps(
        {"type": "object", "properties": {"id": {"type": "string"}, "total": {"$ref": "money.json"}}}
    )
    registry.register_schema("shop.Money", Schema(money.avro, "AVRO"))
    registry.register_schema("money-json", Schema(money.json, "JSON"))
    refs = {
        "avro": SchemaReference("shop.Money", "shop.Money", 1),
        "json": SchemaReference("money.json", "money-json", 1),
    }
    serializers = {
        "avro": AvroSerializer(registry, Schema(order_avro, "AVRO", [refs["avro"]])),
        "json": JSONSerializer(Schema(order_json, "JSON", [refs["json"]]), registry),
    }
    value = {"id": "o-1", "total": {"currency": "EUR", "units": 42}}
    for kind in ("avro", "json"):
        topic = f"refs-{kind}"
        got = send(srv, topic, [(serializers[kind], value)])
        assert read_back(topic, [money.deserializers(reader)[kind]], got) == [value], kind
        latest = registry.get_latest_version(f"{topic}-value")
        assert wire_id(got[0][0]) == latest.schema_id
        ref = refs[kind]
        assert [(r.name, r.subject, r.version) for r in latest.schema.references or []] == [
            (ref.name, ref.subject, ref.version)
        ], kind
        with pytest.raises(SchemaRegistryError) as held:
            registry.delete_version(str(ref.subject), 1)
        assert held.value.error_code == 42206, kind


def test_header_schema_id(
    srv: RunningServer, registry: SchemaRegistryClient, reader: SchemaRegistryClient, tmp_path: Path
) -> None:
    """``header_schema_id_serializer``: the value is the prefix form's payload without the prefix, and
    ``__value_schema_id`` holds magic 1 and the schema's guid; the deserializers read the header first and
    find the schema by guid."""
    order = record(tmp_path, "hdr.Order", ORDER)
    in_header = order.serializers(registry, {"schema.id.serializer": header_schema_id_serializer})
    in_prefix, deserializers, values = (
        order.serializers(registry, {}),
        order.deserializers(reader),
        order.values(VALUE),
    )
    for kind in FORMATS:
        topic = f"header-{kind}"
        got = send(srv, topic, [(in_header[kind], values[kind])])
        ((data, headers),) = got
        ((name, schema_id),) = headers
        guid = latest_guid(srv, f"{topic}-value")
        assert isinstance(schema_id, bytes)
        assert (name, schema_id[:17]) == ("__value_schema_id", b"\x01" + guid.bytes), kind
        prefixed = in_prefix[kind](values[kind], ctx(topic))
        prefix = 6 if kind == "protobuf" else 5  # magic, id, and Protobuf's message index [0]
        assert (wire_id(prefixed), prefixed[prefix:]) == (
            registry.get_latest_version(f"{topic}-value").schema_id,
            data,
        )
        assert read_back(topic, [deserializers[kind]], got) == [values[kind]], kind
