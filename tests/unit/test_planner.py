"""The planner's pure cores without a server: selection rules, retention's new log start, JobSpec, the
keep/drop rule. Like Kafka's LogCleanerTest: a manual clock, and a real SQLite metadata store in tmp_path
where the planner needs one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.jobs import JOB_CLEAN, JOB_MERGE, InputFile, JobSpec
from planner.planner import Planner, PlannerConfig, _due, _overdue_ms, _ratio
from planner.retain import retain_mask, should_retain
from planner.retention import Retention
from storage.clock import ManualClock
from storage.metadata import open_metadata_store
from storage.metadata.base import MetadataStore
from storage.metadata.rows import ChunkRow, FileChunk, NewChunk, NewFile, PartitionStats
from storage.topic_config import TopicConfig
from tests.examples import examples

COMPACT = {"cleanup.policy": "compact"}
NOW = 1_700_000_000_000


# --- _due: when is a compacted partition due for cleaning ----------------------------------------------
def _stats(**overrides: object) -> PartitionStats:
    base = PartitionStats(
        topic="t",
        partition=0,
        log_start_offset=0,
        high_watermark=100,
        cleaned_offset=0,
        last_compaction_ms=None,
        live_bytes=1000,
        dirty_bytes=600,
        chunk_count=4,
        oldest_dirty_timestamp=NOW - 60_000,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def _config(**overrides: str) -> TopicConfig:
    return TopicConfig.from_overrides({**COMPACT, **overrides})


def test_due_when_the_dirty_ratio_reaches_the_minimum() -> None:
    reason = _due(_stats(dirty_bytes=500), _config(), NOW, force=False)
    assert reason is not None
    assert "dirty ratio 0.50" in reason
    assert _due(_stats(dirty_bytes=499), _config(), NOW, force=False) is None


def test_due_when_dirty_data_is_older_than_max_compaction_lag() -> None:
    config = _config(**{"max.compaction.lag.ms": "30000"})
    reason = _due(_stats(dirty_bytes=10), config, NOW, force=False)
    assert reason is not None
    assert "max.compaction.lag.ms" in reason
    young = _stats(dirty_bytes=10, oldest_dirty_timestamp=NOW - 30_000)  # exactly the lag: not past it
    assert _due(young, config, NOW, force=False) is None


def test_max_compaction_lag_is_measured_from_the_oldest_dirty_record_not_the_newest_of_its_chunk() -> None:
    # A merge joined a record of NOW - 60 s with records of NOW - 10 s: the chunk's max_timestamp says
    # 10 s, its min_timestamp 60 s. Kafka measures from the earliest (first batch) timestamp.
    config = _config(**{"max.compaction.lag.ms": "30000"})
    merged = _stats(
        dirty_bytes=10, oldest_dirty_timestamp=NOW - 10_000, earliest_dirty_timestamp=NOW - 60_000
    )
    reason = _due(merged, config, NOW, force=False)
    assert reason is not None
    assert "max.compaction.lag.ms" in reason
    assert _overdue_ms(merged, config, NOW) == 30_000
    assert _due(replace(merged, earliest_dirty_timestamp=NOW - 30_000), config, NOW, force=False) is None
    # With the default (no maximum lag) nothing is ever overdue.
    assert _overdue_ms(merged, _config(), NOW) == 0


def test_the_dirty_ratio_counts_bytes_written_since_the_last_clean_not_what_merges_left() -> None:
    # 900 clean bytes; 950 offsets written since the clean, of which merges left 10 records in 100 bytes.
    merged = _stats(
        log_start_offset=0, high_watermark=1000, cleaned_offset=50, dirty_bytes=100, dirty_records=10
    )
    assert _ratio(merged) == pytest.approx(9500 / (900 + 9500))
    reason = _due(merged, _config(), NOW, force=False)
    assert reason is not None
    assert "dirty ratio 0.91" in reason
    # Nothing removed since the clean: Kafka's ratio as it was, dirty bytes / live bytes.
    dense = replace(merged, dirty_records=950)
    assert _ratio(dense) == pytest.approx(0.1)
    assert _due(dense, _config(), NOW, force=False) is None
    # Offsets below the log start (retention) were not written to this log as far as cleaning goes.
    assert _ratio(replace(merged, log_start_offset=990)) == pytest.approx(0.1)


def test_without_a_minimum_lag_records_stamped_ahead_of_the_clock_are_cleanable() -> None:
    # CreateTime comes from producers, whose clocks may run ahead of the worker's.
    assert _due(_stats(oldest_dirty_timestamp=NOW + 5_000), _config(), NOW, force=False) is not None
    config = _config(**{"min.compaction.lag.ms": "1000"})
    assert _due(_stats(oldest_dirty_timestamp=NOW + 5_000), config, NOW, force=True) is None


def test_never_due_with_nothing_dirty_even_when_forced() -> None:
    assert _due(_stats(dirty_bytes=0), _config(), NOW, force=True) is None
    assert _due(_stats(oldest_dirty_timestamp=None), _config(), NOW, force=True) is None


def test_never_due_before_min_compaction_lag_even_when_forced() -> None:
    config = _config(**{"min.compaction.lag.ms": "120000"})
    assert _due(_stats(), config, NOW, force=True) is None  # a job now would change nothing
    assert _due(_stats(oldest_dirty_timestamp=NOW - 120_000), config, NOW, force=True) == "requested"


def test_forced_means_whatever_the_ratio() -> None:
    assert _due(_stats(dirty_bytes=1), _config(), NOW, force=True) == "requested"


# --- Planner.plan over a SQLite store ------------------------------------------------------------------
@pytest.fixture
def metadata(tmp_path: Path) -> Iterator[MetadataStore]:
    store = open_metadata_store(f"sqlite:///{tmp_path / 'metadata.db'}")
    yield store
    store.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def _flush(
    metadata: MetadataStore, clock: ManualClock, parts: list[tuple[str, int]], size: int = 1000
) -> str:
    """Commit one L0 file holding one chunk of 10 records per (topic, partition); returns its key."""
    key = f"data/l0/{clock.now_ms():012x}{len(metadata.live_files()):020x}.strata"
    length = size // len(parts)
    chunks = [
        NewChunk(t, p, 10, i * length, length, clock.now_ms() - 1000, clock.now_ms(), 0)
        for i, (t, p) in enumerate(parts)
    ]
    metadata.commit_flush(NewFile(key, size, 0, clock.now_ms()), chunks, [], clock.now_ms())
    clock.advance(0.001)
    return key


def test_merge_is_due_at_merge_files_and_takes_the_oldest_first(
    metadata: MetadataStore, clock: ManualClock
) -> None:
    metadata.create_topic("plain", 1, {}, NOW)
    planner = Planner(metadata, clock, PlannerConfig(merge_files=(4, 8)))
    keys = [_flush(metadata, clock, [("plain", 0)]) for _ in range(3)]
    assert planner.plan() == []  # 3 young files: nothing is due
    keys.append(_flush(metadata, clock, [("plain", 0)]))
    (job,) = planner.plan()
    spec = JobSpec.from_json(job.spec)
    assert (job.kind, spec.output_level, spec.reason) == (JOB_MERGE, 1, "L0 holds 4 files")
    assert [f.object_key for f in spec.inputs] == keys
    assert planner.plan() == []  # the files are claimed by the active job


def test_merge_is_due_by_age_and_bounded_by_max_job_bytes(
    metadata: MetadataStore, clock: ManualClock
) -> None:
    metadata.create_topic("plain", 1, {}, NOW)
    config = PlannerConfig(merge_age_ms=(20_000, 600_000), max_job_bytes=2500)
    planner = Planner(metadata, clock, config)
    keys = [_flush(metadata, clock, [("plain", 0)]) for _ in range(3)]
    assert planner.plan() == []
    clock.advance(20)
    (job,) = planner.plan()
    spec = JobSpec.from_json(job.spec)
    assert spec.reason.startswith("L0's oldest file is 20 s old")
    assert [f.object_key for f in spec.inputs] == keys[:2]  # a third 1000-byte file would pass 2500


def test_a_single_old_file_is_not_merged(metadata: MetadataStore, clock: ManualClock) -> None:
    metadata.create_topic("plain", 1, {}, NOW)
    _flush(metadata, clock, [("plain", 0)])
    clock.advance(3600)
    assert Planner(metadata, clock).plan() == []


def test_clean_takes_every_file_of_a_due_compacted_partition(
    metadata: MetadataStore, clock: ManualClock
) -> None:
    metadata.create_topic("c", 2, COMPACT, NOW)
    metadata.create_topic("plain", 1, {}, NOW)
    p0 = [_flush(metadata, clock, [("c", 0), ("plain", 0)]) for _ in range(2)]
    _flush(metadata, clock, [("c", 1)])
    planner = Planner(metadata, clock, PlannerConfig(max_jobs_per_round=1))
    jobs = planner.plan("c", force=True)
    assert len(jobs) == 1  # max_jobs_per_round
    spec = JobSpec.from_json(jobs[0].spec)
    assert (jobs[0].kind, spec.output_level) == (JOB_CLEAN, 1)  # cleaned output is at least L1
    assert spec.reason == "c/0: requested"
    assert [f.object_key for f in spec.inputs] == p0
    (second,) = planner.plan("c", force=True)
    assert JobSpec.from_json(second.spec).reason == "c/1: requested"
    assert planner.plan("c", force=True) == []  # every file is claimed
    assert planner.plan("plain", force=True) == []  # not compacted: never cleaned


def test_due_partitions_sharing_files_are_cleaned_by_one_job(
    metadata: MetadataStore, clock: ManualClock
) -> None:
    metadata.create_topic("c", 3, COMPACT, NOW)
    shared = _flush(metadata, clock, [("c", 0), ("c", 1)])
    alone = _flush(metadata, clock, [("c", 2)])
    later = _flush(metadata, clock, [("c", 1)])
    planner = Planner(metadata, clock)
    first, second = planner.plan("c", force=True)
    spec = JobSpec.from_json(first.spec)
    # One job for c/0 and c/1: separate jobs would be refused (a file is in one active job at most), and
    # each would rewrite the shared file again.
    assert [f.object_key for f in spec.inputs] == [shared, later]
    assert spec.reason == "c/0: requested (and 1 more partition(s) sharing its files)"
    assert [f.object_key for f in JobSpec.from_json(second.spec).inputs] == [alone]
    assert JobSpec.from_json(second.spec).reason == "c/2: requested"


def test_a_due_partition_whose_files_an_active_job_holds_does_not_hold_up_the_others(
    metadata: MetadataStore, clock: ManualClock
) -> None:
    metadata.create_topic("c", 2, COMPACT, NOW)
    busy = _flush(metadata, clock, [("c", 0)])
    free = _flush(metadata, clock, [("c", 1)])
    (busy_file,) = [f for f in metadata.live_files() if f.object_key == busy]
    spec = JobSpec(JOB_MERGE, 1, (InputFile(busy_file.file_id, busy, busy_file.size, 0),), "a merge")
    metadata.create_job(spec.kind, spec.to_json(), spec.file_ids, NOW)
    planner = Planner(metadata, clock)
    assert [d.partition for d in planner.dirty_partitions("c")] == [0, 1]  # both due
    (job,) = planner.plan("c", force=True)
    assert [f.object_key for f in JobSpec.from_json(job.spec).inputs] == [free]


def test_partitions_past_max_compaction_lag_are_cleaned_first(
    metadata: MetadataStore, clock: ManualClock
) -> None:
    metadata.create_topic("a-dirty", 1, COMPACT, NOW)
    metadata.create_topic("b-late", 1, {**COMPACT, "max.compaction.lag.ms": "5000"}, NOW)
    _flush(metadata, clock, [("a-dirty", 0)])
    _flush(metadata, clock, [("b-late", 0)])
    clock.advance(10)
    due = Planner(metadata, clock).dirty_partitions()
    # Both never cleaned (ratio 1.0); the one past its bound goes first, however many partitions are due.
    assert [(d.topic, d.overdue_ms > 0) for d in due] == [("b-late", True), ("a-dirty", False)]
    jobs = Planner(metadata, clock, PlannerConfig(max_jobs_per_round=1)).plan()
    assert [JobSpec.from_json(j.spec).reason.split(":")[0] for j in jobs] == ["b-late/0"]


def test_dirty_partitions_skip_topics_that_are_not_compacted(
    metadata: MetadataStore, clock: ManualClock
) -> None:
    metadata.create_topic("c", 1, COMPACT, NOW)
    metadata.create_topic("plain", 1, {}, NOW)
    _flush(metadata, clock, [("c", 0), ("plain", 0)])
    dirty = Planner(metadata, clock).dirty_partitions()
    assert [(d.topic, d.partition, d.dirty_ratio) for d in dirty] == [("c", 0, 1.0)]


# --- retention's new log start -------------------------------------------------------------------------
class _Chunks:
    """Just ``partition_chunks``: all that ``Retention._new_log_start`` reads."""

    def __init__(self, chunks: list[ChunkRow]) -> None:
        self.chunks = chunks

    def partition_chunks(self, topic: str, partition: int) -> list[FileChunk]:
        return [FileChunk(1, c) for c in self.chunks]


def _chunk(base: int, last: int, max_ts: int, length: int = 100) -> ChunkRow:
    return ChunkRow(0, "t", 0, base, last, last - base + 1, "k", 0, length, max_ts - 10, max_ts, 0, False)


def _new_start(chunks: list[ChunkRow], **configs: str) -> int | None:
    retention = Retention(cast(MetadataStore, _Chunks(chunks)), ManualClock(NOW))
    return retention._new_log_start("t", 0, TopicConfig.from_overrides(configs), NOW)


LOG = [_chunk(0, 9, NOW - 5000), _chunk(10, 19, NOW - 3000), _chunk(20, 29, NOW - 1000)]


def test_time_retention_drops_whole_chunks_older_than_retention_ms() -> None:
    assert _new_start(LOG, **{"retention.ms": "4000"}) == 10
    assert _new_start(LOG, **{"retention.ms": "2000"}) == 20
    assert _new_start(LOG, **{"retention.ms": "3000"}) == 10  # exactly retention.ms old is not expired yet
    assert _new_start(LOG, **{"retention.ms": "10000"}) is None  # nothing to drop


def test_when_everything_expired_the_log_starts_after_its_last_offset() -> None:
    assert _new_start(LOG, **{"retention.ms": "500"}) == 30


def test_size_retention_drops_oldest_chunks_but_keeps_the_newest() -> None:
    assert _new_start(LOG, **{"retention.bytes": "200", "retention.ms": "-1"}) == 10
    assert _new_start(LOG, **{"retention.bytes": "150", "retention.ms": "-1"}) == 20
    assert _new_start(LOG, **{"retention.bytes": "0", "retention.ms": "-1"}) == 20  # the active chunk stays
    assert _new_start(LOG, **{"retention.bytes": "300", "retention.ms": "-1"}) is None


def test_no_retention_and_empty_logs_change_nothing() -> None:
    assert _new_start(LOG, **{"retention.bytes": "-1", "retention.ms": "-1"}) is None
    assert _new_start([], **{"retention.ms": "0"}) is None


# --- JobSpec -------------------------------------------------------------------------------------------
def test_job_spec_survives_a_json_round_trip() -> None:
    spec = JobSpec(
        JOB_CLEAN,
        2,
        (InputFile(7, "data/l0/a.strata", 1234, 0), InputFile(9, "data/l1/b.strata", 5678, 1)),
        "c/0: requested",
    )
    stored = json.loads(json.dumps(spec.to_json()))  # as the jobs row keeps it: tuples become lists
    again = JobSpec.from_json(stored)
    assert again == spec
    assert again.file_ids == [7, 9]


def test_job_spec_round_trips_through_the_metadata_store(metadata: MetadataStore, clock: ManualClock) -> None:
    metadata.create_topic("plain", 1, {}, NOW)
    _flush(metadata, clock, [("plain", 0)])
    (f,) = metadata.live_files()
    spec = JobSpec(JOB_MERGE, 1, (InputFile(f.file_id, f.object_key, f.size, f.level),), "test")
    job = metadata.create_job(spec.kind, spec.to_json(), spec.file_ids, NOW)
    assert job is not None
    assert JobSpec.from_json(metadata.get_job(job.job_id).spec) == spec


# --- should_retain (Kafka's shouldRetainRecord) ---------------------------------------------------------
H = NOW - 1  # a delete horizon that has passed


@pytest.mark.parametrize(
    ("offset", "key", "tombstone", "latest", "map_end", "horizon", "drop_ok", "kept"),
    [
        (5, True, False, 9, 20, None, True, False),  # superseded by a later record of its key
        (9, True, False, 9, 20, None, True, True),  # the latest value
        (25, True, False, 30, 20, None, True, True),  # after map_end: pass 1 never saw it
        (5, False, False, -1, 20, None, True, True),  # keyless: never dropped
        (5, True, False, -1, 20, None, True, True),  # key not in the map (a partial map)
        (9, True, True, 9, 20, H, True, False),  # latest tombstone, horizon passed, prefix held
        (9, True, True, 9, 20, H, False, True),  # ... but older values may survive elsewhere
        (9, True, True, 9, 20, None, True, True),  # ... horizon not yet set
        (9, True, True, 9, 20, NOW + 1, True, True),  # ... horizon not yet reached
        (9, True, True, 9, 20, NOW, True, False),  # ... reached exactly
        (5, True, True, 9, 20, None, False, False),  # a superseded tombstone goes like any record
    ],
)
def test_should_retain(
    offset: int,
    key: bool,
    tombstone: bool,
    latest: int,
    map_end: int,
    horizon: int | None,
    drop_ok: bool,
    kept: bool,
) -> None:
    assert should_retain(offset, key, tombstone, latest, map_end, horizon, NOW, drop_ok) is kept


_record = st.tuples(st.integers(0, 40), st.booleans(), st.booleans(), st.integers(-1, 40))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(_record, max_size=30),
    st.integers(-1, 40),
    st.none() | st.sampled_from([NOW - 1, NOW, NOW + 1]),
    st.booleans(),
)
def test_retain_mask_is_should_retain_per_record(
    rows: list[tuple[int, bool, bool, int]], map_end: int, horizon: int | None, drop_ok: bool
) -> None:
    offsets, keyed, tombstone, latest = (
        (np.array(column) for column in zip(*rows, strict=True))
        if rows
        else (
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.bool_),
            np.zeros(0, dtype=np.bool_),
            np.zeros(0, dtype=np.int64),
        )
    )
    mask = retain_mask(
        offsets.astype(np.int64),
        keyed.astype(np.bool_),
        tombstone.astype(np.bool_),
        latest.astype(np.int64),
        map_end,
        horizon,
        NOW,
        drop_ok,
    )
    assert mask.tolist() == [
        should_retain(o, k, t, la, map_end, horizon, NOW, drop_ok) for o, k, t, la in rows
    ]
