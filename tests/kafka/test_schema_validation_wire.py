"""Validation on produce on the wire (kafka-python's protocol classes, the frames a client sends): one
request's refused partition and its accepted neighbour, the answer's ``error_message`` and
``record_errors`` at each version, the GUID header form, the key with RecordNameStrategy, payload level,
a compressed batch, and the metrics."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from broker import errors
from registry.formats.base import SchemaType
from registry.service import SchemaRegistry, default_formats
from storage import records
from storage.records import compression
from tests.fixtures.kafka import RunningBroker, run_broker
from tests.fixtures.server import local_settings
from tests.kafka.schema_cases import ORDER, avro, framed
from tests.kafka.wire import Wire

pytestmark = pytest.mark.integration

NOW = int(time.time() * 1000)
STRATEGIES = "io.confluent.kafka.serializers.subject."
KEY = {"type": "record", "name": "Key", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with run_broker(local_settings(tmp_path_factory.mktemp("validation-wire"))) as running:
        yield running


@pytest.fixture(scope="module")
def registry(broker: RunningBroker) -> SchemaRegistry:
    return SchemaRegistry(broker.runtime.metadata, default_formats())


def create(broker: RunningBroker, topic: str, **configs: str) -> None:
    broker.runtime.metadata.create_topic(
        topic, 2, {"confluent.value.schema.validation": "true", **configs}, 0
    )


def batch(values: list[bytes | None], keys: list[bytes | None] | None = None, **kw: Any) -> bytes:
    headers = kw.pop("headers", {})
    recs = [
        records.Record(i, NOW, keys[i] if keys else b"k", v, tuple(headers.get(i, ())))
        for i, v in enumerate(values)
    ]
    return records.encode_batch(recs, **kw)


def produce(broker: RunningBroker, topic: str, partitions: dict[int, bytes], version: int = 9) -> list[Any]:
    """One Produce request; the answer's partitions, by index."""
    t = ProduceRequest.TopicProduceData
    request = ProduceRequest[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            t(
                name=topic,
                partition_data=[
                    t.PartitionProduceData(index=p, records=data) for p, data in partitions.items()
                ],
            )
        ],
    )
    with Wire(broker.port) as wire:
        answer = wire.call(request, ProduceResponse, 1)
    return sorted(answer.responses[0].partition_responses, key=lambda p: p.index)


def high_watermarks(broker: RunningBroker, topic: str) -> list[int]:
    return [s.high_watermark for s in broker.runtime.metadata.partition_states(topic)]


@pytest.mark.parametrize("version", [7, 8, 9])
def test_a_refused_partition_leaves_its_neighbour_written(
    broker: RunningBroker, registry: SchemaRegistry, version: int
) -> None:
    topic = f"wire-{version}"
    create(broker, topic)
    good = registry.register(f"{topic}-value", json.dumps(ORDER)).schema_id
    other = registry.register(f"{topic}-other", json.dumps(KEY)).schema_id
    order = framed(good, avro(ORDER, {"id": 1, "item": "tea"}))
    refused, written = produce(
        broker,
        topic,
        {0: batch([order, order, framed(other, avro(KEY, {"id": 1}))]), 1: batch([order])},
        version,
    )
    message = f"record 2: schema id {other} is not registered under subject {topic}-value"
    assert (refused.error_code, written.error_code, written.base_offset) == (
        errors.INVALID_RECORD,
        errors.NONE,
        0,
    )
    if version >= 8:
        assert refused.error_message == message
        assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [(2, message)]
    assert high_watermarks(broker, topic) == [0, 1]


def test_the_guid_header_form_and_the_key_by_record_name(
    broker: RunningBroker, registry: SchemaRegistry
) -> None:
    topic = "wire-guid"
    create(
        broker,
        topic,
        **{
            "redpanda.key.schema.id.validation": "true",
            "confluent.key.subject.name.strategy": STRATEGIES + "RecordNameStrategy",
        },
    )
    value = registry.register(f"{topic}-value", json.dumps(ORDER))
    key_id = registry.register("shop.Key", json.dumps(KEY), SchemaType.AVRO).schema_id
    header = records.Header("__value_schema_id", b"\x01" + uuid.UUID(value.schema.guid).bytes)
    payload = avro(ORDER, {"id": 2, "item": "jam"})
    key = framed(key_id, avro(KEY, {"id": 2}))
    answers = produce(
        broker, topic, {0: batch([payload], [key], headers={0: [header]}), 1: batch([None], [key])}
    )
    assert [a.error_code for a in answers] == [errors.NONE, errors.NONE]
    # A key framed with the value's id: its record name, shop.Order, is a subject the id is not under.
    (answer,) = produce(
        broker, topic, {0: batch([payload], [framed(value.schema_id, payload)], headers={0: [header]})}
    )
    assert answer.error_message == (
        f"record 0: schema id {value.schema_id} is not registered under subject shop.Order"
    )
    unknown = records.Header("__value_schema_id", b"\x01" + uuid.UUID(int=7).bytes)
    (answer,) = produce(broker, topic, {0: batch([payload], [key], headers={0: [unknown]})})
    assert answer.error_message == f"record 0: schema GUID {uuid.UUID(int=7)} is not registered"


def test_payload_level_decodes_compressed_batches(broker: RunningBroker, registry: SchemaRegistry) -> None:
    topic = "wire-payload"
    create(broker, topic, **{"strata.value.schema.validation.level": "payload"})
    schema_id = registry.register(f"{topic}-value", json.dumps(ORDER)).schema_id
    values = [framed(schema_id, avro(ORDER, {"id": i, "item": "x" * i})) for i in range(40)]
    (answer,) = produce(broker, topic, {0: batch(values, codec=compression.GZIP)})
    assert answer.error_code == errors.NONE
    values[33] = values[33][:-1]  # the last character of "item" missing
    (answer,) = produce(broker, topic, {0: batch(values, codec=compression.ZSTD)})
    assert answer.error_code == errors.INVALID_RECORD
    assert answer.error_message.startswith(
        f"record 33: the value does not decode with schema id {schema_id}: "
    )
    assert high_watermarks(broker, topic) == [40, 0]


def test_a_topic_without_validation_takes_any_value(broker: RunningBroker) -> None:
    broker.runtime.metadata.create_topic("wire-plain", 1, {}, 0)
    (answer,) = produce(broker, "wire-plain", {0: batch([b"no schema", b""])})
    assert (answer.error_code, answer.base_offset) == (errors.NONE, 0)


def test_validation_is_counted(broker: RunningBroker, registry: SchemaRegistry) -> None:
    topic = "wire-counted"
    create(broker, topic)
    schema_id = registry.register(f"{topic}-value", json.dumps(ORDER)).schema_id
    order = framed(schema_id, avro(ORDER, {"id": 1, "item": "tea"}))
    produce(broker, topic, {0: batch([order, None, order])})
    produce(broker, topic, {0: batch([order]), 1: batch([b"bad"])})
    sample = broker.runtime.metrics.registry.get_sample_value

    def counted(result: str) -> float | None:
        return sample("strata_schema_validation_total", {"topic": topic, "field": "value", "result": result})

    assert (counted("valid"), counted("null"), counted("invalid")) == (3.0, 1.0, 1.0)
    # The first request read the id's schema and subjects from the store (off the loop); the second found
    # the verdict that passed.
    for cache, result in (("schema", "miss"), ("subjects", "miss"), ("verdict", "hit")):
        assert (sample("strata_schema_cache_total", {"cache": cache, "result": result}) or 0) >= 1
