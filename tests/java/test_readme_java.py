"""The README's Kafka section, for Apache Kafka's Java client: its properties block drives Kafka's own
producer and consumer, and its kafka-topics command runs (by class name, as kafka-topics.sh runs it) with
the output shown under it, against an agent (only the address changes: the test agent listens on a free
port, not 9092)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.docs import README, blocks, examples, section
from tests.fixtures.kafka import RunningBroker
from tests.java import kafka
from tests.java.clients import scenario

pytestmark = pytest.mark.integration

TOOLS = {"kafka-topics.sh": kafka.TOPICS}


@pytest.fixture
def strata(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory() as running:
        yield running


def test_the_java_clients_properties_produce_and_consume(strata: RunningBroker, tmp_path: Path) -> None:
    (properties,) = blocks(section(README, "### Kafka"), "properties")
    config = tmp_path / "client.properties"
    config.write_text(properties.replace("127.0.0.1:9092", strata.bootstrap))
    # bootstrap= is the unchanged default the file overrides: only the file's address can work.
    produced = scenario("produce", "127.0.0.1:1", topic="readme-java", count=10, config=config)
    assert produced.get("acked") == 10, produced
    consumed = scenario("consume", "127.0.0.1:1", topic="readme-java", expect=10, config=config)
    assert len(consumed.get("records", [])) == 10, consumed


def test_the_kafka_topics_command_prints_what_the_readme_shows(strata: RunningBroker) -> None:
    ((code, output),) = [
        (c, o) for c, o in examples(section(README, "### Kafka"), "sh") if "kafka-topics" in c
    ]
    assert output is not None
    for line in code.splitlines():
        tool, *args = shlex.split(line.replace("127.0.0.1:9092", strata.bootstrap))
        done = kafka.run(TOOLS[tool], *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == output.strip()
