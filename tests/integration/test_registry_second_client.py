"""A second registry client, ``python-schema-registry-client`` (PyPI; module ``schema_registry``), written
apart from Confluent's with models of its own, against a running agent: at the root of the registry's
port (the async client under ``/schema-registry`` on the HTTP port).

- Avro and JSON Schema (the two formats it knows) through every call it has: register (which looks the
  schema up first), get by id, the subject-version pairs of an id, versions, a version and the latest,
  the lookup, compatibility checks (plain and verbose), the global and a subject's level, deletes, and its
  answers to the errors it reads (409 on registration, 404 as None or an empty list);
- its Faust-free message serializers (``AvroMessageSerializer``, ``JsonMessageSerializer``): records it
  encodes go through the Kafka door and are read back by it and by confluent-kafka's deserializers, and it
  reads what confluent-kafka's serializers wrote: one wire format, one registry;
- its async client, and HTTP Basic credentials (``httpx`` auth, or in the URL) against a principals file.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from schema_registry.client import AsyncSchemaRegistryClient, SchemaRegistryClient
from schema_registry.client.errors import ClientError
from schema_registry.client.schema import AvroSchema, BaseSchema, JsonSchema
from schema_registry.serializers.message_serializer import (
    AvroMessageSerializer,
    JsonMessageSerializer,
    MessageSerializer,
)

from tests.fixtures.registry_kafka import round_trip
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration


def _avro(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Order", "namespace": "second", "fields": list(fields)}


def _json(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "title": "second.Order", "properties": properties, **extra}


ID, CENTS = {"name": "id", "type": "string"}, {"name": "cents", "type": "long", "default": 0}
# Per format: the schema class, v1, a backward-compatible v2 and a v3 that breaks v1 and v2.
CASES: dict[str, tuple[type[BaseSchema], dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "AVRO": (AvroSchema, _avro(ID), _avro(ID, CENTS), _avro({"name": "id", "type": "long"})),
    "JSON": (
        JsonSchema,
        _json({"id": {"type": "string"}}, required=["id"]),
        _json({"id": {"type": "string"}}),
        _json({"id": {"type": "integer"}}, required=["id"]),
    ),
}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("second-client"))) as server:
        yield server


def _refused(call: Callable[[], object]) -> int | None:
    """The HTTP status the client's ClientError carries."""
    with pytest.raises(ClientError) as info:
        call()
    return info.value.http_code


@pytest.mark.parametrize("kind", sorted(CASES))
def test_every_call_for_avro_and_json(srv: RunningServer, kind: str) -> None:
    make, v1_raw, v2_raw, breaking_raw = CASES[kind]
    v1, v2, breaking = make(v1_raw), make(v2_raw), make(breaking_raw)
    subject, url = f"second-{kind.lower()}", srv.registry_url
    client = SchemaRegistryClient(url)
    first = client.register(subject, v1)
    assert SchemaRegistryClient(url).register(subject, v1) == first  # the server's idempotence, not a cache
    fresh = SchemaRegistryClient(url)  # every read below from the registry, none from a client's cache
    got = fresh.get_by_id(first)
    assert got is not None
    assert (got.schema_type, got.raw_schema) == (kind, v1_raw)
    found = fresh.check_version(subject, v1)
    assert found is not None
    assert (found.subject, found.schema_id, found.version) == (subject, first, 1)
    assert fresh.test_compatibility(subject, v2) is True
    assert fresh.test_compatibility(subject, breaking) is False
    verbose = fresh.test_compatibility(subject, breaking, verbose=True)
    assert isinstance(verbose, dict)
    assert verbose["is_compatible"] is False
    assert verbose["messages"], verbose
    assert _refused(lambda: fresh.register(subject, breaking)) == 409
    second = fresh.register(subject, v2)
    assert second != first
    assert fresh.get_versions(subject) == [1, 2]
    latest, one = fresh.get_schema(subject), fresh.get_schema(subject, version=1)
    assert latest is not None
    assert one is not None
    assert (latest.version, latest.schema_id, one.version, one.schema_id) == (2, second, 1, first)
    pairs = fresh.get_schema_subject_versions(second)
    assert pairs is not None
    assert [(p.subject, p.version) for p in pairs] == [(subject, 2)]
    assert subject in fresh.get_subjects()
    # Levels: a subject's own, then the global one (its GET answers 404 while the subject has none).
    assert _refused(lambda: fresh.get_compatibility(subject)) == 404
    assert fresh.update_compatibility("NONE", subject) is True
    assert fresh.get_compatibility(subject) == "NONE"
    assert fresh.test_compatibility(subject, breaking) is True
    assert fresh.update_compatibility("FULL") is True
    assert fresh.get_compatibility() == "FULL"
    assert fresh.update_compatibility("BACKWARD") is True
    # Deletes: a version, then the subject; what is gone reads as None or an empty list.
    assert fresh.delete_version(subject, 2) == 2
    assert fresh.get_versions(subject) == [1]
    assert fresh.get_schema(subject, version=2) is None
    assert fresh.delete_subject(subject) == [1]
    assert subject not in fresh.get_subjects()
    assert fresh.get_versions(subject) == []
    assert SchemaRegistryClient(url).check_version(subject, v1) is None  # this client's cache would answer
    assert fresh.get_by_id(first) is not None  # a soft delete keeps the id readable
    assert fresh.get_by_id(999_999) is None


def _ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def test_message_serializers_share_the_wire_with_confluent_kafka(srv: RunningServer) -> None:
    """Records encoded by this client's serializers travel through the Kafka door and are decoded by it and
    by confluent-kafka's deserializers; it decodes what confluent-kafka's serializers encoded."""
    client = SchemaRegistryClient(srv.registry_url)
    record = {"id": "o-1", "cents": 42}
    avro_v2 = CASES["AVRO"][2]
    json_schema = _json({"id": {"type": "string"}, "cents": {"type": "integer"}}, required=["id"])
    with ConfluentClient({"url": srv.registry_url, "max.retries": 0}) as confluent:
        formats: list[tuple[str, MessageSerializer, BaseSchema, Any, Any]] = [
            (
                "avro",
                AvroMessageSerializer(client),
                AvroSchema(avro_v2),
                AvroSerializer(confluent, json.dumps(avro_v2)),
                AvroDeserializer(confluent),
            ),
            (
                "json",
                JsonMessageSerializer(client),
                JsonSchema(json_schema),
                JSONSerializer(json.dumps(json_schema), confluent),
                JSONDeserializer(None, schema_registry_client=confluent),
            ),
        ]
        for kind, ours, schema, their_serializer, their_deserializer in formats:
            topic = f"second-wire-{kind}"
            encoded = ours.encode_record_with_schema(f"{topic}-value", schema, record)
            (msg,) = round_trip(srv.kafka_bootstrap, topic, [(None, encoded, [])])
            value = msg.value()
            assert value is not None
            assert ours.decode_message(value) == record, kind
            assert their_deserializer(value, _ctx(topic)) == record, kind
            theirs = their_serializer(record, _ctx(topic))
            assert theirs[:5] == encoded[:5], kind  # one schema under one subject: one id on the wire
            assert ours.decode_message(theirs) == record, kind


def test_async_client(srv: RunningServer) -> None:
    async def walk() -> None:
        client = AsyncSchemaRegistryClient(srv.registry_prefix_url)
        schema = AvroSchema(_avro(ID, {"name": "note", "type": "string"}))
        schema_id = await client.register("second-async", schema)
        got = await client.get_by_id(schema_id)
        assert got is not None
        assert got.raw_schema == schema.raw_schema
        assert await client.get_versions("second-async") == [1]
        assert await client.test_compatibility("second-async", AvroSchema(_avro(ID))) is True
        assert await client.delete_subject("second-async") == [1]

    asyncio.run(walk())


def test_basic_credentials(tmp_path: Path) -> None:
    """With a principals file, this client's credentials (``httpx`` auth, or in the URL) are checked;
    wrong ones are 401."""
    principals = tmp_path / "principals.toml"
    principals.write_text(
        '[principals.writer]\npassword = "writer-pw-91b3"\nsubjects = { admin = ["ok."] }\n'
    )
    schema = AvroSchema(_avro(ID))
    with run_server(local_settings(tmp_path, principals_file=str(principals), kafka_port=-1)) as srv:
        port = srv.registry_url.rsplit(":", 1)[1]
        with_auth = SchemaRegistryClient(srv.registry_url, auth=httpx.BasicAuth("writer", "writer-pw-91b3"))
        in_url = SchemaRegistryClient(f"http://writer:writer-pw-91b3@127.0.0.1:{port}")
        wrong = SchemaRegistryClient(srv.registry_url, auth=httpx.BasicAuth("writer", "wrong"))
        schema_id = with_auth.register("ok.orders", schema)
        assert in_url.get_versions("ok.orders") == [1]
        assert _refused(lambda: wrong.get_subjects()) == 401
        assert _refused(lambda: with_auth.register("other.orders", schema)) == 403
        assert in_url.delete_subject("ok.orders") == [1]
        assert schema_id > 0
