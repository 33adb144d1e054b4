"""Large frames' buffers are used again (broker/frame_pool.py) and no record is changed by it: a real
client's requests of about 1 MiB, many more than the pool holds, read back byte for byte."""

from __future__ import annotations

import hashlib
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration

PARTITIONS = 3
RECORDS = 1200  # 8 KiB each: ~9.4 MiB, in requests of up to 1 MiB per partition


def value(i: int) -> bytes:
    """8 KiB that differ from every other record's at every offset."""
    seed = hashlib.sha256(str(i).encode()).digest()
    return (seed * 256)[: 8 * 1024]


def test_reused_frame_buffers_change_no_record(broker: RunningBroker) -> None:
    conf = {"bootstrap.servers": broker.bootstrap}
    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic("reuse", num_partitions=PARTITIONS)]).values():
        future.result(10)
    producer = Producer(
        {**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 50, "batch.size": 1_000_000}
    )
    for i in range(RECORDS):
        producer.produce("reuse", key=str(i).encode(), value=value(i), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    assert broker.runtime.kafka is not None
    assert broker.runtime.kafka.frames.reused > 0  # else this test shows nothing about reuse

    consumer = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("reuse", p, 0) for p in range(PARTITIONS)])
        got: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.time() + 60
        while sum(map(len, got.values())) < RECORDS and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got[msg.partition()].append((msg.key(), msg.value()))
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        sent = [(str(i).encode(), value(i)) for i in range(p, RECORDS, PARTITIONS)]
        assert got[p] == sent
