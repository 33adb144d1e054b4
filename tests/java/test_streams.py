"""Kafka Streams against Strata: the word count of Kafka's quick start (regroup by word through a
repartition topic, count into a state store with a changelog topic, write the counts to an output topic),
run by tests/java/src/strata/javatests/StreamsCount.java against Strata and against the reference broker.

The state cache is off, so each input record gives one count update and the answer does not depend on commit
timing: both brokers must give every word the counts 1..n, and Streams must have created the same internal
topics with the same configs on both. Exactly-once processing (``exactly_once_v2``) is run by
tests/java/test_transactions_java.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fixtures.kafka import RunningBroker
from tests.fixtures.reference_broker import ReferenceBroker
from tests.java.clients import scenario

pytestmark = pytest.mark.integration

LINES = 300


@pytest.fixture
def strata(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory(num_partitions=1) as running:
        yield running


def test_word_count_topology_gives_the_reference_brokers_answer(
    strata: RunningBroker, reference_broker: ReferenceBroker
) -> None:
    app = f"wordcount-{uuid.uuid4().hex[:8]}"
    on_strata = scenario("streams", strata.bootstrap, timeout=180, app=app, count=LINES)
    on_kafka = scenario("streams", reference_broker.bootstrap, timeout=180, app=app, count=LINES)

    assert on_strata.get("failures") == [], on_strata
    assert on_strata["state"] == "RUNNING"
    counts = on_strata["counts"]
    assert sum(len(c) for c in counts.values()) == LINES
    assert all(c == list(range(1, len(c) + 1)) for c in counts.values()), counts
    assert set(on_strata["internal_topics"]) == {"by-word-repartition", "word-counts-changelog"}
    assert on_strata == on_kafka
