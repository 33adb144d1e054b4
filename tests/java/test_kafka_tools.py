"""Kafka's command-line tools against Strata, run as an operator runs them (by class name, the jars of
``make kafka-java``), their output compared with the same commands against the reference broker as far as
it depends on the broker. What differs by design is normalised first, and listed in docs/kafka-clients.md
("Where Strata differs from Kafka's broker"): topic ids, the node id, the controller's replica-set
bookkeeping (Elr, the min.insync.replicas a KRaft controller writes on every topic), and config synonyms."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fixtures.kafka import RunningBroker
from tests.fixtures.reference_broker import ReferenceBroker
from tests.java import clients, kafka
from tests.java.clients import scenario

pytestmark = pytest.mark.integration


@pytest.fixture
def strata(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory(num_partitions=3) as running:
        yield running


def _normalised(text: str) -> str:
    text = re.sub(r"TopicId: \S+", "TopicId: <id>", text)
    text = re.sub(r"(Leader|Replicas|Isr): \d+", r"\1: <node>", text)
    text = re.sub(r"\tElr: [^\t]*\tLastKnownElr: [^\n]*", "", text)
    text = re.sub(r"min\.insync\.replicas=1,?", "", text)
    text = re.sub(r" synonyms=\{[^}]*\}", "", text)
    return text.strip()


def _both(strata: RunningBroker, reference: ReferenceBroker, tool: str, *args: str) -> tuple[Any, Any]:
    answers = []
    for bootstrap in (strata.bootstrap, reference.bootstrap):
        done = clients.tool(tool, "--bootstrap-server", bootstrap, *args)
        answers.append((done.returncode, _normalised(done.stdout), done.stderr.strip()))
    return answers[0], answers[1]


def test_kafka_topics_and_kafka_configs(strata: RunningBroker, reference_broker: ReferenceBroker) -> None:
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    steps = [
        (kafka.TOPICS, "--create", "--topic", topic, "--partitions", "2", "--config", "retention.ms=100000"),
        (kafka.TOPICS, "--create", "--topic", topic, "--partitions", "2"),
        (kafka.TOPICS, "--list"),
        (kafka.TOPICS, "--describe", "--topic", topic),
        (kafka.TOPICS, "--alter", "--topic", topic, "--partitions", "4"),
        (kafka.TOPICS, "--alter", "--topic", topic, "--partitions", "3"),
        (kafka.TOPICS, "--describe", "--topic", topic),
        (kafka.CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", topic),
        (
            kafka.CONFIGS,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
            "--add-config",
            "cleanup.policy=compact",
        ),
        (
            kafka.CONFIGS,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            topic,
            "--delete-config",
            "retention.ms",
        ),
        (kafka.CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", topic),
        (kafka.TOPICS, "--delete", "--topic", topic),
        (kafka.TOPICS, "--describe", "--topic", topic),
    ]
    for step in steps:
        mine, reference = _both(strata, reference_broker, *step)
        if step[1] == "--list":  # the reference broker holds other tests' topics too
            assert topic in mine[1].split()
            assert topic in reference[1].split()
            continue
        assert mine[:2] == reference[:2], (step, mine, reference)


def test_kafka_consumer_groups_describe_and_reset(
    strata: RunningBroker, reference_broker: ReferenceBroker
) -> None:
    topic, group = f"cg-{uuid.uuid4().hex[:8]}", f"cg-{uuid.uuid4().hex[:8]}"
    for bootstrap in (strata.bootstrap, reference_broker.bootstrap):
        scenario("admin-create", bootstrap, topic=topic, partitions=2)
        scenario("produce", bootstrap, topic=topic, count=20, base_ts=1_700_000_000_000)
        scenario("consume", bootstrap, topic=topic, expect=20, mode="subscribe", group=group)
    describe = ("--describe", "--group", group, "--offsets")
    mine, reference = _both(strata, reference_broker, kafka.CONSUMER_GROUPS, *describe)
    assert mine[0] == reference[0] == 0
    assert _group_table(mine[1]) == _group_table(reference[1])
    for reset in (("--to-earliest",), ("--to-offset", "3"), ("--shift-by", "-2"), ("--to-latest",)):
        args = ("--reset-offsets", "--group", group, "--topic", topic, *reset, "--execute")
        mine, reference = _both(strata, reference_broker, kafka.CONSUMER_GROUPS, *args)
        assert (mine[0], _group_table(mine[1])) == (reference[0], _group_table(reference[1])), reset
    mine, reference = _both(strata, reference_broker, kafka.CONSUMER_GROUPS, "--delete", "--group", group)
    assert mine[:2] == reference[:2]


def _group_table(text: str) -> list[list[str]]:
    """The rows of kafka-consumer-groups' tables, columns split, the consumer and host columns (ids a
    broker makes up) left out."""
    rows = []
    for line in text.splitlines():
        cells = line.split()
        if cells and not cells[0].startswith("Consumer"):
            rows.append([c for c in cells if not c.startswith(("consumer-", "/", "strata-java"))])
    return sorted(rows)


def test_kafka_delete_records(
    strata: RunningBroker, reference_broker: ReferenceBroker, tmp_path: Any
) -> None:
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    plan = tmp_path / "delete.json"
    plan.write_text(f'{{"partitions":[{{"topic":"{topic}","partition":0,"offset":4}}],"version":1}}')
    for bootstrap in (strata.bootstrap, reference_broker.bootstrap):
        scenario("admin-create", bootstrap, topic=topic, partitions=1)
        scenario("produce", bootstrap, topic=topic, count=10, partition=0, base_ts=1_700_000_000_000)
    mine, reference = _both(strata, reference_broker, kafka.DELETE_RECORDS, "--offset-json-file", str(plan))
    assert mine[:2] == reference[:2]
    assert "low_watermark: 4" in mine[1]
    for bootstrap in (strata.bootstrap, reference_broker.bootstrap):
        times = scenario("times", bootstrap, topic=topic, partition=0, timestamp=0)
        assert (times["beginning"], times["end"]) == (4, 10)


def test_kafka_acls(strata: RunningBroker, reference_broker: ReferenceBroker) -> None:
    topic, group = f"acl-{uuid.uuid4().hex[:8]}", f"acl-{uuid.uuid4().hex[:8]}"
    grant = ("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    steps = [
        grant,
        ("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group),
        (
            "--add",
            "--deny-principal",
            "User:mallory",
            "--allow-host",
            "*",
            "--operation",
            "All",
            "--topic",
            topic,
        ),
        ("--add", "--allow-principal", "User:bob", "--producer", "--topic", f"{topic}-out"),
        ("--list", "--topic", topic),
        ("--list", "--group", group),
        ("--list", "--principal", "User:alice"),
        ("--list", "--topic", f"{topic}-out"),
        ("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic),
        ("--list", "--topic", topic),
        ("--add", "--allow-principal", "User:alice", "--operation", "Fly", "--topic", topic),
    ]
    for step in steps:
        mine, reference = _both(strata, reference_broker, kafka.ACLS, *step)
        assert (mine[0], _acl_lines(mine[1])) == (reference[0], _acl_lines(reference[1])), (
            step,
            mine,
            reference,
        )


def _acl_lines(text: str) -> list[str]:
    """The tool's lines, ACL entries sorted (each broker lists a resource's ACLs in its own order)."""
    return sorted(line.strip() for line in text.splitlines() if line.strip())
