"""Real Kafka clients producing with every codec: read back over Kafka by the same client, decoded by a
second agent's HTTP fetch (the record decoder every other reader uses), and compacted by the real worker.

Two agents share one bucket and one metadata store, as Strata's agents do: one serves Kafka, one HTTP.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from planner.round import CompactionRound
from storage.records import compression
from tests.fixtures.kafka import RunningBroker, run_broker
from tests.fixtures.server import RunningServer, local_settings, run_server
from tests.kafka.compressed import stored_batches, stored_codecs

pytestmark = pytest.mark.integration

N = 120
PARTITIONS = 2
CODECS = ["gzip", "snappy", "lz4", "zstd"]
# (key, value, headers) as every reader must return them; the value compresses well on purpose.
Row = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningBroker, RunningServer]]:
    settings = local_settings(tmp_path_factory.mktemp("compressed"))
    with run_broker(settings) as broker, run_server(settings) as http:
        yield broker, http


def rows(tag: str) -> list[Row]:
    return [
        (f"{tag}-k{i}".encode(), f"{tag} value {i} ".encode() * (1 + i % 9), (("h", f"{i}".encode()),))
        for i in range(N)
    ]


def create(broker: RunningBroker, topic: str, partitions: int = PARTITIONS, **configs: str) -> None:
    broker.runtime.metadata.create_topic(topic, partitions, configs, 0)


def over_http(http: RunningServer, topic: str, partitions: int = PARTITIONS) -> list[Row]:
    out: list[Row] = []
    for p in range(partitions):
        for rec in http.read_all(topic, p):
            headers = tuple((h["name"], h["value"].encode()) for h in rec["headers"])
            value = None if rec["value"] is None else rec["value"].encode()
            out.append((rec["key"].encode(), value, headers))
    return out


# --- the three clients: produce with a codec, consume from the beginning ---------------------------------


def confluent_produce(bootstrap: str, topic: str, codec: str, data: list[Row]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50, "acks": "all"}
    )
    errors: list[Any] = []
    for i, (key, value, headers) in enumerate(data):
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=list(headers),
            partition=i % PARTITIONS,
            on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
        )
    assert producer.flush(30) == 0
    assert errors == []


def confluent_consume(bootstrap: str, topic: str, expected: int, partitions: int = PARTITIONS) -> list[Row]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    got: list[Row] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value(), tuple(msg.headers() or ())))
    finally:
        consumer.close()
    return got


def kafka_python_produce(bootstrap: str, topic: str, codec: str, data: list[Row]) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=codec,
        linger_ms=50,
        enable_idempotence=False,  # idempotent producers have their own tests (test_idempotence.py)
    )
    try:
        futures = [
            producer.send(topic, key=key, value=value, headers=list(headers), partition=i % PARTITIONS)
            for i, (key, value, headers) in enumerate(data)
        ]
        producer.flush(30)
        for future in futures:
            future.get(10)
    finally:
        producer.close()


def kafka_python_consume(bootstrap: str, topic: str, expected: int) -> list[Row]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        return [(m.key, m.value, tuple(m.headers)) for m in consumer]
    finally:
        consumer.close()


def aiokafka_produce(bootstrap: str, topic: str, codec: str, data: list[Row]) -> None:
    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", compression_type=codec, linger_ms=50
        )
        await producer.start()
        try:
            sent = [
                await producer.send(
                    topic, key=key, value=value, headers=list(headers), partition=i % PARTITIONS
                )
                for i, (key, value, headers) in enumerate(data)
            ]
            await asyncio.gather(*sent)
        finally:
            await producer.stop()

    asyncio.run(main())


def aiokafka_consume(bootstrap: str, topic: str, expected: int) -> list[Row]:
    async def main() -> list[Row]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        got: list[Row] = []
        try:
            tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + 30
            while len(got) < expected and time.monotonic() < deadline:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    got += [(m.key, m.value, tuple(m.headers)) for m in messages]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(main())


CLIENTS = {
    "confluent": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
}


# Every client with every codec. librdkafka sends lz4 only to a broker that advertises FindCoordinator (its
# "LZ4" feature means "broker >= 0.8.2", detected by that key: src/rdkafka_feature.c); the door does.
CASES = [(client, codec) for client in CLIENTS for codec in CODECS]


@pytest.mark.parametrize(("client", "codec"), CASES)
def test_client_produces_compressed_and_every_door_reads_it(
    doors: tuple[RunningBroker, RunningServer], client: str, codec: str
) -> None:
    broker, http = doors
    topic = f"{client}-{codec}"
    create(broker, topic)
    produce, consume = CLIENTS[client]
    data = rows(topic)
    produce(broker.bootstrap, topic, codec, data)

    # Stored as the client sent it: every batch carries the client's codec.
    codecs = stored_codecs(broker.runtime, topic, PARTITIONS)
    assert codecs
    assert set(codecs) == {compression.CODEC_IDS[codec]}
    assert sorted(consume(broker.bootstrap, topic, N)) == sorted(data)  # over Kafka: the stored bytes
    assert sorted(over_http(http, topic)) == sorted(data)  # decoded by the agent's record decoder


# --- compaction of compressed batches ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_compaction_keeps_the_codec_of_retained_batches(
    doors: tuple[RunningBroker, RunningServer], codec: str
) -> None:
    broker, http = doors
    topic = f"compact-{codec}"
    create(broker, topic, 1, **{"cleanup.policy": "compact"})
    first: list[Row] = [(f"k{i}".encode(), f"first {i} ".encode() * 8, ()) for i in range(40)]
    second: list[Row] = [
        (f"k{i}".encode(), None if i == 5 else f"second {i} ".encode() * 8, ()) for i in range(20)
    ]
    # kafka-python: its snappy is the xerial framing (librdkafka's is raw), which compaction writes again.
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=100, enable_idempotence=False
    )
    try:
        for data in (first, second):  # one flush each: two batches, two chunks
            for key, value, _ in data:
                producer.send(topic, key=key, value=value, partition=0)
            producer.flush(30)
    finally:
        producer.close()
    before = stored_batches(broker.runtime, topic, 0)
    assert [h.records_count for h, _ in before] == [40, 20]

    rt = broker.runtime
    compactor = CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(7), owner="test-worker")
    for _ in range(10):
        if not compactor.run_once(topic, True).jobs:
            break
    else:
        raise AssertionError("compaction did not settle")

    after = stored_batches(rt, topic, 0)
    assert {h.attributes & 0x07 for h, _ in after} == {compression.CODEC_IDS[codec]}
    # The first batch lost k0..k19 and was written again (filtered, same codec); the second kept all of
    # its records, the tombstone with a delete horizon.
    assert [h.records_count for h, _ in after] == [20, 20]
    assert after[0][0].last_offset_delta == 39
    assert after[1][0].delete_horizon_ms is not None
    expected = first[20:] + second  # in offset order: 20..39, then 40..59
    assert over_http(http, topic, 1) == expected
    assert sorted(confluent_consume(broker.bootstrap, topic, len(expected), 1)) == sorted(expected)
