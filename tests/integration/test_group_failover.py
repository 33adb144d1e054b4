"""A consumer group member survives a SIGKILL of the agent coordinating it: two `strata serve` processes as
one Kafka cluster on one bucket (moto S3) and one PostgreSQL; a librdkafka consumer in a group commits, its
coordinator agent is killed with SIGKILL, and the member finds the other agent, rejoins, and resumes from its
committed offsets. No committed offset is lost: the group state and the offsets live in the metadata store,
not in the dead agent."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from storage.metadata import open_metadata_store
from tests.fixtures.processes import agent_process, free_port, shared_agent_args

pytestmark = pytest.mark.integration

RECORDS = 400


def _brokers(bootstrap: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {b.id: b.port for b in md.brokers.values()}


@pytest.mark.postgres
def test_sigkill_of_the_coordinating_agent_loses_no_committed_offset(
    tmp_path: Path, moto_server: str, s3_bucket: str, postgres_schema_url: str
) -> None:
    common = [
        *shared_agent_args(tmp_path, moto_server, s3_bucket, postgres_schema_url),
        "--kafka-cluster",
        "--group-initial-rebalance-delay-ms",
        "0",
        "--group-min-session-timeout-ms",
        "1000",
    ]
    port_a, port_b = free_port(), free_port()
    with (
        agent_process([*common, "--kafka-port", str(port_a)], tmp_path) as a,
        agent_process([*common, "--kafka-port", str(port_b)], tmp_path) as _b,
    ):
        bootstrap = f"127.0.0.1:{port_a},127.0.0.1:{port_b}"
        # a learns of b at its next heartbeat; a client bootstrapped at a must hear of b before a dies.
        deadline = time.time() + 10
        while time.time() < deadline and len(_brokers(f"127.0.0.1:{port_a}")) < 2:
            time.sleep(0.2)
        assert len(_brokers(f"127.0.0.1:{port_a}")) == 2
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port_a}"})
        admin.create_topics([NewTopic("fo", num_partitions=4, replication_factor=1)])["fo"].result(10)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce("fo", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 4)
        assert producer.flush(30) == 0

        # The consumer bootstraps at agent a only, so a is the agent it asks for its coordinator.
        consumer = Consumer(
            {
                "bootstrap.servers": f"127.0.0.1:{port_a}",
                "group.id": "failover",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        try:
            consumer.subscribe(["fo"])
            seen: set[bytes] = set()
            deadline = time.time() + 30
            while len(seen) < RECORDS // 2 and time.time() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    seen.add(msg.value())
            assert len(seen) >= RECORDS // 2
            committed_before = {
                tp.partition: tp.offset for tp in consumer.commit(asynchronous=False) or [] if tp.offset >= 0
            }
            assert sum(committed_before.values()) >= RECORDS // 2
            assert len(consumer.list_topics(timeout=10).brokers) == 2  # the member knows agent b too

            a.kill()  # SIGKILL: no deregistration, no cleanup

            # The member finds agent b (Metadata lists it), rejoins there and resumes from its committed
            # offsets; commits fail with _WAIT_COORD until librdkafka has found the new coordinator, and
            # with _NO_OFFSET right after the rejoin, before it has read anything again.
            store = open_metadata_store(postgres_schema_url)
            try:
                deadline = time.time() + 60
                last_commit = 0.0
                while time.time() < deadline:
                    msg = consumer.poll(0.2)
                    if msg is not None and msg.error() is None:
                        seen.add(msg.value())
                    if time.time() - last_commit > 1:
                        last_commit = time.time()
                        try:
                            consumer.commit(asynchronous=False)
                        except KafkaException as exc:
                            if exc.args[0].code() not in (KafkaError._WAIT_COORD, KafkaError._NO_OFFSET):
                                raise
                        if sum(o.offset for o in store.group_offsets("failover")) == RECORDS:
                            break
                after = {o.partition: o.offset for o in store.group_offsets("failover")}
            finally:
                store.close()
        finally:
            consumer.close()
        assert len(seen) == RECORDS, (
            f"read {len(seen)} of {RECORDS} after the coordinator died; committed {after}"
        )
        # Nothing committed before the kill went backwards, and everything read is now committed.
        assert all(after[p] >= offset for p, offset in committed_before.items())
        assert sum(after.values()) == RECORDS
