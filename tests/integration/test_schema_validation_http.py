"""Validation on produce at the HTTP door (api/schema_checks.py), against a real agent: accepted records and
tombstones, a refusal with 42220 naming the request's record (also when its records spread over several
partitions' batches, and when the topic's compression.type makes the agent compress them), a wrong subject,
the key, payload level, and nothing of a refused request stored."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from registry.service import SchemaRegistry, default_formats
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.kafka.schema_cases import ORDER, PAYMENT, avro, framed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path_factory.mktemp("validation-http"))) as running:
        yield running


@pytest.fixture(scope="module")
def registry(srv: RunningServer) -> SchemaRegistry:
    return SchemaRegistry(srv.runtime.metadata, default_formats())


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def post(srv: RunningServer, topic: str, recs: list[dict[str, Any]]) -> httpx.Response:
    body = {
        "encoding": "base64",
        "records": [{k: b64(v) if k in ("key", "value") else v for k, v in r.items()} for r in recs],
    }
    return srv.client.post(f"/v1/topics/{topic}/records", json=body)


def watermarks(srv: RunningServer, topic: str) -> list[int]:
    return [s.high_watermark for s in srv.runtime.metadata.partition_states(topic)]


def order(schema_id: int, i: int) -> bytes:
    return framed(schema_id, avro(ORDER, {"id": i, "item": f"item-{i}"}))


@pytest.mark.parametrize("codec", ["producer", "zstd"])
def test_records_with_the_subjects_schema_are_written_and_others_refuse_the_request(
    srv: RunningServer, registry: SchemaRegistry, codec: str
) -> None:
    topic = f"http-{codec}"
    srv.create_topic(topic, 2, **{"confluent.value.schema.validation": "true", "compression.type": codec})
    schema_id = registry.register(f"{topic}-value", json.dumps(ORDER)).schema_id
    payments = registry.register(f"{topic}-payments", json.dumps(PAYMENT)).schema_id
    good = [{"key": f"k{i}".encode(), "value": order(schema_id, i), "partition": i % 2} for i in range(6)]
    answer = post(srv, topic, [*good, {"key": b"k0", "value": None, "partition": 0}])
    assert answer.status_code == 200, answer.text
    assert watermarks(srv, topic) == [4, 3]

    # The bad record is the request's record 3, the second record of partition 1's batch.
    wrong = framed(payments, avro(PAYMENT, {"cents": 1}))
    refused = post(srv, topic, [*good[:3], {"value": wrong, "partition": 1}, *good[3:]])
    assert refused.status_code == 422
    assert refused.json() == {
        "error_code": 42220,
        "message": f"record 3: schema id {payments} is not registered under subject {topic}-value",
        "record": 3,
    }
    plain = post(srv, topic, [*good, {"value": b"plain", "partition": 0}])
    assert plain.json()["message"] == (
        "record 6: the value starts with byte 112, not magic byte 0 of a schema id, and has no"
        " __value_schema_id header"
    )
    assert watermarks(srv, topic) == [4, 3]  # nothing of the refused requests


def test_text_records_and_the_key(srv: RunningServer, registry: SchemaRegistry) -> None:
    topic = "http-key"
    srv.create_topic(topic, 1, **{"confluent.key.schema.validation": "true"})
    # utf8 bodies take the C encoder: their keys are text, so they carry no schema id.
    answer = srv.produce(topic, [{"key": "plain", "value": "v"}])
    assert answer.json()["message"].startswith("record 0: the key starts with byte 112")
    key_id = registry.register(f"{topic}-key", json.dumps("string")).schema_id
    key = framed(key_id, avro("string", "order-1"))
    answer = post(srv, topic, [{"key": key, "value": b"any value"}, {"key": None, "value": b"no key"}])
    assert answer.status_code == 200, answer.text


def test_payload_level_over_http(srv: RunningServer, registry: SchemaRegistry) -> None:
    topic = "http-payload"
    srv.create_topic(
        topic,
        1,
        **{"redpanda.value.schema.id.validation": "true", "strata.value.schema.validation.level": "payload"},
    )
    schema_id = registry.register(f"{topic}-value", json.dumps(ORDER)).schema_id
    assert post(srv, topic, [{"value": order(schema_id, 1)}]).status_code == 200
    refused = post(srv, topic, [{"value": order(schema_id, 1)}, {"value": order(schema_id, 2) + b"\x00"}])
    assert refused.json()["message"] == (
        f"record 1: the value does not decode with schema id {schema_id}: 1 bytes left after the Avro value"
    )


def test_the_validation_configs_are_topic_configs(srv: RunningServer) -> None:
    srv.create_topic("http-configs", 1)
    shown = srv.client.get("/v1/topics/http-configs").json()["configs"]
    assert shown["confluent.value.schema.validation"] == "false"
    assert shown["confluent.value.subject.name.strategy"] == (
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    )
    assert shown["strata.key.schema.validation.level"] == "id"
    patch = srv.client.patch(
        "/v1/topics/http-configs/configs", json={"configs": {"redpanda.value.schema.id.validation": "true"}}
    )
    assert patch.status_code == 200, patch.text
    # Its alias, set the other way in another request, disagrees: refused.
    clash = srv.client.patch(
        "/v1/topics/http-configs/configs", json={"configs": {"confluent.value.schema.validation": "false"}}
    )
    assert clash.status_code == 422
    assert clash.json()["error_code"] == 42207
    bad = srv.client.patch(
        "/v1/topics/http-configs/configs", json={"configs": {"confluent.key.subject.name.strategy": "Nope"}}
    )
    assert bad.json()["error_code"] == 42207
    assert srv.produce("http-configs", [{"value": "plain"}]).json()["error_code"] == 42220
