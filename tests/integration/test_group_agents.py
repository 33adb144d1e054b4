"""Members of one consumer group on different agents: two `strata serve` processes on one bucket (moto S3) and
one PostgreSQL, each the only broker its client knows (single-broker mode), so each member's coordinator is a
different agent. The group's state lives in the metadata store, so the two coordinators run one group: both
members join one generation, the partitions are split between them, a member leaving hands its partitions to
the other, and every record is consumed exactly once across the clean handover."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.processes import agent_process, free_port

pytestmark = pytest.mark.integration

PARTITIONS = 4
RECORDS = 200


class Member:
    """A librdkafka group member that records its assignments and commits after each record."""

    def __init__(self, bootstrap: str) -> None:
        self.assigned: set[int] = set()
        self.seen: list[tuple[int, int]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "across",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            }
        )
        self.consumer.subscribe(["across"], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = {tp.partition for tp in partitions}

    def _revoke(self, _consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        self.assigned = set()

    def poll(self) -> None:
        msg = self.consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            return
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None
        assert offset is not None
        assert partition in self.assigned, "a record from a partition this member does not own"
        self.seen.append((partition, offset))
        self.consumer.commit(offsets=[TopicPartition("across", partition, offset + 1)], asynchronous=False)


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        producer.produce("across", value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


@pytest.mark.postgres
def test_members_of_one_group_on_different_agents(
    tmp_path: Path, moto_server: str, s3_bucket: str, postgres_schema_url: str
) -> None:
    common = ["--role", "agent", "--bucket", f"s3://{s3_bucket}", "--s3-endpoint", moto_server]
    common += ["--metadata", postgres_schema_url, "--flush-interval-ms", "50"]
    common += ["--data-dir", str(tmp_path / "unused"), "--group-initial-rebalance-delay-ms", "0"]
    common += ["--group-min-session-timeout-ms", "1000"]
    port_a, port_b = free_port(), free_port()
    with (
        agent_process([*common, "--kafka-port", str(port_a)], tmp_path),
        agent_process([*common, "--kafka-port", str(port_b)], tmp_path),
    ):
        a, b = f"127.0.0.1:{port_a}", f"127.0.0.1:{port_b}"
        admin = AdminClient({"bootstrap.servers": a})
        admin.create_topics([NewTopic("across", num_partitions=PARTITIONS)])["across"].result(10)
        first, second = Member(a), Member(b)
        try:
            # Both join one generation through different coordinators, and split the partitions.
            deadline = time.time() + 45
            while time.time() < deadline:
                first.poll()
                second.poll()
                split = first.assigned | second.assigned == set(range(PARTITIONS))
                if split and first.assigned and second.assigned and not first.assigned & second.assigned:
                    break
            assert first.assigned
            assert second.assigned
            assert not first.assigned & second.assigned
            assert first.assigned | second.assigned == set(range(PARTITIONS))
            _produce(b, 0, RECORDS // 2)  # each member reads its own partitions
            deadline = time.time() + 45
            while time.time() < deadline and len(first.seen) + len(second.seen) < RECORDS // 2:
                first.poll()
                second.poll()
            assert {p for p, _ in first.seen} == first.assigned
            assert {p for p, _ in second.seen} == second.assigned
            # A clean leave at agent b: agent a's member takes every partition and reads on from the
            # committed offsets.
            second.consumer.close()
            _produce(a, RECORDS // 2, RECORDS // 2)
            deadline = time.time() + 45
            while time.time() < deadline and len(first.seen) + len(second.seen) < RECORDS:
                first.poll()
            assert first.assigned == set(range(PARTITIONS))
            for _ in range(20):  # nothing more arrives: no record is read twice
                first.poll()
        finally:
            first.consumer.close()
        consumed = first.seen + second.seen
        assert len(consumed) == RECORDS, "a record was consumed twice or skipped"
        assert sorted(consumed) == sorted(
            (p, o) for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS)
        )
