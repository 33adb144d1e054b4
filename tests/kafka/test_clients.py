"""Real Kafka clients against a real agent over TCP: librdkafka (confluent-kafka), kafka-python, aiokafka.

Each produces keyed records, reads them back from the beginning, lists offsets, and administers topics.
Consumer groups have their own tests (test_groups.py); consumers here assign partitions themselves.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration
N = 200


def expected(prefix: str) -> list[tuple[bytes, bytes]]:
    return sorted((f"{prefix}-k{i}".encode(), f"v{i}".encode()) for i in range(N))


def test_confluent_kafka_produce_consume_offsets_admin(broker: RunningBroker) -> None:
    conf = {"bootstrap.servers": broker.bootstrap}
    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic("lrk", num_partitions=3, replication_factor=1)]).values():
        future.result(10)
    with pytest.raises(KafkaException):  # the same name again: TOPIC_ALREADY_EXISTS
        admin.create_topics([NewTopic("lrk", num_partitions=1, replication_factor=1)])["lrk"].result(10)

    producer = Producer({**conf, "acks": "all", "linger.ms": 5})
    before = int(time.time() * 1000)
    delivered: list[tuple[int, int]] = []
    for i in range(N):
        producer.produce(
            "lrk",
            key=f"lrk-k{i}".encode(),
            value=f"v{i}".encode(),
            on_delivery=lambda err, msg: (
                delivered.append((msg.partition(), msg.offset())) if err is None else None
            ),
        )
    assert producer.flush(30) == 0
    assert len(delivered) == N

    consumer = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("lrk", p, 0) for p in range(3)])
        got = []
        deadline = time.time() + 30
        while len(got) < N and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.key(), msg.value()))
        assert sorted(got) == expected("lrk")
        highs = sum(consumer.get_watermark_offsets(TopicPartition("lrk", p), timeout=10)[1] for p in range(3))
        assert highs == N
        by_time = consumer.offsets_for_times([TopicPartition("lrk", p, before) for p in range(3)], timeout=10)
        assert all(tp.offset == 0 for tp in by_time if tp.error is None)
    finally:
        consumer.close()
    for future in admin.delete_topics(["lrk"]).values():
        future.result(10)
    assert "lrk" not in admin.list_topics(timeout=10).topics


def test_kafka_python_produce_consume_offsets_admin(broker: RunningBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([KpNewTopic("kp", 2, 1)])
        assert admin.describe_cluster()["brokers"][0]["port"] == broker.port
    finally:
        admin.close()
    # Idempotence needs InitProducerId, which this agent does not offer yet.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False)
    futures = [producer.send("kp", key=f"kp-k{i}".encode(), value=f"v{i}".encode()) for i in range(N)]
    producer.flush(30)
    metas = [f.get(10) for f in futures]
    producer.close()
    per_partition: dict[int, list[int]] = {}
    for m in metas:
        per_partition.setdefault(m.partition, []).append(m.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    try:
        tps = [KpTopicPartition("kp", 0), KpTopicPartition("kp", 1)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got = sorted((m.key, m.value) for m in consumer)
        assert got == expected("kp")
        assert sum(consumer.end_offsets(tps).values()) == N
        assert set(consumer.beginning_offsets(tps).values()) == {0}
    finally:
        consumer.close()


def test_aiokafka_produce_consume_offsets(broker: RunningBroker) -> None:
    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            sent = [
                await producer.send("aio", key=f"aio-k{i}".encode(), value=f"v{i}".encode()) for i in range(N)
            ]
            metas = await asyncio.gather(*sent)
        finally:
            await producer.stop()
        assert len({(m.partition, m.offset) for m in metas}) == N
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = AioTopicPartition("aio", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[tuple[bytes, bytes]] = []
            deadline = time.monotonic() + 30
            while len(got) < N and time.monotonic() < deadline:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    got += [(m.key, m.value) for m in messages]
            assert sorted(got) == expected("aio")
            assert (await consumer.end_offsets([tp]))[tp] == N
        finally:
            await consumer.stop()

    asyncio.run(main())  # "aio" is auto-created by Metadata, with num.partitions = 1
