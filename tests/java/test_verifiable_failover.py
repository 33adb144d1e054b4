"""Kafka's verifiable producer and consumer (the tools Kafka's own system tests judge brokers with) against
two Strata agents as one cluster, on one bucket (moto S3) and one PostgreSQL, while the agents are killed
with SIGKILL in turn: agent a dies mid-stream, comes back on its port, then agent b dies.

The producer is idempotent with acks=all; every record it prints as acknowledged (``producer_send_success``,
with its partition and offset) must be read by the consumer (``record_data`` with ``--verbose``) at that
partition and offset with the same value, and each partition must be read in offset order. An acknowledged
value stored twice (a retried batch the dead agent had committed but not answered) fails the test too: the
producer's sequence numbers live in the metadata store, so the surviving agent knows the batch."""

from __future__ import annotations

import signal
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.processes import AgentProcess, agent_process, free_port, shared_agent_args
from tests.java import kafka
from tests.java.verifiable import acked_events, events, tool, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

TOPIC = "verifiable"
PARTITIONS = 6
MESSAGES = 6000
THROUGHPUT = 400  # records/s: the run spans both kills

PRODUCER_CONFIG = """\
enable.idempotence=true
acks=all
retries=2147483647
max.in.flight.requests.per.connection=5
linger.ms=5
request.timeout.ms=8000
delivery.timeout.ms=120000
retry.backoff.ms=200
metadata.max.age.ms=2000
"""

CONSUMER_CONFIG = """\
metadata.max.age.ms=2000
heartbeat.interval.ms=500
"""


def test_every_acknowledged_record_is_consumed_in_order_across_sigkills(
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
    bootstrap = f"127.0.0.1:{port_a},127.0.0.1:{port_b}"
    producer_out, consumer_out = tmp_path / "producer.jsonl", tmp_path / "consumer.jsonl"
    (tmp_path / "producer.properties").write_text(PRODUCER_CONFIG)
    (tmp_path / "consumer.properties").write_text(CONSUMER_CONFIG)

    def agent(port: int) -> AgentProcess:
        return agents.enter_context(agent_process([*common, "--kafka-port", str(port)], tmp_path))

    with ExitStack() as agents:
        a, b = agent(port_a), agent(port_b)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 2, 15, "both agents in Metadata")
        new_topic = NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)
        admin.create_topics([new_topic])[TOPIC].result(10)

        with (
            tool(
                kafka.VERIFIABLE_CONSUMER,
                consumer_out,
                "--bootstrap-server",
                bootstrap,
                "--topic",
                TOPIC,
                "--group-id",
                "verifiable",
                "--verbose",
                "--reset-policy",
                "earliest",
                "--session-timeout",
                "6000",
                "--command-config",
                str(tmp_path / "consumer.properties"),
            ) as consumer,
            tool(
                kafka.VERIFIABLE_PRODUCER,
                producer_out,
                "--bootstrap-server",
                bootstrap,
                "--topic",
                TOPIC,
                "--max-messages",
                str(MESSAGES),
                "--throughput",
                str(THROUGHPUT),
                "--command-config",
                str(tmp_path / "producer.properties"),
            ) as producer,
        ):

            def acked_fifths(n: int, what: str) -> None:
                wanted = n * MESSAGES // 5
                wait_for(lambda: len(acked_events(producer_out)) >= wanted, 60, what, producer)

            acked_fifths(1, "a fifth of the records acked")
            a.kill()
            acked_fifths(2, "acks after a died")
            agent(port_a)
            wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 2, 15, "agent a back in Metadata")
            acked_fifths(3, "acks after a came back")
            b.kill()
            producer.wait(180)
            acked = acked_events(producer_out)

            def consumed_all() -> bool:
                seen = events(consumer_out)
                read = {(e["partition"], e["offset"]) for e in seen if e["name"] == "record_data"}
                return all((e["partition"], e["offset"]) in read for e in acked)

            wait_for(consumed_all, 120, "the consumer to read every acknowledged record")
            consumer.send_signal(signal.SIGTERM)
            consumer.wait(60)

    producer_events = events(producer_out)
    errors = [e for e in producer_events if e.get("name") == "producer_send_error"]
    assert producer.returncode == 0, (tmp_path / "producer.err").read_text()[-3000:]
    assert not errors, errors[:5]
    assert len(acked) == MESSAGES

    # The producer's acks: each partition's offsets rise in the order they were acknowledged.
    acked_by_partition: dict[int, list[int]] = defaultdict(list)
    for e in acked:
        acked_by_partition[e["partition"]].append(e["offset"])
    for partition, offsets in acked_by_partition.items():
        assert offsets == sorted(set(offsets)), f"partition {partition} acked out of order"

    # The consumer: what it read at each offset, and the order it first read each partition's offsets in.
    read_value: dict[tuple[int, int], str] = {}
    first_reads: dict[int, list[int]] = defaultdict(list)
    for e in events(consumer_out):
        if e.get("name") != "record_data":
            continue
        where = (e["partition"], e["offset"])
        if where not in read_value:
            first_reads[e["partition"]].append(e["offset"])
        read_value.setdefault(where, e["value"])
    for e in acked:
        assert read_value.get((e["partition"], e["offset"])) == e["value"], e
    for partition, offsets in first_reads.items():
        assert offsets == sorted(offsets), f"partition {partition} read out of order"
    # No acknowledged value stored twice: a retry the dead agent had committed was deduplicated.
    values = [v for v in read_value.values()]
    assert len(values) == len(set(values)), "a value was stored at two offsets"
