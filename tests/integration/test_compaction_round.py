"""The compaction round's order and its error policy: a retriable error in one job ends that job only.

The round (``planner/round.py``) goes on with its other jobs and with GC; the failed job stays leased
until its lease expires and then runs again (``planner/runner.py``). The fault comes from the
fault-injecting object store, for the input files of one topic only.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, cast

import pytest

from planner.jobs import JobSpec
from planner.round import CompactionRound, RoundConfig
from planner.stats import JobOutcome, JobStats
from storage.clock import SkewedClock
from storage.keys import DATA_PREFIX, new_object_key
from storage.metadata.rows import JOB_DONE, JOB_LEASED, Job
from storage.objectstore.base import GET, ObjectStore, ObjectStream
from storage.objectstore.faults import FaultyObjectStore
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}


class FaultyFor:
    """The real store, except that streaming GETs of ``keys`` always fail (a ``FaultyObjectStore``)."""

    def __init__(self, inner: ObjectStore, keys: set[str]) -> None:
        self.inner = inner
        self.faulty = FaultyObjectStore(inner, failure_rate=1.0, rng=random.Random(1), kinds=frozenset({GET}))
        self.keys = keys

    def open_stream(self, key: str, start: int = 0, end: int | None = None) -> ObjectStream:
        return (self.faulty if key in self.keys else self.inner).open_stream(key, start, end)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def srv(tmp_path: Any) -> Iterator[RunningServer]:
    with run_server(local_settings(tmp_path)) as server:
        yield server


def _files_of(srv: RunningServer, topic: str) -> set[str]:
    return {fc.chunk.object_key for fc in srv.runtime.metadata.partition_chunks(topic, 0)}


def test_a_retriable_error_fails_its_job_and_the_round_goes_on_gc_included(srv: RunningServer) -> None:
    for topic in ("broken", "fine"):
        srv.create_topic(topic, **COMPACT)
        for r in range(3):  # one request at a time: one flush, one file each
            response = srv.produce(topic, [{"key": f"k{k}", "value": f"{r}.{k}"} for k in range(5)])
            assert response.status_code == 200
    broken_files, fine_files = _files_of(srv, "broken"), _files_of(srv, "fine")
    assert len(broken_files) == len(fine_files) == 3
    rt = srv.runtime
    clock = SkewedClock()
    orphan = new_object_key(0, clock, random.Random(2))
    rt.store.put(orphan, b"an upload whose commit never happened")
    clock.advance(10)  # the orphan is now older than its grace
    config = RoundConfig(obsolete_grace_ms=0, orphan_grace_ms=5_000)
    store = cast(ObjectStore, FaultyFor(rt.store, broken_files))
    compaction = CompactionRound(store, rt.metadata, clock, random.Random(3), "w", config)

    result = compaction.run_once(force=True)

    ((broken_job, broken), (_, fine)) = sorted(result.jobs, key=lambda r: _input_keys(r[0]) != broken_files)
    assert _input_keys(broken_job) == broken_files
    assert (broken.outcome, fine.outcome) == (JobOutcome.INTERRUPTED, JobOutcome.COMMITTED)
    assert "injected fault" in broken.reason
    left = rt.metadata.get_job(broken_job.job_id)
    assert (left.state, left.lease_owner, left.attempts) == (JOB_LEASED, "w", 1)  # left to its lease
    # GC ran after the failed job: the fine topic's inputs and the orphan are gone.
    assert result.obsolete_deleted == 3
    assert result.orphans_deleted == 1
    listed = {info.key for info in rt.store.list(DATA_PREFIX)}
    assert orphan not in listed
    assert not fine_files & listed
    assert broken_files <= listed
    assert [r["value"] for r in srv.read_all("broken", 0)] == [f"{r}.{k}" for r in range(3) for k in range(5)]

    # Once the lease has expired, a healthy round runs the job again and commits it.
    clock.advance(config.runner.lease_ms / 1000 + 1)
    healthy = CompactionRound(rt.store, rt.metadata, clock, random.Random(4), "w2", config)
    ((job, stats),) = healthy.run_once().jobs
    assert (job.job_id, stats.outcome) == (broken_job.job_id, JobOutcome.COMMITTED)
    done = rt.metadata.get_job(job.job_id)
    assert (done.state, done.attempts) == (JOB_DONE, 2)
    assert [r["value"] for r in srv.read_all("broken", 0)] == [f"2.{k}" for k in range(5)]


def _input_keys(job: Job) -> set[str]:
    return {f.object_key for f in JobSpec.from_json(job.spec).inputs}


class Recorder:
    """A ``RoundProgress`` that writes down what it is told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def planned(self, jobs: list[Job]) -> None:
        self.events.append(("planned", [j.job_id for j in jobs]))

    def job_done(self, job: Job, stats: JobStats) -> None:
        self.events.append(("done", (job.job_id, stats.outcome)))


def test_the_round_reports_its_plan_then_each_job(srv: RunningServer) -> None:
    srv.create_topic("t", partitions=2, **COMPACT)
    for r in range(2):
        assert srv.produce("t", [{"key": f"k{k}", "value": str(r)} for k in range(6)]).status_code == 200
    rt = srv.runtime
    seen: list[int] = []
    compaction = CompactionRound(
        rt.store, rt.metadata, rt.clock, random.Random(5), "w", on_job=lambda job, _: seen.append(job.job_id)
    )
    progress = Recorder()
    result = compaction.run_once("t", force=True, progress=progress)
    planned = [j.job_id for j in result.planned]
    assert planned  # one clean job: its files hold both partitions
    assert progress.events == [("planned", planned)] + [("done", (i, JobOutcome.COMMITTED)) for i in planned]
    assert seen == planned  # the round's own hook (metrics) sees every job too


def test_the_compact_endpoint_plans_without_building_a_job_runner(srv: RunningServer) -> None:
    srv.create_topic("t", **COMPACT)
    assert srv.produce("t", [{"key": "k", "value": "v"}]).status_code == 200
    response = srv.client.post("/v1/topics/t/compact")
    assert response.status_code == 202, response.text
    assert len(response.json()["planned"]) == 1
    assert srv.runtime._round is None  # no offset map was allocated in this agent-only process
