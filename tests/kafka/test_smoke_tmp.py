from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def test_confluent_roundtrip(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic("t1", num_partitions=3, replication_factor=1)])
    for f in fs.values():
        f.result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(100):
        p.produce("t1", key=f"k{i}".encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
    c.assign([TopicPartition("t1", p_, 0) for p_ in range(3)])
    got = []
    import time
    deadline = time.time() + 30
    while len(got) < 100 and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append((m.key(), m.value()))
    c.close()
    assert sorted(got) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(100))
