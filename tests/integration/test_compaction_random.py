"""Randomised end to end: a seeded workload of keyed updates and tombstones over many partitions, with
compaction rounds (full, partial with a tiny offset map, background merges) interleaved with produce and
agent restarts. After every round the log read over HTTP from offset 0 is checked against a reference
model; at the end, once tombstones have outlived ``delete.retention.ms``, the compacted log holds exactly
one record per live key and nothing else.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from planner.offset_map import FakeOffsetMap
from planner.round import CompactionRound, RoundConfig
from planner.runner import RunnerConfig
from storage.clock import SkewedClock
from strata.settings import Settings
from tests.fixtures.server import RunningServer, run_server

pytestmark = pytest.mark.integration

TOPIC = "entities"
PARTITIONS = 8
KEYS = 150
DELETE_RETENTION_MS = 3_600_000


class Model:
    """What the producers were told: every acked record, and the latest one of each key."""

    def __init__(self) -> None:
        self.acked: dict[tuple[int, int], tuple[str, str | None]] = {}  # (partition, offset) -> record
        self.latest: dict[str, tuple[int, int]] = {}  # key -> (partition, offset) of its last record
        self.high_watermarks = [0] * PARTITIONS

    def produce(self, srv: RunningServer, recs: list[dict[str, Any]]) -> None:
        response = srv.produce(TOPIC, recs)
        assert response.status_code == 200, response.text
        for rec, at in zip(recs, response.json()["offsets"], strict=True):
            place = (at["partition"], at["offset"])
            assert place not in self.acked, f"offset {place} was assigned twice"
            self.acked[place] = (rec["key"], rec["value"])
            self.latest[rec["key"]] = place
            self.high_watermarks[place[0]] = max(self.high_watermarks[place[0]], place[1] + 1)

    def state(self) -> dict[str, str]:
        """The reference: key -> latest value, tombstoned keys absent."""
        out = {}
        for key, place in self.latest.items():
            value = self.acked[place][1]
            if value is not None:
                out[key] = value
        return out

    def tombstoned(self) -> set[str]:
        return {key for key, place in self.latest.items() if self.acked[place][1] is None}


def check(srv: RunningServer, model: Model) -> dict[int, list[dict[str, Any]]]:
    """The whole log from offset 0 agrees with the model; returns it."""
    log = {p: srv.read_all(TOPIC, p) for p in range(PARTITIONS)}
    folded: dict[str, str] = {}
    last: dict[str, tuple[int, int]] = {}
    for partition, recs in log.items():
        offsets = [r["offset"] for r in recs]
        assert offsets == sorted(set(offsets)), f"partition {partition}: offsets not strictly increasing"
        state = srv.client.get(f"/v1/topics/{TOPIC}/partitions/{partition}/offsets").json()
        assert state == {
            "log_start_offset": 0,
            "high_watermark": model.high_watermarks[partition],
            "last_stable_offset": model.high_watermarks[partition],
        }
        for rec in recs:
            # Compaction never invents a record nor moves one: each is what was acked at that offset.
            assert model.acked[(partition, rec["offset"])] == (rec["key"], rec["value"]), rec
            last[rec["key"]] = (partition, rec["offset"])
            if rec["value"] is None:
                folded.pop(rec["key"], None)
            else:
                folded[rec["key"]] = rec["value"]
    assert folded == model.state()
    return log


@contextmanager
def agent(settings: Settings, clock: SkewedClock) -> Iterator[tuple[RunningServer, CompactionRound]]:
    """A (re)started agent on the same data, and a worker with the default offset map."""
    with run_server(settings, clock=clock) as srv:
        rt = srv.runtime
        yield srv, CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(1), owner="full")


def run_until_idle(c: CompactionRound, topic: str | None = TOPIC, force: bool = True, limit: int = 30) -> int:
    for rounds in itertools.count(1):
        if not c.run_once(topic, force).jobs:
            return rounds
        assert rounds < limit, "compaction did not settle"
    raise AssertionError("unreachable")


@pytest.mark.parametrize("seed", [20261121])
def test_random_updates_compactions_and_restarts_match_the_reference(
    backend_settings: Settings, seed: int
) -> None:
    rng = random.Random(seed)
    clock = SkewedClock()
    model = Model()
    updates = [f"key-{k:03d}" for k in range(KEYS) for _ in range(rng.randint(8, 12))]
    rng.shuffle(updates)
    sizes: list[int] = []
    while sum(sizes) < len(updates):
        sizes.append(rng.randint(40, 110))
    batches = [updates[sum(sizes[:i]) : sum(sizes[: i + 1])] for i in range(len(sizes))]
    restarts = set(rng.sample(range(2, len(batches) - 1), 2))
    actions: dict[str, int] = {}
    partial_rounds = 0

    lifetimes = 0
    position = 0
    while position < len(batches):
        lifetimes += 1
        with agent(backend_settings, clock) as (srv, full):
            if lifetimes == 1:
                srv.create_topic(
                    TOPIC,
                    partitions=PARTITIONS,
                    **{"cleanup.policy": "compact", "delete.retention.ms": DELETE_RETENTION_MS},
                )
            else:
                check(srv, model)  # a restarted agent serves exactly what was acked before
            while position < len(batches):
                keys = batches[position]
                recs = [
                    {"key": key, "value": None if rng.random() < 0.1 else f"{key}@{position}.{i}"}
                    for i, key in enumerate(keys)
                ]
                model.produce(srv, recs)
                position += 1
                action = rng.choice(["none", "full", "tiny", "tiny", "small-files", "background"])
                actions[action] = actions.get(action, 0) + 1
                if action == "full":
                    full.run_once(TOPIC, force=True)
                elif action == "tiny":
                    rt = srv.runtime
                    tiny = CompactionRound(
                        rt.store,
                        rt.metadata,
                        rt.clock,
                        random.Random(position),
                        owner=f"tiny-{position}",
                        offset_map=FakeOffsetMap(rng.randint(3, 12)),
                    )
                    for _, stats in tiny.run_once(TOPIC, force=True).jobs:
                        partial_rounds += stats.partial_partitions > 0
                elif action == "small-files":
                    # Small output files: long runs are cut into several chunks and files.
                    rt = srv.runtime
                    config = RoundConfig(
                        runner=RunnerConfig(max_output_file_bytes=rng.choice([1, 700, 3000]))
                    )
                    splitter = CompactionRound(
                        rt.store, rt.metadata, rt.clock, random.Random(position), owner="split", config=config
                    )
                    splitter.run_once(TOPIC, force=True)
                elif action == "background":
                    clock.advance(25)  # L0 files are old enough to merge
                    full.run_once()
                if action != "none":
                    check(srv, model)
                if position in restarts:
                    break  # the agent stops; a new one starts on the same settings and data

    assert lifetimes == 3
    assert partial_rounds > 0, actions  # the tiny map really cut some cleanings short

    with agent(backend_settings, clock) as (srv, full):
        run_until_idle(full)
        log = check(srv, model)
        # Before tombstones expire, a consumer from offset 0 sees the tombstone of every deleted key, at
        # the offset it was acked at, and exactly one record per key.
        tombstoned = model.tombstoned()
        assert tombstoned
        seen = {r["key"]: (p, r["offset"], r["value"]) for p, recs in log.items() for r in recs}
        for key in tombstoned:
            assert seen[key] == (*model.latest[key], None)
        assert sum(map(len, log.values())) == KEYS

        # Past delete.retention.ms, the next cleaning of each partition drops the tombstones.
        clock.advance(DELETE_RETENTION_MS / 1000 + 1)
        per_partition: dict[int, str] = {}
        for key, (partition, _) in sorted(model.latest.items()):
            per_partition.setdefault(partition, key)
        model.produce(srv, [{"key": key, "value": f"{key}@final"} for key in per_partition.values()])
        run_until_idle(full)
        log = check(srv, model)
        final = [r for recs in log.values() for r in recs]
        assert all(r["value"] is not None for r in final)
        assert sorted(r["key"] for r in final) == sorted(model.state())  # one record per live key
