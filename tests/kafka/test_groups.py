"""Consumer groups with real Kafka clients against a real agent: subscribe, get partitions assigned, commit,
rebalance when a member comes or goes, and resume from the committed offsets.

The group state lives in the metadata store (agents/group_coordinator.py); these tests drive it through
librdkafka (confluent-kafka), kafka-python and aiokafka, whose consumers run the classic group protocol
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch) with their own assignors.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient

from tests.fixtures.kafka import RunningBroker

pytestmark = pytest.mark.integration

# Short group timings so that rebalances take seconds, not the defaults' tens of seconds.
FAST = {"group_initial_rebalance_delay_ms": 100, "group_min_session_timeout_ms": 1000}


@pytest.fixture
def gbroker(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory(**FAST) as running:
        yield running


def _topic(broker: RunningBroker, name: str, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)]
    ).values():
        future.result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(name, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def _poll_until(consumer: Consumer, want: int, seconds: float = 30) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.time() + seconds
    while len(got) < want and time.time() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    return got


def test_confluent_group_consumes_commits_and_resumes(gbroker: RunningBroker) -> None:
    _topic(gbroker, "g1", 3, 300)
    conf = {
        "bootstrap.servers": gbroker.bootstrap,
        "group.id": "grp-a",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
    }
    first = Consumer(conf)
    first.subscribe(["g1"])
    try:
        got = _poll_until(first, 200)
        assert len(got) == 200
        first.commit(asynchronous=False)
        committed = first.committed([TopicPartition("g1", p) for p in range(3)], timeout=10)
        # A partition not read from has no position, so no commit: -1001 (OFFSET_INVALID).
        assert sum(tp.offset for tp in committed if tp.offset >= 0) == 200
    finally:
        first.close()  # LeaveGroup
    # The same group resumes after the committed offsets: the 100 it did not read, nothing again.
    second = Consumer(conf)
    second.subscribe(["g1"])
    try:
        rest = _poll_until(second, 100)
        assert len(rest) == 100
        assert not set(rest) & set(got)
    finally:
        second.close()
    # The position is the HTTP API's group offsets too (one table for both front doors).
    offsets = gbroker.runtime.metadata.group_offsets("grp-a")
    assert sum(o.offset for o in offsets) <= 300


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_two_confluent_members_split_the_partitions_and_rebalance_when_one_leaves(
    gbroker: RunningBroker, assignor: str
) -> None:
    """Eager and cooperative assignors alike: the assignment is the clients' business."""
    _topic(gbroker, "g2", 4, 0)
    conf = {
        "bootstrap.servers": gbroker.bootstrap,
        "group.id": "grp-b",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "partition.assignment.strategy": assignor,
    }
    a, b = Consumer(conf), Consumer(conf)
    a.subscribe(["g2"])
    b.subscribe(["g2"])
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            a.poll(0.1)
            b.poll(0.1)
            sa, sb = {tp.partition for tp in a.assignment()}, {tp.partition for tp in b.assignment()}
            if sa and sb and sa | sb == {0, 1, 2, 3} and not sa & sb:
                break
        else:
            pytest.fail(f"no split assignment: {a.assignment()} / {b.assignment()}")
        b.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            a.poll(0.1)
            if {tp.partition for tp in a.assignment()} == {0, 1, 2, 3}:
                break
        else:
            pytest.fail(f"the remaining member did not take every partition: {a.assignment()}")
    finally:
        a.close()


def test_kafka_python_group_commit_is_fetched_by_another_client(gbroker: RunningBroker) -> None:
    _topic(gbroker, "g3", 2, 50)
    consumer = KafkaConsumer(
        "g3",
        bootstrap_servers=gbroker.bootstrap,
        group_id="grp-c",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 50:
                break
        assert len(got) == 50
        consumer.commit()
        assert sum(consumer.committed(KpTopicPartition("g3", p)) or 0 for p in range(2)) == 50
    finally:
        consumer.close()
    # librdkafka reads kafka-python's commit.
    other = Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": "grp-c"})
    try:
        committed = other.committed([TopicPartition("g3", p) for p in range(2)], timeout=10)
        assert sum(tp.offset for tp in committed) == 50
    finally:
        other.close()


def test_aiokafka_group_consumes(gbroker: RunningBroker) -> None:
    _topic(gbroker, "g4", 2, 40)

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            "g4",
            bootstrap_servers=gbroker.bootstrap,
            group_id="grp-d",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(30):
                async for msg in consumer:
                    assert msg.value is not None
                    got.append(msg.value)
                    if len(got) == 40:
                        break
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    assert len(asyncio.run(run())) == 40
    assert sum(o.offset for o in gbroker.runtime.metadata.group_offsets("grp-d")) == 40


def test_admin_clients_list_describe_and_delete_groups(gbroker: RunningBroker) -> None:
    _topic(gbroker, "g5", 2, 20)
    conf = {"bootstrap.servers": gbroker.bootstrap, "group.id": "grp-e", "auto.offset.reset": "earliest"}
    consumer = Consumer({**conf, "enable.auto.commit": False, "session.timeout.ms": 6000})
    consumer.subscribe(["g5"])
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    try:
        assert len(_poll_until(consumer, 20)) == 20
        consumer.commit(asynchronous=False)
        listed = admin.list_consumer_groups().result(10)
        assert "grp-e" in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups(["grp-e"])["grp-e"].result(10)
        assert str(described.state).endswith("STABLE")
        assert len(described.members) == 1
        assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == {0, 1}
        with pytest.raises(KafkaException, match=r"NON_EMPTY_GROUP|not empty"):
            admin.delete_consumer_groups(["grp-e"])["grp-e"].result(10)
    finally:
        consumer.close()
    admin.delete_consumer_groups(["grp-e"])["grp-e"].result(10)
    assert gbroker.runtime.metadata.group_offsets("grp-e") == []
    listed = admin.list_consumer_groups().result(10)
    assert "grp-e" not in {g.group_id for g in listed.valid}


def test_offset_delete_keeps_subscribed_topics_and_deletes_the_rest(gbroker: RunningBroker) -> None:
    _topic(gbroker, "g6", 1, 10)
    _topic(gbroker, "g7", 1, 10)
    conf = {"bootstrap.servers": gbroker.bootstrap, "group.id": "grp-f", "auto.offset.reset": "earliest"}
    consumer = Consumer({**conf, "enable.auto.commit": False, "session.timeout.ms": 6000})
    consumer.subscribe(["g6"])
    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    try:
        assert len(_poll_until(consumer, 10)) == 10
        consumer.commit(asynchronous=False)
        # An offset of a topic the member does not subscribe to, committed by an admin tool.
        consumer.commit(offsets=[TopicPartition("g7", 0, 4)], asynchronous=False)
        assert {(o.topic, o.offset) for o in gbroker.runtime.metadata.group_offsets("grp-f")} == {
            ("g6", 10),
            ("g7", 4),
        }
        result = admin.delete_group_offsets("grp-f", [KpTopicPartition("g6", 0), KpTopicPartition("g7", 0)])
        codes = {tp.topic: err.errno for tp, err in result.items()}
        assert codes == {"g6": 86, "g7": 0}  # GROUP_SUBSCRIBED_TO_TOPIC for the subscribed topic
        assert {o.topic for o in gbroker.runtime.metadata.group_offsets("grp-f")} == {"g6"}
    finally:
        consumer.close()
        admin.close()
