"""Retention (retention.ms, retention.bytes, compact,delete) and garbage collection, end to end.

Time is a ``SkewedClock``: the agent, retention and GC see a wall clock the test jumps forward, so
"older than retention.ms" and "past the grace period" need no sleeping.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, cast

import pytest

from planner.gc import ObsoleteCollector, OrphanCollector
from planner.retention import Retention
from planner.round import CompactionRound
from planner.stats import JobOutcome
from storage.clock import SkewedClock
from storage.errors import ObjectNotFound
from storage.keys import DATA_PREFIX, new_object_key
from storage.metadata.base import MetadataStore
from storage.metadata.rows import (
    FILE_OBSOLETE,
    CleanedUpTo,
    CompactionOutput,
    FileRow,
    FileState,
    Job,
    JobReport,
)
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

GC_GRACE_MS = 600_000
ORPHAN_GRACE_MS = 3_600_000
COMPACT_DELETE: dict[str, Any] = {"cleanup.policy": "compact,delete", "retention.ms": 60_000}


def compactor(srv: RunningServer) -> CompactionRound:
    rt = srv.runtime
    return CompactionRound(rt.store, rt.metadata, rt.clock, random.Random(3), owner="test-worker")


def produce(srv: RunningServer, topic: str, recs: list[dict[str, Any]]) -> list[int]:
    response = srv.produce(topic, recs)
    assert response.status_code == 200, response.text
    return [o["offset"] for o in response.json()["offsets"]]


def offsets(srv: RunningServer, topic: str, partition: int) -> dict[str, int]:
    response = srv.client.get(f"/v1/topics/{topic}/partitions/{partition}/offsets")
    assert response.status_code == 200, response.text
    body: dict[str, int] = response.json()
    return body


def assert_out_of_range(srv: RunningServer, topic: str, partition: int, offset: int) -> None:
    state = offsets(srv, topic, partition)
    response = srv.fetch(topic, partition, offset)
    assert response.status_code == 416, response.text
    body = response.json()
    assert body["error_code"] == 41601
    assert f"{state['log_start_offset']}..{state['high_watermark']}" in body["message"]


def exists(srv: RunningServer, key: str) -> bool:
    try:
        srv.runtime.store.head(key)
    except ObjectNotFound:
        return False
    return True


def file_of(srv: RunningServer, key: str) -> FileRow | None:
    rows = [f for f in srv.runtime.metadata.live_files() if f.object_key == key]
    return rows[0] if rows else None


def file_states(srv: RunningServer, keys: Sequence[str]) -> dict[str, FileState]:
    return srv.runtime.metadata.file_states(keys)


def input_file_ids(job: Job) -> list[int]:
    inputs = job.spec["inputs"]
    assert isinstance(inputs, list)
    return sorted(int(f["file_id"]) for f in inputs)


def orphans(srv: RunningServer) -> set[str]:
    keys = [info.key for info in srv.runtime.store.list(DATA_PREFIX)]
    return set(keys) - srv.runtime.metadata.known_object_keys(keys)


class RetentionDuringCommit:
    """A metadata store on which ``hook`` runs just before the next compaction commit."""

    def __init__(self, inner: MetadataStore, hook: Callable[[], object]) -> None:
        self.inner = inner
        self.hook: Callable[[], object] | None = hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit_compaction(
        self,
        job_id: int,
        owner: str,
        input_chunk_ids: Sequence[int],
        outputs: Sequence[CompactionOutput],
        cleaned: Sequence[CleanedUpTo],
        now_ms: int,
        report: JobReport | None = None,
    ) -> None:
        if self.hook is not None:
            self.hook()
            self.hook = None
        self.inner.commit_compaction(job_id, owner, input_chunk_ids, outputs, cleaned, now_ms, report)


def assert_live_chunks_readable(srv: RunningServer) -> None:
    """GC from the reader's side: every live chunk's object exists."""
    meta = srv.runtime.metadata
    for topic in meta.list_topics():
        for state in meta.partition_states(topic):
            for fc in meta.partition_chunks(topic, state.partition):
                assert exists(srv, fc.chunk.object_key), fc


# --- retention -----------------------------------------------------------------------------------------
def test_retention_ms_advances_log_start_and_older_offsets_are_416(
    srv: RunningServer, clock: SkewedClock
) -> None:
    srv.create_topic("events", partitions=2, **{"retention.ms": 60_000})
    for r in range(3):
        produce(srv, "events", [{"key": f"k{i}", "value": f"old{r}", "partition": i % 2} for i in range(6)])
    old_files = {f.object_key for f in srv.runtime.metadata.live_files()}
    assert len(old_files) == 3
    clock.advance(61)
    new = produce(srv, "events", [{"key": f"k{i}", "value": "new", "partition": i % 2} for i in range(6)])
    assert new == [9, 9, 10, 10, 11, 11]

    result = Retention(srv.runtime.metadata, clock).run_once()
    assert (result.partitions_trimmed, result.chunks_dropped) == (2, 6)
    for partition in (0, 1):
        assert offsets(srv, "events", partition) == {
            "log_start_offset": 9,
            "high_watermark": 12,
            "last_stable_offset": 12,
        }
        assert [r["value"] for r in srv.read_all("events", partition, 9)] == ["new"] * 3
        for below in (0, 8):
            assert_out_of_range(srv, "events", partition, below)
        body = srv.fetch("events", partition, 9).json()
        assert body["log_start_offset"] == 9
    # Running it again changes nothing.
    assert Retention(srv.runtime.metadata, clock).run_once().chunks_dropped == 0

    # The old files lost every chunk: obsolete now, deleted only after the GC grace.
    states = file_states(srv, sorted(old_files))
    assert {s.state for s in states.values()} == {FILE_OBSOLETE}
    gc = ObsoleteCollector(srv.runtime.store, srv.runtime.metadata, clock, GC_GRACE_MS)
    assert gc.run_once() == 0
    assert all(exists(srv, key) for key in old_files)
    clock.advance(GC_GRACE_MS / 1000 - 5)
    assert gc.run_once() == 0
    clock.advance(6)
    assert gc.run_once() == 3
    assert not any(exists(srv, key) for key in old_files)
    assert srv.runtime.metadata.known_object_keys(list(old_files)) == set()
    assert_live_chunks_readable(srv)
    assert [r["value"] for r in srv.read_all("events", 0, 9)] == ["new"] * 3


def test_retention_bytes_keeps_each_partition_under_its_bound(srv: RunningServer) -> None:
    srv.create_topic("sized", partitions=1)
    for r in range(8):
        produce(srv, "sized", [{"key": f"k{i}", "value": f"{r}" * 100} for i in range(10)])
    meta = srv.runtime.metadata
    chunks = [fc.chunk for fc in meta.partition_chunks("sized", 0)]
    assert len(chunks) == 8
    bound = sum(c.length for c in chunks[-3:]) + chunks[0].length // 2  # room for 3 chunks, not 4
    response = srv.client.patch("/v1/topics/sized/configs", json={"configs": {"retention.bytes": str(bound)}})
    assert response.status_code == 200, response.text

    retention = Retention(meta, srv.runtime.clock)
    assert retention.run_once().chunks_dropped == 5
    (stats,) = meta.partition_stats("sized")
    assert stats.live_bytes <= bound < stats.live_bytes + chunks[4].length  # dropped no more than needed
    assert stats.chunk_count == 3
    assert offsets(srv, "sized", 0) == {
        "log_start_offset": 50,
        "high_watermark": 80,
        "last_stable_offset": 80,
    }
    assert [r["offset"] for r in srv.read_all("sized", 0, 50)] == list(range(50, 80))
    assert_out_of_range(srv, "sized", 0, 49)

    # A bound smaller than one chunk keeps the newest chunk, as Kafka keeps the active segment.
    srv.client.patch("/v1/topics/sized/configs", json={"configs": {"retention.bytes": "1"}})
    assert retention.run_once().chunks_dropped == 2
    assert offsets(srv, "sized", 0) == {
        "log_start_offset": 70,
        "high_watermark": 80,
        "last_stable_offset": 80,
    }
    assert [r["value"] for r in srv.read_all("sized", 0, 70)] == ["7" * 100] * 10
    assert retention.run_once().chunks_dropped == 0


def test_compact_delete_topic_is_both_deduplicated_and_trimmed(
    srv: RunningServer, clock: SkewedClock
) -> None:
    srv.create_topic("both", **COMPACT_DELETE)
    for r in range(3):
        produce(srv, "both", [{"key": f"k{i}", "value": f"a{r}"} for i in range(10)])
    c = compactor(srv)
    c.run_once("both", force=True)
    assert [(r["key"], r["value"], r["offset"]) for r in srv.read_all("both", 0)] == [
        (f"k{i}", "a2", 20 + i) for i in range(10)
    ]

    clock.advance(61)  # the compacted old data is now past retention.ms
    for r in range(2):
        produce(srv, "both", [{"key": f"k{i}", "value": f"b{r}"} for i in range(5)])
    result = c.run_once("both", force=True)  # retention first, then the clean of the new data
    assert result.retention.chunks_dropped >= 1
    assert offsets(srv, "both", 0) == {"log_start_offset": 30, "high_watermark": 40, "last_stable_offset": 40}
    assert [(r["key"], r["value"], r["offset"]) for r in srv.read_all("both", 0, 30)] == [
        (f"k{i}", "b1", 35 + i) for i in range(5)
    ]
    assert_out_of_range(srv, "both", 0, 29)
    # Nothing is deleted before the GC grace; afterwards only unreferenced files go.
    assert c.obsolete.run_once() == 0
    clock.advance(GC_GRACE_MS / 1000 + 1)
    assert c.obsolete.run_once() > 0
    assert_live_chunks_readable(srv)
    assert [r["value"] for r in srv.read_all("both", 0, 30)] == ["b1"] * 5


def test_retention_during_a_compaction_job_makes_its_commit_conflict(
    srv: RunningServer, clock: SkewedClock
) -> None:
    srv.create_topic("both", **COMPACT_DELETE)
    for r in range(3):
        produce(srv, "both", [{"key": f"k{i}", "value": f"a{r}"} for i in range(4)])
    clock.advance(61)
    for r in range(2):
        produce(srv, "both", [{"key": f"k{i}", "value": f"b{r}"} for i in range(4)])
    rt = srv.runtime
    retention = Retention(rt.metadata, clock)
    meta = RetentionDuringCommit(rt.metadata, retention.run_once)
    c = CompactionRound(rt.store, cast(MetadataStore, meta), clock, random.Random(4), owner="w")
    (job,) = c.planner.plan("both", force=True)  # claims all five files; retention has not run yet
    ((ran, stats),) = c.run_jobs()  # retention drops three of its input chunks just before the commit
    assert ran.job_id == job.job_id
    assert stats.outcome == JobOutcome.ABANDONED
    assert rt.metadata.get_job(job.job_id).state == "failed"
    assert offsets(srv, "both", 0) == {"log_start_offset": 12, "high_watermark": 20, "last_stable_offset": 20}
    assert [r["value"] for r in srv.read_all("both", 0, 12)] == ["b0"] * 4 + ["b1"] * 4  # not compacted
    assert len(orphans(srv)) == 1  # the abandoned output
    assert_live_chunks_readable(srv)

    # The next round plans again and succeeds; the old files and the orphan go after their graces.
    assert [s.outcome for _, s in c.run_once("both", force=True).jobs] == ["committed"]
    assert [(r["offset"], r["value"]) for r in srv.read_all("both", 0, 12)] == [
        (16 + i, "b1") for i in range(4)
    ]
    clock.advance(ORPHAN_GRACE_MS / 1000 + 1)
    assert c.obsolete.run_once() == 5
    assert c.orphans.run_once().orphans_deleted == 1
    assert orphans(srv) == set()
    assert_live_chunks_readable(srv)


# --- GC ------------------------------------------------------------------------------------------------
def test_obsolete_files_go_only_after_the_grace_and_never_while_referenced(
    srv: RunningServer, clock: SkewedClock
) -> None:
    srv.create_topic("t", partitions=2, **{"retention.ms": 60_000})
    meta = srv.runtime.metadata
    old = clock.now_ms() - 120_000
    # F1: an expired chunk of partition 0 and a fresh one of partition 1, in one file.
    produce(
        srv,
        "t",
        [
            {"key": "a", "value": "old", "partition": 0, "timestamp": old},
            {"key": "b", "value": "p1", "partition": 1},
        ],
    )
    (f1,) = meta.live_files()
    produce(srv, "t", [{"key": "a", "value": "old2", "partition": 0, "timestamp": old}])  # F2: expired only
    produce(srv, "t", [{"key": "a", "value": "new", "partition": 0}])  # F3: fresh
    f2, f3 = (f for f in meta.live_files() if f.file_id != f1.file_id)

    c = compactor(srv)
    assert c.retention.run_once().chunks_dropped == 2
    assert offsets(srv, "t", 0) == {"log_start_offset": 2, "high_watermark": 3, "last_stable_offset": 3}
    assert file_of(srv, f1.object_key) is not None  # still referenced by partition 1
    assert file_of(srv, f2.object_key) is None  # obsolete
    assert c.obsolete.run_once() == 0
    clock.advance(GC_GRACE_MS / 1000 + 1)
    assert c.obsolete.run_once() == 1
    assert not exists(srv, f2.object_key)
    assert exists(srv, f1.object_key)
    assert exists(srv, f3.object_key)
    assert [r["value"] for r in srv.read_all("t", 1)] == ["p1"]

    # A job claims F1 and F3 (L0 is old enough to merge); then F1 loses its last chunk while claimed.
    job = c.planner._merge(0)
    assert job is not None
    assert input_file_ids(job) == [f1.file_id, f3.file_id]
    assert meta.apply_retention("t", 1, 1, clock.now_ms()) == 1
    assert file_states(srv, [f1.object_key])[f1.object_key].state == FILE_OBSOLETE
    clock.advance(GC_GRACE_MS / 1000 + 1)
    assert c.obsolete.run_once() == 0  # past its grace, but a worker may be reading it
    assert exists(srv, f1.object_key)

    ((ran, stats),) = c.run_jobs()
    assert ran.job_id == job.job_id
    assert stats.outcome == "committed"
    assert c.obsolete.run_once() == 1  # F1: its claim is released and its grace long past
    assert not exists(srv, f1.object_key)
    assert exists(srv, f3.object_key)  # obsolete only since the merge committed
    clock.advance(GC_GRACE_MS / 1000 + 1)
    assert c.obsolete.run_once() == 1
    assert not exists(srv, f3.object_key)
    assert_live_chunks_readable(srv)
    assert [(r["offset"], r["value"]) for r in srv.read_all("t", 0, 2)] == [(2, "new")]


def test_orphans_go_only_after_the_orphan_grace(srv: RunningServer, clock: SkewedClock) -> None:
    srv.create_topic("t")
    produce(srv, "t", [{"key": "k", "value": "v"}])
    store = srv.runtime.store
    orphan = new_object_key(0, clock, random.Random(5))
    store.put(orphan, b"an upload whose commit never happened")
    committed = {info.key for info in store.list(DATA_PREFIX)} - {orphan}
    assert len(committed) == 1

    gc = OrphanCollector(store, srv.runtime.metadata, clock, ORPHAN_GRACE_MS)
    assert gc.run_once().orphans_deleted == 0
    clock.advance(ORPHAN_GRACE_MS / 1000 - 60)
    assert gc.run_once().orphans_deleted == 0
    assert exists(srv, orphan)
    clock.advance(120)
    stats = gc.run_once()
    assert (stats.scanned, stats.orphans_deleted) == (2, 1)
    assert not exists(srv, orphan)
    assert {info.key for info in store.list(DATA_PREFIX)} == committed  # committed files are never orphans
    assert [r["value"] for r in srv.read_all("t", 0)] == ["v"]
