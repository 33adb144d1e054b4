"""Several agents as one Kafka cluster (--kafka-cluster, broker/cluster.py): two real agents sharing one
bucket and one metadata store, real clients.

- Metadata from either agent lists both, each at its own address, with distinct node ids, and the
  partitions' preferred leaders spread over them by rendezvous hashing;
- a producer bootstrapped at one agent writes to partitions led by both, and a consumer reads every
  record back through the other;
- an agent that stops leaves the Metadata answer, and clients carry on with the one left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cluster import rendezvous_leader
from storage.metadata import open_metadata_store

pytestmark = pytest.mark.integration


def _brokers(bootstrap: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {b.id: b.port for b in md.brokers.values()}


def test_two_agents_are_one_cluster(kafka_factory: Callable[..., Any]) -> None:
    with kafka_factory(kafka_cluster=True) as a, kafka_factory(kafka_cluster=True) as b:
        deadline = time.time() + 10
        while time.time() < deadline and len(_brokers(a.bootstrap)) < 2:
            time.sleep(0.2)  # a learns of b at its next heartbeat (1 s)
        seen_a, seen_b = _brokers(a.bootstrap), _brokers(b.bootstrap)
        assert seen_a == seen_b
        assert sorted(seen_a.values()) == sorted([a.port, b.port])

        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        admin.create_topics([NewTopic("spread", num_partitions=12, replication_factor=1)])["spread"].result(
            10
        )
        leaders = {
            p.id: p.leader
            for p in admin.list_topics("spread", timeout=10).topics["spread"].partitions.values()
        }
        assert set(leaders.values()) == set(seen_a)  # both agents lead some partitions
        assert leaders == {p: rendezvous_leader("spread", p, sorted(seen_a)) for p in range(12)}

        producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
        for i in range(240):
            producer.produce("spread", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 12)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cluster-g"})
        try:
            consumer.assign([TopicPartition("spread", p, 0) for p in range(12)])
            got: set[bytes] = set()
            deadline = time.time() + 30
            while len(got) < 240 and time.time() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    got.add(msg.value())
            assert len(got) == 240
        finally:
            consumer.close()
    # (b closed first, deregistering; then a.)


def test_a_stopped_agent_leaves_the_view(kafka_factory: Callable[..., Any]) -> None:
    with kafka_factory(kafka_cluster=True) as a:
        with kafka_factory(kafka_cluster=True) as b:
            deadline = time.time() + 10
            while time.time() < deadline and len(_brokers(a.bootstrap)) < 2:
                time.sleep(0.2)
            assert len(_brokers(a.bootstrap)) == 2
            gone = b.port
        deadline = time.time() + 10
        while time.time() < deadline and gone in _brokers(a.bootstrap).values():
            time.sleep(0.2)
        assert list(_brokers(a.bootstrap).values()) == [a.port]
        producer = Producer({"bootstrap.servers": a.bootstrap})
        producer.produce("after", value=b"x")
        assert producer.flush(30) == 0


def test_registration_assigns_free_node_ids_and_forgets_dead_agents(metadata_url: str) -> None:
    store = open_metadata_store(metadata_url)
    try:
        assert store.register_agent("a", "h", 1, 0, now_ms=1000, timeout_ms=5000) == 0
        assert store.register_agent("b", "h", 2, 0, now_ms=1000, timeout_ms=5000) == 1  # 0 is taken
        assert store.register_agent("a", "h", 1, 7, now_ms=2000, timeout_ms=5000) == 0  # keeps its id
        assert [x.node_id for x in store.live_agents(now_ms=6500, timeout_ms=5000)] == [0]  # b is dead
        assert store.register_agent("c", "h", 3, 1, now_ms=6500, timeout_ms=5000) == 1  # b's id is free
        store.deregister_agent("a")
        assert [x.node_id for x in store.live_agents(now_ms=6500, timeout_ms=5000)] == [1]
    finally:
        store.close()


def test_a_restart_at_the_same_address_takes_the_earlier_incarnations_place(metadata_url: str) -> None:
    store = open_metadata_store(metadata_url)
    try:
        assert store.register_agent("a", "h", 1, 0, now_ms=1000, timeout_ms=5000) == 0
        assert store.register_agent("b", "h", 2, 0, now_ms=1000, timeout_ms=5000) == 1
        # a is SIGKILLed (no deregistration) and comes back at once at its address: it is node 0 again,
        # and the dead incarnation's row is gone, so no two brokers share an address.
        assert store.register_agent("a2", "h", 1, 0, now_ms=2000, timeout_ms=5000) == 0
        # b likewise, though id 0 is what it asks for: its address's id is 1.
        assert store.register_agent("b2", "h", 2, 0, now_ms=2500, timeout_ms=5000) == 1
        live = store.live_agents(now_ms=3000, timeout_ms=5000)
        assert [(x.node_id, x.port) for x in live] == [(0, 1), (1, 2)]
        # A new address gets a free id, never one of a live agent.
        assert store.register_agent("c", "h", 3, 1, now_ms=3000, timeout_ms=5000) == 2
    finally:
        store.close()


def test_rendezvous_moves_only_the_partitions_of_a_node_that_leaves() -> None:
    three = {p: rendezvous_leader("t", p, [0, 1, 2]) for p in range(300)}
    two = {p: rendezvous_leader("t", p, [0, 2]) for p in range(300)}
    assert {n: list(three.values()).count(n) for n in (0, 1, 2)} == pytest.approx(
        {0: 100, 1: 100, 2: 100}, abs=30
    )
    assert all(two[p] == three[p] for p in range(300) if three[p] != 1)
