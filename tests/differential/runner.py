"""Run scenarios against both brokers and report the differences."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.differential import (  # noqa: F401  (each registers its scenarios)
    scenarios_admin,
    scenarios_frames,
    scenarios_groups,
    scenarios_log,
    scenarios_txn,
    scenarios_versions,
)
from tests.differential.base import SCENARIOS, Scenario
from tests.differential.compare import Difference, differences
from tests.differential.wire import Side


@dataclass
class Outcome:
    scenario: str
    steps: int
    differences: list[Difference] = field(default_factory=list)

    @property
    def unexpected(self) -> list[Difference]:
        return [d for d in self.differences if d.intended is None]


def negotiate(kafka: Side, strata: Side) -> None:
    """Each API at the highest version both brokers serve."""
    for side in (kafka, strata):
        side.connect()
    common: dict[int, int] = {}
    common_min: dict[int, int] = {}
    for key, (kmin, kmax) in kafka.versions.items():
        if key in strata.versions:
            smin, smax = strata.versions[key]
            if max(kmin, smin) <= min(kmax, smax):
                common[key], common_min[key] = min(kmax, smax), max(kmin, smin)
    kafka.common = strata.common = common
    kafka.common_min = strata.common_min = common_min


def run(kafka: Side, strata: Side, names: Iterable[str] | None = None) -> list[Outcome]:
    negotiate(kafka, strata)
    prefix = f"diff-{uuid.uuid4().hex[:8]}"
    outcomes = []
    for scenario in select(names):
        kafka_answers = scenario.run(kafka, prefix)
        strata_answers = scenario.run(strata, prefix)
        outcome = Outcome(scenario.name, len(kafka_answers))
        for step in list(kafka_answers) + [s for s in strata_answers if s not in kafka_answers]:
            outcome.differences += differences(
                f"{scenario.name}/{step}", kafka_answers.get(step), strata_answers.get(step)
            )
        outcomes.append(outcome)
    return outcomes


def select(names: Iterable[str] | None) -> list[Scenario]:
    if names is None:
        return list(SCENARIOS.values())
    return [SCENARIOS[n] for n in names]


def report(outcomes: list[Outcome]) -> str:
    lines = []
    for o in outcomes:
        intended = len(o.differences) - len(o.unexpected)
        lines.append(
            f"{o.scenario}: {o.steps} steps, {intended} intended differences, {len(o.unexpected)} unexpected"
        )
        for d in o.differences:
            mark = f"intended ({d.intended.key})" if d.intended else "UNEXPECTED"
            lines.append(f"  {mark}: {d.path}: kafka={_short(d.kafka)} strata={_short(d.strata)}")
    return "\n".join(lines)


def _short(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
