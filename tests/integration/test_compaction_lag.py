"""How long an overwritten record stays readable: cold keys beside hot ones, with an injected clock.

A table of cold keys (written once, cleaned) beside a few hot keys updated all the time. Merges deduplicate
the hot keys as they go, within what each merge job holds, so the dirty part stays small. Two guarantees:
- ``max.compaction.lag.ms`` bounds the time an overwritten record stays readable: once the overwrite is
  older than that, the next round removes the record it replaced, wherever the two sit;
- without it, cleaning still happens eventually: the dirty ratio counts what was written since the last
  clean (Kafka's measure), which merges cannot shrink, so records overwritten across merge jobs (in
  different L2 files) go once enough was written.

The wall clock is a ``SkewedClock`` shared by the agent (record timestamps) and the round (lags), moved
forward by the test; rounds are driven here, the way the worker's loop drives them.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from planner.jobs import JOB_CLEAN, JOB_MERGE, JobSpec
from planner.planner import PlannerConfig
from planner.round import CompactionRound, RoundConfig
from storage.clock import SkewedClock
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}
LAG_S = 60
STEP_S = 10  # the worker's interval, as this test sees it: one round per step


def compactor(srv: RunningServer, config: RoundConfig | None = None) -> CompactionRound:
    rt = srv.runtime
    return CompactionRound(
        rt.store, rt.metadata, rt.clock, random.Random(11), "test-worker", config or RoundConfig()
    )


def produce(srv: RunningServer, topic: str, updates: dict[str, str]) -> None:
    response = srv.produce(topic, [{"key": k, "value": v} for k, v in updates.items()])
    assert response.status_code == 200, response.text


def overwritten(log: dict[int, list[dict[str, Any]]]) -> set[tuple[int, int]]:
    """(partition, offset) of every readable record whose key has a later record in its partition."""
    out: set[tuple[int, int]] = set()
    for partition, recs in log.items():
        last = {rec["key"]: rec["offset"] for rec in recs}
        out |= {(partition, rec["offset"]) for rec in recs if last[rec["key"]] != rec["offset"]}
    return out


def latest_values(log: dict[int, list[dict[str, Any]]]) -> dict[str, str]:
    return {rec["key"]: rec["value"] for recs in log.values() for rec in recs}


def read_log(srv: RunningServer, topic: str, partitions: int) -> dict[int, list[dict[str, Any]]]:
    return {p: srv.read_all(topic, p) for p in range(partitions)}


def kinds(result_jobs: list[Any]) -> list[str]:
    return [job.kind for job in result_jobs]


def test_max_compaction_lag_bounds_how_long_an_overwritten_cold_record_stays_readable(
    srv: RunningServer, clock: SkewedClock
) -> None:
    srv.create_topic("table", partitions=2, **COMPACT, **{"max.compaction.lag.ms": LAG_S * 1000})
    cold = {f"cold-{k:03d}": f"v0-{k:03d}-" + "c" * 400 for k in range(200)}
    hot = [f"hot-{k}" for k in range(4)]
    produce(srv, "table", dict(list(cold.items())[:100]))
    produce(srv, "table", dict(list(cold.items())[100:]))
    response = srv.produce("table", [{"key": k, "value": "h0"} for k in hot])
    assert response.status_code == 200, response.text
    hot_partitions = {o["partition"] for o in response.json()["offsets"]}
    c = compactor(srv)
    first = c.run_once()  # never cleaned: dirty ratio 1.0
    assert kinds(first.planned) == [JOB_CLEAN]
    assert c.run_once().planned == []
    expected = latest_values(read_log(srv, "table", 2))

    # Each of 20 cold keys is overwritten once; the records they replace sit in the cleaned part.
    rewrite = {k: f"v1-{k}" for k in list(cold)[::10]}
    produce(srv, "table", rewrite)
    expected.update(rewrite)
    overwrite_ms = clock.now_ms()  # the agent stamped the overwrites at or before this
    cold_replaced = overwritten(read_log(srv, "table", 2))
    assert len(cold_replaced) == len(rewrite)

    step = 0
    while clock.now_ms() - overwrite_ms <= LAG_S * 1000:
        # Below the lag and far below the dirty ratio: merges run (and deduplicate the hot keys within
        # each merge), but nothing forces a clean, and the replaced cold records are still there.
        step += 1
        update = {k: f"h{step}" for k in hot}
        produce(srv, "table", update)
        expected.update(update)
        result = c.run_once()
        assert set(kinds(result.planned)) <= {JOB_MERGE}
        assert c.planner.dirty_partitions() == []
        log = read_log(srv, "table", 2)
        assert latest_values(log) == expected
        assert cold_replaced <= overwritten(log)
        clock.advance(STEP_S)
    assert step >= 6
    # Merges joined the overwrites' chunks with newer hot records meanwhile, so the newest record of every
    # dirty chunk is younger than the lag: only the oldest record (min_timestamp) shows it has passed.
    deadline = clock.now_ms() - LAG_S * 1000
    for stats in srv.runtime.metadata.partition_stats("table"):
        assert stats.earliest_dirty_timestamp is not None
        assert stats.earliest_dirty_timestamp < deadline
        if stats.partition in hot_partitions:
            assert stats.oldest_dirty_timestamp is not None
            assert stats.oldest_dirty_timestamp > deadline

    # The overwrites are now older than max.compaction.lag.ms: the next round removes what they replaced,
    # with every other overwritten record, in both partitions (they share files: one job).
    result = c.run_once()
    cleans = [job for job in result.planned if job.kind == JOB_CLEAN]
    assert len(cleans) == 1
    assert "max.compaction.lag.ms" in JobSpec.from_json(cleans[0].spec).reason
    log = read_log(srv, "table", 2)
    assert overwritten(log) == set()
    assert latest_values(log) == expected
    assert sum(len(recs) for recs in log.values()) == len(cold) + len(hot)


def test_merges_cannot_keep_a_partition_below_its_dirty_ratio(srv: RunningServer) -> None:
    srv.create_topic("table", partitions=1, **COMPACT)  # no max.compaction.lag.ms: Kafka's default
    produce(srv, "table", {f"cold-{k:02d}": "c" * 200 for k in range(40)})
    # Flush files merge every round; L1 merges into L2 at 8 files, as by default.
    c = compactor(srv, RoundConfig(planner=PlannerConfig(merge_age_ms=(0, 600_000))))
    assert kinds(c.run_once().planned) == [JOB_CLEAN]
    meta = srv.runtime.metadata
    clean_bytes = meta.partition_stats("table")[0].live_bytes

    written = 0
    for i in range(100):
        produce(srv, "table", {"hot-a": f"{i}-" + "h" * 200, "hot-b": f"{i}-" + "h" * 200})
        written += 2
        stats = meta.partition_stats("table")[0]
        result = c.run_once()
        after = meta.partition_stats("table")[0].cleaned_offset
        for fc in meta.partition_chunks("table", 0):
            # No chunk holds both cleaned and dirty records (the offset map never filled here).
            assert not fc.chunk.base_offset < after <= fc.chunk.last_offset, fc.chunk
        reasons = [JobSpec.from_json(job.spec).reason for job in result.planned if job.kind == JOB_CLEAN]
        if reasons:
            break
    else:
        pytest.fail("merges kept the partition below its dirty ratio for ever")
    assert "dirty ratio" in reasons[0]
    # Merges had deduplicated the hot keys as they went: what the dirty part still held was far below the
    # ratio, and only what was written since the clean (Kafka's measure) reached it.
    assert stats.dirty_bytes / stats.live_bytes < 0.25
    assert stats.dirty_records < written / 2
    # ... while the bytes written since the clean were about the clean bytes, as Kafka would count them.
    assert written * (len("0-") + 200) < 2 * clean_bytes
    assert meta.live_files(2)  # some of the overwritten records sat in L2 files, never merged again
    # The clean took the whole log: no overwritten record is left anywhere, L2 included.
    log = read_log(srv, "table", 1)
    assert overwritten(log) == set()
    assert len(log[0]) == 42


def test_a_clean_cut_short_by_min_compaction_lag_keeps_dirty_records_in_chunks_of_their_own(
    srv: RunningServer, clock: SkewedClock
) -> None:
    lags = {"min.compaction.lag.ms": 30_000, "max.compaction.lag.ms": 120_000}
    srv.create_topic("t", partitions=1, **COMPACT, **lags)
    produce(srv, "t", {f"k{i}": "old" for i in range(10)})
    clock.advance(200)
    produce(srv, "t", {"k0": "young"})
    young_ms = clock.now_ms()
    c = compactor(srv)
    meta = srv.runtime.metadata

    # Never cleaned, so due; pass 1 stops before the record newer than min.compaction.lag.ms.
    assert kinds(c.run_once().planned) == [JOB_CLEAN]
    stats = meta.partition_stats("t")[0]
    assert stats.cleaned_offset == 10
    # The cleaned records and the dirty one are in separate chunks, although adjacent in the job: a chunk
    # joining them would count as dirty with a 200 s old record, and look past max.compaction.lag.ms.
    spans = [(fc.chunk.base_offset, fc.chunk.last_offset) for fc in meta.partition_chunks("t", 0)]
    assert spans == [(0, 9), (10, 10)]
    assert stats.earliest_dirty_timestamp is not None
    assert young_ms - 1000 <= stats.earliest_dirty_timestamp <= young_ms

    clock.advance(40)  # past the minimum lag, far from the maximum, and well below the dirty ratio
    assert c.planner.dirty_partitions() == []
    assert c.run_once().planned == []
    first = srv.read_all("t", 0)[0]
    assert (first["key"], first["value"]) == ("k0", "old")  # the overwritten value: not forced out yet

    clock.advance(90)  # the overwrite is now older than max.compaction.lag.ms
    result = c.run_once()
    assert kinds(result.planned) == [JOB_CLEAN]
    assert "max.compaction.lag.ms" in JobSpec.from_json(result.planned[0].spec).reason
    log = srv.read_all("t", 0)
    assert [(r["key"], r["value"]) for r in log] == [(f"k{i}", "old") for i in range(1, 10)] + [
        ("k0", "young")
    ]
