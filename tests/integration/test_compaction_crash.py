"""Compaction under crashes, lost leases and concurrent readers.

A "crash" is an exception nothing in Strata catches (``Crash``), raised by a wrapper around the object store
or the metadata store at a chosen step: after an output upload, before or after the metadata commit, before
or during GC. The crashed runner is then abandoned, as a dead process would be, and another
``CompactionRound`` (another lease owner) finishes the work once the lease has expired on a
``SkewedClock``. After every step the whole log, read over HTTP, must be the log before compaction minus
only records compaction may legitimately remove, at unchanged offsets; uploads of the crashed attempt are
orphans that only the orphan collector removes (after its grace), and obsolete inputs go only after the GC
grace.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any, cast

import httpx
import pytest

from planner.gc import ObsoleteCollector, OrphanCollector
from planner.round import CompactionRound, RoundConfig
from planner.runner import RunnerConfig
from planner.stats import JobOutcome
from storage.clock import SkewedClock
from storage.errors import CommitConflict, ObjectNotFound
from storage.keys import DATA_PREFIX
from storage.metadata.base import MetadataStore
from storage.metadata.rows import JOB_DONE, JOB_LEASED
from storage.objectstore.base import ObjectStore
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

COMPACT = {"cleanup.policy": "compact"}
PARTITIONS = 4
LEASE_S = 60  # RoundConfig's default job lease
GC_GRACE_S = 600  # ... obsolete grace
ORPHAN_GRACE_S = 3600  # ... orphan grace

Log = dict[int, list[dict[str, Any]]]


class Crash(Exception):
    """A simulated process death at a chosen step: no Strata code catches it."""


class CrashingStore:
    """An object store whose ``crash_after_put``-th PUT succeeds and then 'kills the process'."""

    def __init__(self, inner: ObjectStore, crash_after_put: int) -> None:
        self.inner = inner
        self.crash_after_put = crash_after_put
        self.uploaded: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)
        self.uploaded.append(key)
        if len(self.uploaded) == self.crash_after_put:
            raise Crash(f"killed after uploading {key}")


class HookedMetadata:
    """Delegates to a real metadata store; a method given a hook runs it once, before or after the call."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.hooks: dict[str, tuple[Callable[[], None] | None, Callable[[], None] | None]] = {}
        self.calls: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}

    def once(
        self,
        method: str,
        *,
        before: Callable[[], None] | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        self.hooks[method] = (before, after)

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.setdefault(name, []).append((args, kwargs))
            before, after = self.hooks.pop(name, (None, None))
            if before is not None:
                before()
            result = target(*args, **kwargs)
            if after is not None:
                after()
            return result

        return call


def crash(what: str) -> Callable[[], None]:
    def hook() -> None:
        raise Crash(what)

    return hook


# --- fixtures and helpers ------------------------------------------------------------------------------
def make_compactor(
    srv: RunningServer,
    owner: str,
    store: Any = None,
    metadata: Any = None,
    output_file_bytes: int = 64 * 1024 * 1024,
) -> CompactionRound:
    rt = srv.runtime
    config = RoundConfig(runner=RunnerConfig(max_output_file_bytes=output_file_bytes))
    return CompactionRound(
        cast(ObjectStore, store if store is not None else rt.store),
        cast(MetadataStore, metadata if metadata is not None else rt.metadata),
        rt.clock,
        random.Random(owner),
        owner=owner,
        config=config,
    )


def produce_updates(srv: RunningServer, topic: str, rounds: list[dict[str, str | None]]) -> None:
    """Each round is one request (so at least one flush each): key -> value (None = tombstone)."""
    for updates in rounds:
        response = srv.produce(topic, [{"key": k, "value": v} for k, v in updates.items()])
        assert response.status_code == 200, response.text


def log_of(srv: RunningServer, topic: str, partitions: int = PARTITIONS) -> Log:
    return {p: srv.read_all(topic, p) for p in range(partitions)}


def offsets_of(srv: RunningServer, topic: str, partitions: int = PARTITIONS) -> list[dict[str, int]]:
    return [srv.client.get(f"/v1/topics/{topic}/partitions/{p}/offsets").json() for p in range(partitions)]


def compacted(log: Log) -> Log:
    """What a complete clean leaves: the last record of every key (tombstones too: their horizon is far)."""
    out: Log = {}
    for partition, recs in log.items():
        last = {r["key"]: r["offset"] for r in recs}
        out[partition] = [r for r in recs if last[r["key"]] == r["offset"]]
    return out


def orphans(srv: RunningServer) -> set[str]:
    keys = [info.key for info in srv.runtime.store.list(DATA_PREFIX)]
    return set(keys) - srv.runtime.metadata.known_object_keys(keys)


def exists(srv: RunningServer, key: str) -> bool:
    try:
        srv.runtime.store.head(key)
    except ObjectNotFound:
        return False
    return True


def setup_topic(srv: RunningServer, topic: str = "state") -> Log:
    """A compacted topic with overwrites and tombstones over several L0 files; returns its log."""
    srv.create_topic(topic, partitions=PARTITIONS, **COMPACT)
    rounds: list[dict[str, str | None]] = [{f"k{k}": f"v{r}.{k}" for k in range(24)} for r in range(4)]
    rounds.append({f"k{k}": None for k in range(0, 24, 5)})  # tombstones
    rounds.append({f"k{k}": f"v9.{k}" for k in range(0, 24, 3)})  # some resurrected
    produce_updates(srv, topic, rounds)
    log = log_of(srv, topic)
    assert sum(map(len, log.values())) == 4 * 24 + 5 + 8
    return log


def assert_consistent(srv: RunningServer, log: Log, hwms: list[dict[str, int]], topic: str = "state") -> None:
    """The log over HTTP is ``log`` exactly, and no partition's offsets moved."""
    assert log_of(srv, topic) == log
    assert offsets_of(srv, topic) == hwms


# --- crashes at every step -----------------------------------------------------------------------------
@pytest.mark.parametrize("step", ["after_output_put", "before_commit"])
def test_crash_before_the_commit_changes_nothing_and_another_worker_finishes_the_job(
    srv: RunningServer, clock: SkewedClock, step: str
) -> None:
    before = setup_topic(srv)
    hwms = offsets_of(srv, "state")
    store = CrashingStore(srv.runtime.store, crash_after_put=1 if step == "after_output_put" else 0)
    meta = HookedMetadata(srv.runtime.metadata)
    if step == "before_commit":
        meta.once("commit_compaction", before=crash("killed before the commit"))
    # Tiny output files: one per partition, so "after the first PUT" is mid-job.
    a = make_compactor(srv, "worker-a", store=store, metadata=meta, output_file_bytes=1)
    with pytest.raises(Crash):
        a.run_once("state", force=True)

    # Nothing visible changed; the job is still leased by the dead worker; its uploads are orphans.
    assert_consistent(srv, before, hwms)
    (job,) = srv.runtime.metadata.active_jobs()
    assert (job.state, job.lease_owner, job.attempts) == (JOB_LEASED, "worker-a", 1)
    left_behind = orphans(srv)
    if step == "after_output_put":
        assert left_behind == set(store.uploaded)
        assert len(left_behind) == 1
    else:
        assert len(left_behind) >= 2  # every output was uploaded before the commit was attempted

    # Another worker cannot take the job while the lease runs, nor plan a new one over the claimed files.
    b = make_compactor(srv, "worker-b")
    early = b.run_once("state", force=True)
    assert early.planned == []
    assert early.jobs == []
    clock.advance(LEASE_S + 1)
    result = b.run_once("state", force=True)
    ((rerun, stats),) = result.jobs
    assert rerun.job_id == job.job_id
    assert stats.outcome == "committed"
    done = srv.runtime.metadata.get_job(job.job_id)
    assert (done.state, done.lease_owner, done.attempts) == (JOB_DONE, "worker-b", 2)
    expected = compacted(before)
    assert_consistent(srv, expected, hwms)

    # The crashed attempt's uploads stay until the orphan grace; the inputs until the GC grace.
    job_inputs = job.spec["inputs"]
    assert isinstance(job_inputs, list)
    inputs = [str(f["object_key"]) for f in job_inputs]
    assert all(exists(srv, key) for key in inputs)
    assert orphans(srv) == left_behind
    clock.advance(GC_GRACE_S)
    assert b.obsolete.run_once() == len(inputs)
    assert not any(exists(srv, key) for key in inputs)
    assert b.orphans.run_once().orphans_deleted == 0
    assert orphans(srv) == left_behind
    clock.advance(ORPHAN_GRACE_S)
    assert b.orphans.run_once().orphans_deleted == len(left_behind)
    assert orphans(srv) == set()

    # Everything still reads; running again is idempotent.
    assert_consistent(srv, expected, hwms)
    assert b.run_once("state", force=True).jobs == []
    assert_consistent(srv, expected, hwms)


def test_commit_whose_reply_is_lost_is_not_run_again(srv: RunningServer, clock: SkewedClock) -> None:
    before = setup_topic(srv)
    hwms = offsets_of(srv, "state")
    meta = HookedMetadata(srv.runtime.metadata)
    meta.once("commit_compaction", after=crash("killed after the commit, before its reply"))
    a = make_compactor(srv, "worker-a", metadata=meta)
    with pytest.raises(Crash):
        a.run_once("state", force=True)

    expected = compacted(before)
    assert_consistent(srv, expected, hwms)
    ((args, kwargs),) = meta.calls["commit_compaction"]
    job = srv.runtime.metadata.get_job(args[0])
    assert (job.state, job.lease_owner) == (JOB_DONE, "worker-a")
    assert orphans(srv) == set()  # its output is committed: not an orphan

    # A retry of the very same commit (the caller cannot know it went through) is a no-op...
    srv.runtime.metadata.commit_compaction(*args, **kwargs)
    assert_consistent(srv, expected, hwms)
    # ...but the same commit by anyone else is a conflict.
    other_args = (args[0], "worker-b", *args[2:])
    with pytest.raises(CommitConflict):
        srv.runtime.metadata.commit_compaction(*other_args, **kwargs)

    # Once the lease would have expired, nobody runs the job again, and there is nothing left to plan.
    clock.advance(LEASE_S + 1)
    b = make_compactor(srv, "worker-b")
    result = b.run_once("state", force=True)
    assert result.planned == []
    assert result.jobs == []
    assert srv.runtime.metadata.active_jobs() == []
    clock.advance(ORPHAN_GRACE_S)
    b.run_once()
    assert_consistent(srv, expected, hwms)


def test_crash_before_gc_and_during_gc(srv: RunningServer, clock: SkewedClock) -> None:
    before = setup_topic(srv)
    hwms = offsets_of(srv, "state")
    expected = compacted(before)
    meta = HookedMetadata(srv.runtime.metadata)
    meta.once("obsolete_files", before=crash("killed before GC"))
    a = make_compactor(srv, "worker-a", metadata=meta)
    with pytest.raises(Crash):
        a.run_once("state", force=True)  # the job committed; the process died before GC
    assert_consistent(srv, expected, hwms)
    ((args, _),) = meta.calls["commit_compaction"]
    job_inputs = srv.runtime.metadata.get_job(args[0]).spec["inputs"]
    assert isinstance(job_inputs, list)
    obsolete = [str(f["object_key"]) for f in job_inputs]
    live = {f.object_key for f in srv.runtime.metadata.live_files()}
    assert live
    assert not live & set(obsolete)
    assert all(exists(srv, key) for key in obsolete)

    # GC before the grace deletes nothing; readers are unaffected.
    gc = ObsoleteCollector(srv.runtime.store, srv.runtime.metadata, clock, GC_GRACE_S * 1000)
    assert gc.run_once() == 0
    assert all(exists(srv, key) for key in obsolete)

    # A GC that dies between deleting the objects and forgetting their rows is simply repeated.
    clock.advance(GC_GRACE_S + 1)
    meta.once("forget_files", before=crash("killed during GC"))
    crashing_gc = ObsoleteCollector(srv.runtime.store, cast(MetadataStore, meta), clock, GC_GRACE_S * 1000)
    with pytest.raises(Crash):
        crashing_gc.run_once()
    assert not any(exists(srv, key) for key in obsolete)
    assert set(srv.runtime.metadata.known_object_keys(obsolete)) == set(obsolete)  # rows still there
    assert gc.run_once() == len(obsolete)  # deleting a missing object is not an error
    assert srv.runtime.metadata.known_object_keys(obsolete) == set()
    assert_consistent(srv, expected, hwms)
    # Orphan GC never touches committed files.
    clock.advance(ORPHAN_GRACE_S + 1)
    assert OrphanCollector(srv.runtime.store, srv.runtime.metadata, clock, 0).run_once().orphans_deleted == 0
    assert_consistent(srv, expected, hwms)


# --- lost leases -----------------------------------------------------------------------------------------
def test_worker_whose_lease_was_taken_cannot_commit(srv: RunningServer, clock: SkewedClock) -> None:
    """Commit path: B leases the expired job just before A commits; A's commit is a conflict."""
    before = setup_topic(srv)
    hwms = offsets_of(srv, "state")
    meta = HookedMetadata(srv.runtime.metadata)
    b = make_compactor(srv, "worker-b")
    taken: list[Any] = []

    def b_takes_over() -> None:
        clock.advance(LEASE_S + 1)  # A stalled (a GC pause) past its lease
        taken.append(srv.runtime.metadata.lease_job("worker-b", clock.now_ms(), 60_000))

    meta.once("commit_compaction", before=b_takes_over)
    a = make_compactor(srv, "worker-a", metadata=meta)
    result = a.run_once("state", force=True)
    ((job, stats),) = result.jobs
    assert stats.outcome == JobOutcome.ABANDONED
    (b_job,) = taken
    assert b_job is not None
    assert b_job.job_id == job.job_id
    assert srv.runtime.metadata.get_job(job.job_id).state == JOB_LEASED  # A could not mark it failed
    assert_consistent(srv, before, hwms)  # nothing of A's attempt is visible
    a_outputs = orphans(srv)
    assert len(a_outputs) == 1

    stats_b = b.runner.run(b_job)
    assert stats_b.outcome == "committed"
    assert_consistent(srv, compacted(before), hwms)
    assert orphans(srv) == a_outputs  # A's upload stays an orphan, collected after the orphan grace
    clock.advance(ORPHAN_GRACE_S)
    assert b.orphans.run_once().orphans_deleted == 1
    assert_consistent(srv, compacted(before), hwms)


def test_worker_that_lost_its_lease_stops_at_the_heartbeat(srv: RunningServer, clock: SkewedClock) -> None:
    """Heartbeat path: B leased the expired job and committed it; A's last heartbeat says LeaseLost."""
    before = setup_topic(srv)
    hwms = offsets_of(srv, "state")
    b = make_compactor(srv, "worker-b")
    b_result: list[Any] = []

    def b_runs_the_job() -> None:
        clock.advance(LEASE_S + 1)
        b_result.extend(b.run_jobs())

    meta = HookedMetadata(srv.runtime.metadata)
    meta.once("heartbeat_job", before=b_runs_the_job)  # the forced heartbeat just before A's commit
    a = make_compactor(srv, "worker-a", metadata=meta)
    ((job, stats),) = a.run_once("state", force=True).jobs
    assert stats.outcome == JobOutcome.ABANDONED
    assert "lease" in stats.reason
    assert "commit_compaction" not in meta.calls  # A never tried to commit
    ((b_job, b_stats),) = b_result
    assert b_job.job_id == job.job_id
    assert b_stats.outcome == "committed"
    final = srv.runtime.metadata.get_job(job.job_id)
    assert (final.state, final.lease_owner, final.attempts) == (JOB_DONE, "worker-b", 2)
    assert_consistent(srv, compacted(before), hwms)
    assert len(orphans(srv)) == 1  # A's output only


# --- concurrent readers ----------------------------------------------------------------------------------
class Acked:
    """What producers were told, shared with the reader threads: key -> (partition, offset, value)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latest: dict[str, tuple[int, int]] = {}
        self.values: dict[tuple[int, int], tuple[str, str | None]] = {}

    def record(self, recs: list[dict[str, Any]], offsets: list[dict[str, int]]) -> None:
        with self.lock:
            for rec, at in zip(recs, offsets, strict=True):
                self.latest[rec["key"]] = (at["partition"], at["offset"])
                self.values[(at["partition"], at["offset"])] = (rec["key"], rec["value"])

    def snapshot(self) -> dict[str, tuple[int, int]]:
        with self.lock:
            return dict(self.latest)


def read_partition(client: httpx.Client, topic: str, partition: int) -> list[dict[str, Any]]:
    """Every record from 0 in small fetches (many steps, so compactions land between them)."""
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        response = client.get(
            f"/v1/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_wait_ms": 0, "max_bytes": 600},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["log_start_offset"] == 0
        out += body["records"]
        if body["next_offset"] >= body["high_watermark"]:
            return out
        assert body["next_offset"] > offset, "fetch made no progress"
        offset = body["next_offset"]


def reader(
    url: str, acked: Acked, stop: threading.Event, errors: list[BaseException], reads: list[int]
) -> None:
    try:
        with httpx.Client(base_url=url, timeout=30) as client:
            while not stop.is_set():
                wanted = acked.snapshot()
                seen: dict[str, tuple[int, int]] = {}
                for partition in range(PARTITIONS):
                    recs = read_partition(client, "live", partition)
                    offsets = [r["offset"] for r in recs]
                    assert offsets == sorted(set(offsets)), f"offsets not strictly increasing: {offsets}"
                    for rec in recs:
                        seen[rec["key"]] = (partition, rec["offset"])
                        with acked.lock:
                            known = acked.values.get((partition, rec["offset"]))
                        # A record may be visible before its producer got the ack; if acked, it must match.
                        assert known is None or known == (rec["key"], rec["value"]), (rec, known)
                for key, (partition, offset) in wanted.items():
                    got = seen.get(key)
                    assert got is not None, f"{key} (acked at {partition}/{offset}) is missing"
                    assert got[0] == partition, (key, got, partition)
                    assert got[1] >= offset, f"{key}: saw offset {got[1]}, older than the acked {offset}"
                reads.append(len(seen))
    except BaseException as exc:  # noqa: BLE001 - reported to the main thread
        errors.append(exc)


def test_reads_during_compaction_and_gc_see_every_latest_value(
    srv: RunningServer, clock: SkewedClock
) -> None:
    srv.create_topic("live", partitions=PARTITIONS, **COMPACT)
    acked = Acked()
    rng = random.Random(11)
    stop = threading.Event()
    errors: list[BaseException] = []
    reads: list[int] = []
    c = make_compactor(srv, "worker")
    threads = [
        threading.Thread(target=reader, args=(srv.url, acked, stop, errors, reads), daemon=True)
        for _ in range(3)
    ]

    def produce_round(n: int) -> None:
        recs: list[dict[str, Any]] = []
        for k in rng.sample(range(60), 25):
            value = None if rng.random() < 0.1 else f"k{k}@{n}"
            recs.append({"key": f"k{k}", "value": value})
        response = srv.produce("live", recs)
        assert response.status_code == 200, response.text
        acked.record(recs, response.json()["offsets"])

    try:
        produce_round(0)
        for thread in threads:
            thread.start()
        for n in range(1, 13):
            produce_round(n)
            if n % 2 == 0:
                c.run_once("live", force=True)  # clean, merge, GC (grace longer than the test)
            if n % 5 == 0:
                c.run_once()  # the background round: merges of L0 and L1
            assert not errors, errors
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not errors, errors[0]
    assert len(reads) >= 3
    # Everything acked is there, compacted, and GC deletes the replaced files only after its grace.
    final = log_of(srv, "live")
    assert sum(map(len, final.values())) < len(acked.values)  # compaction removed records meanwhile
    assert {r["key"]: r["value"] for recs in final.values() for r in recs} == {
        key: acked.values[at][1] for key, at in acked.snapshot().items()
    }
    assert c.obsolete.run_once() == 0
    clock.advance(GC_GRACE_S + 1)
    assert c.obsolete.run_once() > 0
    assert log_of(srv, "live") == final
