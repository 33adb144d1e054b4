"""The schema registry driven by confluent-kafka's ``SchemaRegistryClient``, the client Confluent's
serializers use, against a running agent on both metadata backends (SQLite and PostgreSQL): every endpoint
it has, for Avro, JSON Schema and Protobuf, at the root of the registry's own port and under
``/schema-registry`` on the HTTP port (the client takes a path in its ``url``); each error it can reach,
with its HTTP status and Confluent's ``error_code``; and the three serializers, which ask the
associations endpoint first and fall back to subject naming only on its 404.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def avro(name: str, *fields: dict[str, Any]) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "t", "fields": list(fields)})


def json_schema(properties: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"type": "object", "properties": properties, **extra})


def proto(body: str, *imports: str) -> str:
    head = "".join(f'import "{i}";\n' for i in imports)
    return f'syntax = "proto3";\npackage t;\n{head}{body}'


@dataclass(frozen=True)
class Case:
    """One format: a schema, a compatible successor, a breaking one, and a schema with a reference."""

    schema_type: str
    v1: str
    v2: str
    breaking: str
    dependency: str
    ref_name: str
    with_ref: str


CASES = {
    "AVRO": Case(
        "AVRO",
        avro("User", {"name": "name", "type": "string"}),
        avro("User", {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}),
        avro("User", {"name": "name", "type": "string"}, {"name": "id", "type": "long"}),
        avro("Address", {"name": "city", "type": "string"}),
        "t.Address",
        avro("Person", {"name": "home", "type": "t.Address"}),
    ),
    "JSON": Case(
        "JSON",
        json_schema({"name": {"type": "string"}}, required=["name"]),
        json_schema({"name": {"type": "string"}}),
        json_schema({"name": {"type": "integer"}}),
        json_schema({"city": {"type": "string"}}),
        "address.json",
        json_schema({"home": {"$ref": "address.json"}}),
    ),
    "PROTOBUF": Case(
        "PROTOBUF",
        proto("message User {\n  string name = 1;\n}\n"),
        proto("message User {\n  string name = 1;\n  int32 age = 2;\n}\n"),
        proto("message User {\n  int64 name = 1;\n}\n"),
        proto("message Address {\n  string city = 1;\n}\n"),
        "address.proto",
        proto("message Person {\n  Address home = 1;\n}\n", "address.proto"),
    ),
}


@pytest.fixture(params=["own-port", "http-prefix"])
def url(server: RunningServer, request: pytest.FixtureRequest) -> str:
    return server.registry_url if request.param == "own-port" else server.registry_prefix_url


@pytest.fixture
def client(url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": url, "max.retries": 0}) as sr:
        yield sr


def refused(call: Callable[[], object]) -> tuple[int, int]:
    """The (HTTP status, error_code) a call is refused with."""
    with pytest.raises(SchemaRegistryError) as info:
        call()
    return info.value.http_status_code, info.value.error_code


def test_every_endpoint_for_every_format(client: SchemaRegistryClient, url: str) -> None:
    assert sorted(client.get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]
    assert client.get_contexts() == ["."]
    for case in CASES.values():
        _walk(client, case, f"{case.schema_type.lower()}-value")
    assert client.get_subjects(subject_prefix="avro-") == ["avro-address", "avro-person"]
    # The global config and mode.
    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility(level="full") == {"compatibility": "FULL"}
    assert client.get_config().compatibility_level == "FULL"
    assert client.delete_config().compatibility_level == "BACKWARD"
    assert client.get_global_mode() == "READWRITE"
    assert client.update_global_mode("READONLY") == "READONLY"
    assert refused(lambda: client.register_schema("other", Schema(CASES["AVRO"].v1, "AVRO"))) == (422, 42205)
    assert client.update_global_mode("READWRITE") == "READWRITE"
    # What newer clients ask before their first serialization: no association here, so 404.
    assert refused(lambda: client.get_associations_by_resource_name("t", "-"))[0] == 404
    listing = httpx.get(f"{url}/schemas", params={"subjectPrefix": "json-", "latestOnly": "true"}).json()
    assert [(s["subject"], s["version"], s["schemaType"]) for s in listing] == [
        ("json-address", 1, "JSON"),
        ("json-person", 1, "JSON"),
    ]


def _walk(client: SchemaRegistryClient, case: Case, subject: str) -> None:
    """One format through every endpoint the client has, and back to nothing."""
    kind = case.schema_type
    first = client.register_schema_full_response(subject, Schema(case.v1, kind))
    assert (first.version, first.subject) == (1, subject)
    assert client.register_schema(subject, Schema(case.v1, kind)) == first.schema_id  # idempotent
    second = client.register_schema(subject, Schema(case.v2, kind))
    assert second != first.schema_id
    got = client.get_schema(first.schema_id, subject_name=subject)
    assert (got.schema_type, got.schema_str) == (kind, case.v1)
    assert client.get_schema_by_guid(first.guid).schema_str == case.v1
    if kind == "PROTOBUF":  # as the Protobuf deserializer reads it: a base64 FileDescriptorProto
        text = client.get_schema(first.schema_id, fmt="serialized").schema_str
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
        assert [m.name for m in file.message_type] == ["User"]
    assert client.get_subjects_by_schema_id(first.schema_id) == [subject]
    assert [(v.subject, v.version) for v in client.get_schema_versions(second)] == [(subject, 2)]
    found = client.lookup_schema(subject, Schema(case.v1, kind))
    assert (found.schema_id, found.version, found.subject) == (first.schema_id, 1, subject)
    assert client.get_versions(subject) == [1, 2]
    assert client.get_version(subject, 1).schema_id == first.schema_id
    assert client.get_latest_version(subject).version == 2
    # Compatibility against one version and against what the level names.
    assert client.test_compatibility(subject, Schema(case.v2, kind), version=1, verbose=True)
    assert not client.test_compatibility(subject, Schema(case.breaking, kind))
    assert not client.test_compatibility_all_versions(subject, Schema(case.breaking, kind), verbose=True)
    # The subject's own config and mode.
    assert client.set_compatibility(subject, "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    assert client.test_compatibility(subject, Schema(case.breaking, kind))
    assert client.delete_config(subject).compatibility_level == "BACKWARD"  # the global level, now
    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert client.get_mode(subject) == "READONLY"
    assert refused(lambda: client.register_schema(subject, Schema(case.breaking, kind))) == (422, 42205)
    assert client.delete_mode(subject) == "READONLY"
    # A schema referencing another subject's.
    dependency = f"{kind.lower()}-address"
    dep_id = client.register_schema(dependency, Schema(case.dependency, kind))
    ref = SchemaReference(case.ref_name, dependency, 1)
    holder = client.register_schema(f"{kind.lower()}-person", Schema(case.with_ref, kind, [ref]))
    assert client.get_referenced_by(dependency, 1) == [holder]
    assert [r.subject for r in client.get_schema(holder).references] == [dependency]
    assert refused(lambda: client.delete_version(dependency, 1)) == (422, 42206)
    assert dep_id != holder
    # Deletes: soft, then permanent.
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    assert client.delete_version(subject, 2, permanent=True) == 2
    assert client.delete_subject(subject) == [1]
    assert subject not in client.get_subjects()
    assert subject in client.get_subjects(deleted=True)
    assert client.delete_subject(subject, permanent=True) == [1]
    assert refused(lambda: client.get_schema(second)) == (404, 40403)


def test_error_codes(server: RunningServer) -> None:
    """Each error the client can reach: HTTP status and Confluent's error_code."""
    with SchemaRegistryClient({"url": server.registry_url, "max.retries": 0}) as client:
        v1 = Schema(CASES["AVRO"].v1, "AVRO")
        client.register_schema("e", v1)
        codes = {
            "subject not found": refused(lambda: client.get_versions("missing")),
            "version not found": refused(lambda: client.get_version("e", 9)),
            "schema not found": refused(lambda: client.get_schema(9999)),
            "lookup: schema not found": refused(lambda: client.lookup_schema("e", Schema('"int"', "AVRO"))),
            "no subject-level config": refused(lambda: client.get_config("e")),
            "no subject-level mode": refused(lambda: client.get_mode("e")),
            "incompatible": refused(
                lambda: client.register_schema("e", Schema(CASES["AVRO"].breaking, "AVRO"))
            ),
            "invalid schema": refused(
                lambda: client.register_schema("e", Schema('{"type": "nope"}', "AVRO"))
            ),
            "invalid version": refused(lambda: client.get_version("e", 0)),
            "invalid level": refused(lambda: client.set_compatibility("e", "SOMETIMES")),
            "invalid mode": refused(lambda: client.update_mode("e", "SOMETIMES")),
            "reserved subject": refused(lambda: client.register_schema("__GLOBAL", v1)),
            "permanent before soft": refused(lambda: client.delete_subject("e", permanent=True)),
            "version permanent before soft": refused(lambda: client.delete_version("e", 1, permanent=True)),
        }
        client.delete_version("e", 1)
        codes["version soft-deleted twice"] = refused(lambda: client.delete_version("e", 1))
        client.register_schema("e", Schema(CASES["AVRO"].v2, "AVRO"))
        client.delete_subject("e")
        codes["subject soft-deleted twice"] = refused(lambda: client.delete_subject("e"))
    assert codes == {
        "subject not found": (404, 40401),
        "version not found": (404, 40402),
        "schema not found": (404, 40403),
        "lookup: schema not found": (404, 40403),
        "no subject-level config": (404, 40408),
        "no subject-level mode": (404, 40409),
        "incompatible": (409, 409),
        "invalid schema": (422, 42201),
        "invalid version": (422, 42202),
        "invalid level": (422, 42203),
        "invalid mode": (422, 42204),
        "reserved subject": (422, 42208),
        "permanent before soft": (404, 40405),
        "version permanent before soft": (404, 40407),
        "version soft-deleted twice": (404, 40406),
        "subject soft-deleted twice": (404, 40404),
    }
    # IMPORT mode keeps the given id, and refuses another schema under it (the client cannot send ids).
    with httpx.Client(base_url=server.registry_url) as http:
        assert http.put("/mode/imported", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
        body = {"schema": avro("Imported", {"name": "n", "type": "int"}), "id": 4242, "version": 3}
        imported = http.post("/subjects/imported/versions", json=body).json()
        assert (imported["id"], imported["version"]) == (4242, 3)
        clash = http.post("/subjects/imported/versions", json={**body, "schema": CASES["AVRO"].dependency})
        assert (clash.status_code, clash.json().get("error_code")) == (422, 42205), clash.text
        # The same schema under another id: registered, as a new version (Confluent's RestApiModeTest
        # testImportModeWithSameSchemaDifferentId); each id answers it.
        second = http.post("/subjects/imported/versions", json={**body, "id": 4243, "version": 4}).json()
        assert (second["id"], second["version"]) == (4243, 4)
        texts = {http.get(f"/schemas/ids/{i}").json()["schema"] for i in (4242, 4243)}
        assert texts == {body["schema"]}


def _protobuf_message() -> Any:
    """A message class built from a descriptor written here (no generated code, no Strata component)."""
    file = descriptor_pb2.FileDescriptorProto(name="user.proto", package="t", syntax="proto3")
    message = file.message_type.add(name="User")
    message.field.add(name="name", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    pool = descriptor_pool.DescriptorPool()
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(_add(pool, file)))


def _add(pool: descriptor_pool.DescriptorPool, file: descriptor_pb2.FileDescriptorProto) -> str:
    pool.Add(file)
    return "t.User"


def test_the_serializers_register_and_read_back(server: RunningServer) -> None:
    """Avro, JSON and Protobuf serializers with auto-registration: the associations lookup's 404 sends
    them to TopicNameStrategy, and each deserializer reads its record back through the registry."""
    with SchemaRegistryClient({"url": server.registry_prefix_url, "max.retries": 0}) as client:
        message_class = _protobuf_message()
        pairs: dict[str, tuple[Any, Any, Any]] = {
            "avro": (AvroSerializer(client, CASES["AVRO"].v1), AvroDeserializer(client), {"name": "ada"}),
            "json": (
                JSONSerializer(CASES["JSON"].v1, client),
                JSONDeserializer(CASES["JSON"].v1, schema_registry_client=client),
                {"name": "ada"},
            ),
            "proto": (
                ProtobufSerializer(message_class, client),
                ProtobufDeserializer(message_class),
                message_class(name="ada"),
            ),
        }
        for topic, (serialize, deserialize, value) in pairs.items():
            ctx = SerializationContext(topic, MessageField.VALUE)
            data = serialize(value, ctx)
            assert data[0] == 0  # Confluent's wire format: magic 0, then the schema id
            assert deserialize(data, ctx) == value
            assert client.get_latest_version(f"{topic}-value").version == 1
