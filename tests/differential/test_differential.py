"""The differential scenarios in ``make test``: each quick scenario against the reference broker and an
embedded agent, with no difference that tests/differential/divergences.py does not list. ``make
differential`` runs every scenario, the slow ones too, and prints every difference."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.differential.base import SCENARIOS
from tests.differential.divergences import INTENDED
from tests.differential.runner import report, run
from tests.differential.wire import Side
from tests.fixtures.docs import DOCS, section
from tests.fixtures.kafka import RunningBroker
from tests.fixtures.reference_broker import ReferenceBroker

pytestmark = pytest.mark.integration

QUICK = sorted(name for name, s in SCENARIOS.items() if s.quick)


@pytest.fixture
def strata(kafka_factory: Callable[..., Any]) -> Iterator[RunningBroker]:
    with kafka_factory(group_initial_rebalance_delay_ms=0) as running:
        yield running


@pytest.mark.parametrize("name", QUICK)
def test_strata_answers_as_the_reference_broker(
    name: str, strata: RunningBroker, reference_broker: ReferenceBroker
) -> None:
    kafka, ours = Side("kafka", reference_broker.port), Side("strata", strata.port)
    try:
        (outcome,) = run(kafka, ours, [name])
    finally:
        kafka.close()
        ours.close()
    assert outcome.steps > 0
    assert not outcome.unexpected, report([outcome])


def test_every_intended_divergence_is_documented_and_every_documented_one_is_listed() -> None:
    text = section(DOCS / "kafka-clients.md", "## Where Strata differs from Kafka's broker")
    # Rows: | `key` | where it shows | what differs, and why |. The page also names divergences no
    # scenario sees (a tool's output, the acknowledgement's timing); those say where they show instead.
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| ([^|]+) \|", text, re.MULTILINE))
    by_runner = {key for key, where in rows.items() if where.strip() == "differential runner"}
    listed = {d.key for d in INTENDED}
    assert listed == by_runner, (
        f"in divergences.py only: {listed - by_runner}; on the page only: {by_runner - listed}"
    )
