"""The metadata store's compaction and retention API against real databases (SQLite and PostgreSQL).

What these tests guard: a compaction swap is all or nothing and only happens while its job's lease and
its inputs are intact (compare-and-set); it never changes an offset, so a partition's chunk rows keep
covering each offset at most once, even while flushes commit at the same time; a file becomes obsolete
exactly when its last live chunk goes; and a file is in at most one active job (docs/architecture.md,
Invariants).
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import psycopg
import pytest

from storage.errors import ClaimRefused, CommitConflict, LeaseLost, UnknownPartition, UnknownTopic
from storage.metadata import (
    FILE_LIVE,
    FILE_OBSOLETE,
    JOB_DONE,
    JOB_FAILED,
    JOB_LEASED,
    JOB_PENDING,
    LEVEL_INGEST,
    CleanedUpTo,
    CompactionOutput,
    FileChunk,
    FileRow,
    Job,
    MetadataStore,
    NewChunk,
    NewCompactedChunk,
    NewFile,
    PartitionStats,
    UnknownJob,
    open_metadata_store,
    schema,
    sqlite_path,
)
from storage.metadata.postgres import PostgresBackend
from storage.metadata.sql import Backend, FileState, SqlMetadataStore, Tx
from storage.metadata.sqlite import SqliteBackend
from tests.fixtures.metadata import lock_waiters

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
LEASE_MS = 30_000


def new_file(level: int = LEVEL_INGEST, created_ms: int = NOW) -> NewFile:
    return NewFile(f"L{level}/{uuid.uuid4().hex}", size=4096, level=level, created_ms=created_ms)


def chunk(topic: str, partition: int, count: int, position: int = 0, max_ts: int = NOW) -> NewChunk:
    return NewChunk(
        topic=topic,
        partition=partition,
        record_count=count,
        position=position,
        length=100 * count,
        min_timestamp=max_ts - 5,
        max_timestamp=max_ts,
        crc=0xFFFF_FFFF,
    )


def flush(store: MetadataStore, *chunks: NewChunk, file: NewFile | None = None) -> int:
    """Commit one flush file; returns its file id."""
    file = file or new_file()
    store.commit_flush(file, chunks, [], NOW)
    return file_id_of(store, file.object_key)


def file_id_of(store: MetadataStore, object_key: str) -> int:
    ids = [f.file_id for f in store.live_files() if f.object_key == object_key]
    assert len(ids) == 1, f"{object_key} is not one live file"
    return ids[0]


def sql_store(store: MetadataStore) -> SqlMetadataStore:
    assert isinstance(store, SqlMetadataStore)
    return store


def merged(chunks: Sequence[FileChunk], level: int = 1, drop: int = 0) -> CompactionOutput:
    """One output file with one chunk per partition spanning that partition's input chunks.

    ``drop`` records per partition are treated as removed by dedup (the chunk then has holes).
    """
    by_partition: dict[tuple[str, int], list[FileChunk]] = {}
    for fc in chunks:
        by_partition.setdefault((fc.chunk.topic, fc.chunk.partition), []).append(fc)
    out: list[NewCompactedChunk] = []
    position = 0
    for (topic, partition), group in sorted(by_partition.items()):
        rows = [fc.chunk for fc in group]
        count = sum(r.record_count for r in rows) - drop
        base, last = min(r.base_offset for r in rows), max(r.last_offset for r in rows)
        length = 100 * count
        out.append(
            NewCompactedChunk(
                topic=topic,
                partition=partition,
                base_offset=base,
                last_offset=last,
                record_count=count,
                position=position,
                length=length,
                min_timestamp=min(r.min_timestamp for r in rows),
                max_timestamp=max(r.max_timestamp for r in rows),
                crc=7,
                has_holes=count < last - base + 1,
            )
        )
        position += length
    return CompactionOutput(new_file(level), out)


def leased_job(store: MetadataStore, file_ids: Sequence[int], owner: str = "w1", now: int = NOW) -> Job:
    job = store.create_job("compact", {"files": list(file_ids)}, file_ids, now)
    leased = store.lease_job(owner, now, LEASE_MS)
    assert leased is not None
    assert leased.job_id == job.job_id
    return leased


def spans(store: MetadataStore, topic: str, partition: int) -> list[tuple[int, int, int]]:
    return [
        (fc.chunk.base_offset, fc.chunk.last_offset, fc.chunk.record_count)
        for fc in store.partition_chunks(topic, partition)
    ]


def assert_no_overlap_and_complete(store: MetadataStore, topic: str, partition: int) -> None:
    """Chunk spans tile [log_start, high_watermark) exactly: every offset once, none twice."""
    state = store.partition_state(topic, partition)
    expected = state.log_start_offset
    for base, last, _ in spans(store, topic, partition):
        assert base == expected, f"{topic}/{partition}: gap or overlap at {base}, expected {expected}"
        expected = last + 1
    assert expected == state.high_watermark


# --- what the planner reads -------------------------------------------------------------------------------


def test_partition_stats_dirty_bytes_follow_the_cleaned_offset(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("t", 2, {}, NOW)
    store.create_topic("u", 1, {}, NOW)
    f1 = flush(store, chunk("t", 0, 3, max_ts=NOW + 1), chunk("t", 1, 2, position=300))  # t/0: 0-2
    f2 = flush(store, chunk("t", 0, 2, max_ts=NOW + 2))  # t/0: 3-4

    # The chunk helper stamps min_timestamp = max_timestamp - 5: the oldest dirty *record* is NOW + 1 - 5.
    assert store.partition_stats() == [
        PartitionStats("t", 0, 0, 5, 0, None, 500, 500, 2, NOW + 1, 5, NOW - 4),
        PartitionStats("t", 1, 0, 2, 0, None, 200, 200, 1, NOW, 2, NOW - 5),
        PartitionStats("u", 0, 0, 0, 0, None, 0, 0, 0, None, 0, None),
    ]
    assert [s.partition for s in store.partition_stats("t")] == [0, 1]
    with pytest.raises(UnknownTopic):
        store.partition_stats("nope")

    # Only the checkpoint moves (a job with no inputs): offsets 0-2 are clean, chunk 3-4 stays dirty.
    job = leased_job(store, [])
    store.commit_compaction(job.job_id, "w1", [], [], [CleanedUpTo("t", 0, 3)], NOW + 50)
    stats = store.partition_stats("t")[0]
    assert (stats.cleaned_offset, stats.last_compaction_ms) == (3, NOW + 50)
    assert (stats.live_bytes, stats.dirty_bytes, stats.chunk_count) == (500, 200, 2)
    assert stats.oldest_dirty_timestamp == NOW + 2
    assert (stats.dirty_records, stats.earliest_dirty_timestamp) == (2, NOW - 3)  # the dirty chunk only

    # Compacting everything up to the high watermark leaves nothing dirty; a later flush is dirty again.
    job = leased_job(store, [f1, f2])
    inputs = store.partition_chunks("t", 0)
    store.commit_compaction(
        job.job_id,
        "w1",
        [fc.chunk.chunk_id for fc in inputs],
        [merged(inputs)],
        [CleanedUpTo("t", 0, 5)],
        NOW,
    )
    stats = store.partition_stats("t")[0]
    assert (stats.cleaned_offset, stats.dirty_bytes, stats.oldest_dirty_timestamp) == (5, 0, None)
    assert (stats.dirty_records, stats.earliest_dirty_timestamp) == (0, None)
    assert (stats.live_bytes, stats.chunk_count) == (500, 1)
    flush(store, chunk("t", 0, 1, max_ts=NOW + 9))
    stats = store.partition_stats("t")[0]
    assert (stats.dirty_bytes, stats.oldest_dirty_timestamp, stats.high_watermark) == (100, NOW + 9, 6)

    # The checkpoint never moves backwards.
    job = leased_job(store, [])
    store.commit_compaction(job.job_id, "w1", [], [], [CleanedUpTo("t", 0, 1)], NOW + 60)
    assert store.partition_stats("t")[0].cleaned_offset == 5
    assert store.partition_stats("t")[0].last_compaction_ms == NOW + 60


def test_files_chunks_and_levels(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("t", 2, {}, NOW)
    store.create_topic("u", 1, {}, NOW)
    f1 = flush(
        store,
        chunk("t", 0, 3),
        chunk("t", 1, 2, position=300),
        chunk("u", 0, 1, position=500),
        file=new_file(created_ms=NOW + 2),
    )
    f2 = flush(store, chunk("t", 1, 4), file=new_file(created_ms=NOW + 1))
    f3 = flush(store, chunk("u", 0, 1), file=new_file(created_ms=NOW + 3))

    assert [f.file_id for f in store.live_files()] == [f2, f1, f3]  # by created_ms
    assert [f.file_id for f in store.live_files(LEVEL_INGEST)] == [f2, f1, f3]
    assert store.live_files(1) == []
    first = store.live_files()[0]
    assert (first.size, first.level, first.state, first.created_ms, first.obsolete_since_ms) == (
        4096,
        LEVEL_INGEST,
        FILE_LIVE,
        NOW + 1,
        None,
    )

    listed = store.file_chunks([f3, f1, f1, 999_999])
    assert [(fc.file_id, fc.chunk.topic, fc.chunk.partition, fc.chunk.position) for fc in listed] == sorted(
        [(f1, "t", 0, 0), (f1, "t", 1, 300), (f1, "u", 0, 500), (f3, "u", 0, 0)]
    )
    assert store.file_chunks([]) == []

    assert [f.file_id for f in store.files_of_partitions([("t", 1)])] == [f2, f1]
    assert [f.file_id for f in store.files_of_partitions([("u", 0), ("t", 0), ("u", 0)])] == [f1, f3]
    assert store.files_of_partitions([("t", 9), ("nope", 0)]) == []
    assert store.files_of_partitions([]) == []

    assert [
        (fc.file_id, fc.chunk.base_offset, fc.chunk.last_offset) for fc in store.partition_chunks("t", 1)
    ] == [
        (f1, 0, 1),
        (f2, 2, 5),
    ]
    assert store.partition_chunks("t", 7) == []
    assert store.partition_chunks("nope", 0) == []

    assert store.level_stats("t") == {0: (2, 300 + 200 + 400)}
    assert store.level_stats("u") == {0: (2, 200)}
    store.create_topic("empty", 1, {}, NOW)
    assert store.level_stats("empty") == {}
    with pytest.raises(UnknownTopic):
        store.level_stats("nope")

    # Compact t/1 into level 1: f2 had nothing else and becomes obsolete, f1 keeps t/0 and u/0.
    job = leased_job(store, [f1, f2])
    inputs = store.partition_chunks("t", 1)
    output = merged(inputs, level=1)
    store.commit_compaction(job.job_id, "w1", [fc.chunk.chunk_id for fc in inputs], [output], [], NOW + 10)
    assert store.level_stats("t") == {0: (1, 300), 1: (1, 600)}
    assert [f.object_key for f in store.live_files(1)] == [output.file.object_key]
    assert [f.file_id for f in store.files_of_partitions([("t", 1)])] == [
        file_id_of(store, output.file.object_key)
    ]


# --- jobs ----------------------------------------------------------------------------------------------


def test_create_job_claims_files_and_refuses_overlaps(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("t", 2, {}, NOW)
    f1, f2, f3 = (flush(store, chunk("t", 0, 1)) for _ in range(3))
    f4 = flush(store, chunk("t", 1, 1))

    spec = {"partitions": [["t", 0]], "level": 1, "note": "dedup"}
    job = store.create_job("compact", spec, [f2, f1, f2], NOW)
    assert (job.kind, dict(job.spec), job.state, job.lease_owner, job.lease_expires_ms, job.attempts) == (
        "compact",
        spec,
        JOB_PENDING,
        None,
        None,
        0,
    )
    assert (job.created_ms, job.updated_ms) == (NOW, NOW)
    assert store.get_job(job.job_id) == job

    # Any overlap refuses the whole job: f3 is not claimed by the refused attempt.
    with pytest.raises(ClaimRefused):
        store.create_job("compact", {}, [f3, f2], NOW)
    other = store.create_job("compact", {}, [f3], NOW)
    # A file that does not exist or is no longer live is refused too.
    with pytest.raises(ClaimRefused):
        store.create_job("compact", {}, [f4, 999_999], NOW)
    store.apply_retention("t", 1, 1, NOW)  # f4's only chunk goes: f4 is obsolete
    with pytest.raises(ClaimRefused):
        store.create_job("compact", {}, [f4], NOW)
    assert [j.job_id for j in store.active_jobs()] == [job.job_id, other.job_id]

    # Finishing releases the claims.
    store.finish_job(job.job_id, None, JOB_FAILED, NOW + 1)
    assert store.get_job(job.job_id).state == JOB_FAILED
    again = store.create_job("compact", {}, [f1, f2], NOW + 2)
    assert [j.job_id for j in store.active_jobs()] == [other.job_id, again.job_id]

    # A job that claims nothing (retention work) is fine.
    assert store.create_job("retention", {"topic": "t"}, [], NOW).kind == "retention"

    with pytest.raises(ValueError):
        store.create_job("compact", {"bad": object()}, [], NOW)
    with pytest.raises(ValueError):
        store.create_job("", {}, [], NOW)
    with pytest.raises(ValueError):
        store.finish_job(again.job_id, None, JOB_LEASED, NOW)
    with pytest.raises(UnknownJob):
        store.get_job(999_999)
    with pytest.raises(UnknownJob):
        store.finish_job(999_999, None, JOB_DONE, NOW)


def test_lease_heartbeat_expiry_and_release(metadata_store: MetadataStore) -> None:
    store = metadata_store
    a = store.create_job("compact", {"n": "a"}, [], NOW)
    b = store.create_job("compact", {"n": "b"}, [], NOW + 1)

    got_a = store.lease_job("w1", NOW + 10, 1_000)
    assert got_a is not None
    assert got_a.job_id == a.job_id
    assert (got_a.state, got_a.lease_owner, got_a.lease_expires_ms, got_a.attempts, got_a.updated_ms) == (
        JOB_LEASED,
        "w1",
        NOW + 1_010,
        1,
        NOW + 10,
    )
    got_b = store.lease_job("w2", NOW + 20, 10_000)
    assert got_b is not None
    assert got_b.job_id == b.job_id
    assert store.lease_job("w3", NOW + 30, 1_000) is None

    store.heartbeat_job(a.job_id, "w1", NOW + 500, 1_000)
    assert store.get_job(a.job_id).lease_expires_ms == NOW + 1_500
    store.heartbeat_job(a.job_id, "w1", NOW + 600, 10)  # never shortens the lease
    assert store.get_job(a.job_id).lease_expires_ms == NOW + 1_500
    with pytest.raises(LeaseLost):
        store.heartbeat_job(a.job_id, "w2", NOW + 600, 1_000)
    with pytest.raises(LeaseLost):
        store.heartbeat_job(999_999, "w1", NOW, 1_000)
    assert store.get_job(a.job_id).lease_expires_ms == NOW + 1_500  # a lost heartbeat wrote nothing

    # Expiry is strict: at exactly lease_expires_ms the lease still holds.
    assert store.lease_job("w3", NOW + 1_500, 1_000) is None
    retaken = store.lease_job("w3", NOW + 1_501, 1_000)
    assert retaken is not None
    assert retaken.job_id == a.job_id
    assert (retaken.lease_owner, retaken.attempts, retaken.lease_expires_ms) == ("w3", 2, NOW + 2_501)
    with pytest.raises(LeaseLost):  # w1 lost it
        store.heartbeat_job(a.job_id, "w1", NOW + 1_600, 1_000)
    with pytest.raises(CommitConflict):
        store.finish_job(a.job_id, "w1", JOB_DONE, NOW + 1_600)

    # Expired but not taken by anyone: still held.
    store.heartbeat_job(b.job_id, "w2", NOW + 20_000, 1_000)
    assert store.get_job(b.job_id).lease_expires_ms == NOW + 21_000

    store.finish_job(a.job_id, "w3", JOB_DONE, NOW + 1_700)
    store.finish_job(a.job_id, "w3", JOB_DONE, NOW + 1_800)  # a retried finish is a no-op
    finished = store.get_job(a.job_id)
    assert (finished.state, finished.updated_ms, finished.lease_owner) == (JOB_DONE, NOW + 1_700, "w3")
    with pytest.raises(CommitConflict):
        store.finish_job(a.job_id, "w3", JOB_FAILED, NOW + 1_800)
    with pytest.raises(LeaseLost):  # finished: nothing to extend
        store.heartbeat_job(a.job_id, "w3", NOW + 1_800, 1_000)
    assert [j.job_id for j in store.active_jobs()] == [b.job_id]
    assert store.lease_job("w4", NOW + 1_000_000, 1_000) is not None  # b, long expired
    assert store.lease_job("w5", NOW + 1_000_000, 1_000) is None  # done jobs are never leased

    with pytest.raises(ValueError):
        store.lease_job("w1", NOW, 0)
    with pytest.raises(ValueError):
        store.heartbeat_job(b.job_id, "w4", NOW, -1)


def test_racing_workers_never_lease_the_same_job(metadata_url: str) -> None:
    workers, jobs = 4, 40
    stores = [open_metadata_store(metadata_url) for _ in range(workers)]
    try:
        created = [stores[0].create_job("compact", {"i": i}, [], NOW + i) for i in range(jobs)]
        barrier = threading.Barrier(workers)

        def drain(worker: int) -> list[Job]:
            barrier.wait()
            leased: list[Job] = []
            while (job := stores[worker].lease_job(f"w{worker}", NOW + jobs, LEASE_MS)) is not None:
                leased.append(job)
            return leased

        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(drain, range(workers)))
        leased_ids = [job.job_id for result in results for job in result]
        assert sorted(leased_ids) == sorted(j.job_id for j in created)
        assert all(job.attempts == 1 for result in results for job in result)
        owners = {job.job_id: job.lease_owner for result in results for job in result}
        assert all(stores[0].get_job(i).lease_owner == owner for i, owner in owners.items())
    finally:
        for store in stores:
            store.close()


def test_racing_planners_never_claim_a_file_twice(metadata_url: str) -> None:
    planners, rounds = 4, 5
    stores = [open_metadata_store(metadata_url) for _ in range(planners)]
    try:
        stores[0].create_topic("t", 1, {}, NOW)
        files = [flush(stores[0], chunk("t", 0, 1)) for _ in range(3)]

        def plan(planner: int, barrier: threading.Barrier, reverse: bool) -> Job | None:
            # Every planner wants files[1] and one of the others, listed in either order.
            wanted = [files[1], files[planner % 2 * 2]]
            barrier.wait()
            try:
                return stores[planner].create_job(
                    "compact", {"p": planner}, wanted[::-1] if reverse else wanted, NOW
                )
            except ClaimRefused:
                return None

        for r in range(rounds):
            barrier = threading.Barrier(planners)
            with ThreadPoolExecutor(planners) as pool:
                futures = [pool.submit(plan, p, barrier, r % 2 == 1) for p in range(planners)]
                created = [job for f in futures if (job := f.result(timeout=30)) is not None]
            assert len(created) == 1
            assert [j.job_id for j in stores[0].active_jobs()] == [created[0].job_id]
            stores[0].finish_job(created[0].job_id, None, JOB_FAILED, NOW)
    finally:
        for store in stores:
            store.close()


# --- the compaction swap ----------------------------------------------------------------------------------


def test_commit_compaction_swaps_chunks_and_obsoletes_inputs(metadata_store: MetadataStore) -> None:
    store = sql_store(metadata_store)
    store.create_topic("t", 2, {}, NOW)
    f1 = flush(store, chunk("t", 0, 3), chunk("t", 1, 2, position=300))  # t/0 0-2, t/1 0-1
    f2 = flush(store, chunk("t", 0, 2), chunk("t", 1, 1, position=200))  # t/0 3-4, t/1 2
    f3 = flush(store, chunk("t", 1, 1))  # t/1 3: not an input
    keys = {f.file_id: f.object_key for f in store.live_files()}

    job = leased_job(store, [f1, f2])
    inputs = store.file_chunks([f1, f2])
    output = merged(inputs, drop=1)  # dedup removed one record per partition
    empty = CompactionOutput(new_file(1), [])
    store.commit_compaction(
        job.job_id,
        "w1",
        [fc.chunk.chunk_id for fc in inputs],
        [output, empty],
        [CleanedUpTo("t", 0, 5), CleanedUpTo("t", 1, 3)],
        NOW + 100,
    )

    assert spans(store, "t", 0) == [(0, 4, 4)]
    assert spans(store, "t", 1) == [(0, 2, 2), (3, 3, 1)]
    new_chunk = store.find_chunks("t", 0, 0, 10)[0]
    assert (new_chunk.object_key, new_chunk.has_holes, new_chunk.length, new_chunk.crc) == (
        output.file.object_key,
        True,
        400,
        7,
    )
    assert [p.high_watermark for p in store.partition_states("t")] == [5, 4]  # offsets untouched
    assert store.file_states(
        [keys[f1], keys[f2], keys[f3], output.file.object_key, empty.file.object_key]
    ) == {
        keys[f1]: FileState(FILE_OBSOLETE, NOW + 100),
        keys[f2]: FileState(FILE_OBSOLETE, NOW + 100),
        keys[f3]: FileState(FILE_LIVE, None),
        output.file.object_key: FileState(FILE_LIVE, None),
        empty.file.object_key: FileState(FILE_OBSOLETE, NOW + 100),
    }
    assert [f.level for f in store.live_files()] == [LEVEL_INGEST, 1]
    done = store.get_job(job.job_id)
    assert (done.state, done.updated_ms) == (JOB_DONE, NOW + 100)
    assert store.active_jobs() == []
    assert [(s.cleaned_offset, s.last_compaction_ms) for s in store.partition_stats("t")] == [
        (5, NOW + 100),
        (3, NOW + 100),
    ]

    # A retry of the same commit (after an ambiguous failure) is recognised and writes nothing.
    before = (store.partition_chunks("t", 0), store.partition_chunks("t", 1), store.live_files())
    store.commit_compaction(
        job.job_id, "w1", [fc.chunk.chunk_id for fc in inputs], [output, empty], [], NOW + 200
    )
    assert (store.partition_chunks("t", 0), store.partition_chunks("t", 1), store.live_files()) == before

    # The output can be compacted again (L1 -> L2), together with the chunk it was not merged with.
    out_id = file_id_of(store, output.file.object_key)
    job2 = leased_job(store, [out_id, f3], now=NOW + 300)
    inputs2 = store.partition_chunks("t", 1)
    store.commit_compaction(
        job2.job_id, "w1", [fc.chunk.chunk_id for fc in inputs2], [merged(inputs2, level=2)], [], NOW + 300
    )
    assert spans(store, "t", 1) == [(0, 3, 3)]
    assert store.file_states([keys[f3]]) == {keys[f3]: FileState(FILE_OBSOLETE, NOW + 300)}
    assert store.file_states([output.file.object_key])[output.file.object_key].state == FILE_LIVE  # t/0


def test_commit_compaction_rejects_invalid_outputs(metadata_store: MetadataStore) -> None:
    store = sql_store(metadata_store)
    store.create_topic("t", 2, {}, NOW)
    f1 = flush(store, chunk("t", 0, 3))  # 0-2
    f2 = flush(store, chunk("t", 0, 2))  # 3-4
    flush(store, chunk("t", 0, 2))  # 5-6: not an input
    job = leased_job(store, [f1, f2])
    first, second = store.file_chunks([f1]), store.file_chunks([f2])
    ids = [fc.chunk.chunk_id for fc in first + second]
    good = merged(first + second)
    good_chunk = good.chunks[0]
    before = (store.partition_chunks("t", 0), store.partition_stats("t"), store.live_files())

    def out(**changes: object) -> list[CompactionOutput]:
        return [CompactionOutput(new_file(1), [replace(good_chunk, **changes)])]

    bad_calls: list[Callable[[], None]] = [
        # Beyond the inputs' span, into a chunk that is not an input.
        lambda: store.commit_compaction(job.job_id, "w1", ids, out(last_offset=5, record_count=6), [], NOW),
        # Below the span.
        lambda: store.commit_compaction(job.job_id, "w1", ids[1:], out(record_count=5), [], NOW),
        # Fewer records than the span without has_holes; more records than the span.
        lambda: store.commit_compaction(job.job_id, "w1", ids, out(record_count=4), [], NOW),
        lambda: store.commit_compaction(job.job_id, "w1", ids, out(record_count=6), [], NOW),
        # Two output chunks sharing offset 2.
        lambda: store.commit_compaction(
            job.job_id,
            "w1",
            ids,
            [
                CompactionOutput(
                    new_file(1),
                    [
                        replace(good_chunk, last_offset=2, record_count=3),
                        replace(good_chunk, base_offset=2, record_count=3, position=300),
                    ],
                )
            ],
            [],
            NOW,
        ),
        # A partition without inputs.
        lambda: store.commit_compaction(job.job_id, "w1", ids, [good, *out(partition=1)], [], NOW),
        # A cleaned offset beyond the high watermark.
        lambda: store.commit_compaction(job.job_id, "w1", ids, [good], [CleanedUpTo("t", 0, 8)], NOW),
    ]
    for call in bad_calls:
        with pytest.raises(ValueError):
            call()
    # Inputs that leave a gap: an output spanning it would overlap the chunk in between.
    f4 = flush(store, chunk("t", 0, 1))  # 7
    job_gap = store.create_job("compact", {}, [f4], NOW)
    store.finish_job(job.job_id, None, JOB_FAILED, NOW)
    assert store.lease_job("w1", NOW, LEASE_MS) is not None
    gap_inputs = first + store.file_chunks([f4])
    with pytest.raises(ValueError):
        store.commit_compaction(
            job_gap.job_id, "w1", [fc.chunk.chunk_id for fc in gap_inputs], [merged(gap_inputs)], [], NOW
        )

    assert store.get_job(job_gap.job_id).state == JOB_LEASED
    after = (store.partition_chunks("t", 0)[:3], store.partition_stats("t"), store.live_files()[:3])
    assert after[0] == before[0]
    assert after[2] == before[2]
    assert after[1][0].cleaned_offset == 0
    assert after[1][0].last_compaction_ms is None


def test_commit_conflicts_write_nothing(metadata_store: MetadataStore) -> None:
    store = sql_store(metadata_store)
    store.create_topic("t", 1, {}, NOW)
    f1 = flush(store, chunk("t", 0, 3))  # 0-2
    f2 = flush(store, chunk("t", 0, 2))  # 3-4
    inputs = store.file_chunks([f1, f2])
    ids = [fc.chunk.chunk_id for fc in inputs]

    def snapshot() -> tuple[object, ...]:
        return (store.partition_chunks("t", 0), store.partition_stats(), store.live_files())

    # 1. The lease was lost: it expired and another worker took the job.
    job = store.create_job("compact", {}, [f1, f2], NOW)
    assert store.lease_job("w1", NOW, 1_000) is not None
    assert store.lease_job("w2", NOW + 1_001, 1_000) is not None
    before = snapshot()
    lost = merged(inputs)
    with pytest.raises(CommitConflict):
        store.commit_compaction(job.job_id, "w1", ids, [lost], [CleanedUpTo("t", 0, 5)], NOW + 1_002)
    assert snapshot() == before
    assert store.known_object_keys([lost.file.object_key]) == set()
    assert store.get_job(job.job_id).lease_owner == "w2"
    with pytest.raises(CommitConflict):  # never leased by this owner at all
        store.commit_compaction(job.job_id, "nobody", ids, [], [], NOW + 1_002)
    with pytest.raises(UnknownJob):
        store.commit_compaction(999_999, "w1", ids, [], [], NOW)

    # 2. An input chunk was removed by retention while the job ran.
    store.apply_retention("t", 0, 3, NOW + 1_003)  # drops 0-2, f1 obsolete
    before = snapshot()
    stale = merged(inputs)
    with pytest.raises(CommitConflict):
        store.commit_compaction(job.job_id, "w2", ids, [stale], [CleanedUpTo("t", 0, 5)], NOW + 1_004)
    assert snapshot() == before
    assert store.known_object_keys([stale.file.object_key]) == set()
    assert store.get_job(job.job_id).state == JOB_LEASED  # the worker decides: finish it failed
    store.finish_job(job.job_id, "w2", JOB_FAILED, NOW + 1_005)
    assert store.active_jobs() == []
    assert spans(store, "t", 0) == [(3, 4, 2)]

    # 3. The topic was deleted while the job ran.
    job = leased_job(store, [f2], now=NOW + 2_000)
    remaining = store.file_chunks([f2])
    store.delete_topic("t", NOW + 2_001)
    with pytest.raises(CommitConflict):
        store.commit_compaction(
            job.job_id, "w1", [fc.chunk.chunk_id for fc in remaining], [merged(remaining)], [], NOW + 2_002
        )
    with pytest.raises(CommitConflict):  # only a checkpoint, for a partition that is gone
        store.commit_compaction(job.job_id, "w1", [], [], [CleanedUpTo("t", 0, 0)], NOW + 2_002)
    assert store.get_job(job.job_id).state == JOB_LEASED


@pytest.mark.postgres
def test_postgres_retention_inside_a_waiting_commit_is_a_conflict(postgres_schema_url: str) -> None:
    """The commit reads its inputs, then waits for a partition lock; what changed meanwhile counts."""
    store = open_metadata_store(postgres_schema_url)
    try:
        store.create_topic("t", 1, {}, NOW)
        f1 = flush(store, chunk("t", 0, 3))
        f2 = flush(store, chunk("t", 0, 2))
        job = leased_job(store, [f1, f2])
        inputs = store.partition_chunks("t", 0)
        output = merged(inputs)
        with (
            ThreadPoolExecutor(1) as pool,  # outermost: on a failure the holder lets go before we join
            psycopg.connect(postgres_schema_url) as holder,
            # Statistics views are snapshotted per transaction: poll from a connection of its own.
            psycopg.connect(postgres_schema_url, autocommit=True) as observer,
        ):
            # Another transaction (a retention in progress) holds the partition.
            holder.execute("SELECT * FROM partitions WHERE topic = 't' FOR UPDATE")
            commit = pool.submit(
                store.commit_compaction,
                job.job_id,
                "w1",
                [fc.chunk.chunk_id for fc in inputs],
                [output],
                [CleanedUpTo("t", 0, 5)],
                NOW,
            )
            waiting = 0
            for _ in range(500):
                waiting = lock_waiters(observer, "%FROM partitions%")
                if waiting or commit.done():
                    break
                threading.Event().wait(0.01)
            assert waiting == 1, "the commit never waited for the partition lock"
            holder.execute("DELETE FROM chunks WHERE chunk_id = %s", (inputs[0].chunk.chunk_id,))
            holder.execute("UPDATE partitions SET log_start_offset = 3 WHERE topic = 't'")
            holder.commit()
            with pytest.raises(CommitConflict):
                commit.result(timeout=30)
        assert spans(store, "t", 0) == [(3, 4, 2)]  # the retention's delete stands, nothing resurrected
        assert store.known_object_keys([output.file.object_key]) == set()
        assert store.partition_stats("t")[0].cleaned_offset == 0
    finally:
        store.close()


def test_flushes_and_compactions_committing_together_keep_offsets_unique(metadata_url: str) -> None:
    """A flusher and a compactor commit on the same partitions at once; every offset is covered once."""
    flusher_store, compactor_store = open_metadata_store(metadata_url), open_metadata_store(metadata_url)
    flushes, rounds = 60, 6
    try:
        flusher_store.create_topic("t", 2, {}, NOW)
        for i in range(5):
            flush(flusher_store, chunk("t", 0, 1 + i % 3), chunk("t", 1, 1, position=400))
        barrier = threading.Barrier(2)

        def flusher() -> list[tuple[int, int, int]]:
            barrier.wait()
            committed: list[tuple[int, int, int]] = []
            for i in range(flushes):
                chunks = [chunk("t", 1, 1 + i % 2, position=400), chunk("t", 0, 1 + i % 3)]
                result = flusher_store.commit_flush(new_file(), chunks, [], NOW)
                committed.extend(
                    (c.partition, b, c.record_count) for c, b in zip(chunks, result.base_offsets, strict=True)
                )
            return committed

        def compactor() -> int:
            barrier.wait()
            done = 0
            for r in range(rounds):
                inputs = compactor_store.partition_chunks("t", r % 2)
                job = compactor_store.create_job("compact", {}, sorted({fc.file_id for fc in inputs}), NOW)
                leased = compactor_store.lease_job("compactor", NOW, LEASE_MS)
                assert leased is not None
                assert leased.job_id == job.job_id
                top = inputs[-1].chunk.last_offset + 1
                compactor_store.commit_compaction(
                    job.job_id,
                    "compactor",
                    [fc.chunk.chunk_id for fc in inputs],
                    [merged(inputs)],
                    [CleanedUpTo("t", r % 2, top)],
                    NOW,
                )
                done += 1
            return done

        with ThreadPoolExecutor(2) as pool:
            flushed = pool.submit(flusher)
            compacted = pool.submit(compactor)
            committed = flushed.result(timeout=60)
            assert compacted.result(timeout=60) == rounds

        for p in (0, 1):
            bases = sorted((b, n) for q, b, n in committed if q == p)
            assert all(b >= 0 for b, _ in bases)
            for (b1, n1), (b2, _) in itertools.pairwise(bases):
                assert b1 + n1 == b2  # flush offsets stay dense while compaction swaps rows below
            assert_no_overlap_and_complete(flusher_store, "t", p)
            chunks = flusher_store.partition_chunks("t", p)
            assert (
                sum(fc.chunk.record_count for fc in chunks)
                == flusher_store.partition_state("t", p).high_watermark
            )
            assert flusher_store.partition_stats("t")[p].cleaned_offset > 0
        # Every file with no live chunk left was obsoleted; every live file holds a live chunk.
        live = {f.file_id for f in flusher_store.live_files()}
        holding = {fc.file_id for p in (0, 1) for fc in flusher_store.partition_chunks("t", p)}
        assert live == holding
    finally:
        flusher_store.close()
        compactor_store.close()


# --- retention and GC ---------------------------------------------------------------------------------------


def test_apply_retention_never_moves_backwards_and_is_bounded(metadata_store: MetadataStore) -> None:
    store = sql_store(metadata_store)
    store.create_topic("t", 2, {}, NOW)
    f1 = flush(store, chunk("t", 0, 3))  # 0-2
    f2 = flush(store, chunk("t", 0, 2), chunk("t", 1, 1, position=200))  # 3-4, and t/1
    f3 = flush(store, chunk("t", 0, 5))  # 5-9
    keys = {f.file_id: f.object_key for f in store.live_files()}

    assert store.apply_retention("t", 0, 4, NOW + 10) == 1  # 3-4 straddles 4 and stays
    assert store.partition_state("t", 0).log_start_offset == 4
    assert spans(store, "t", 0) == [(3, 4, 2), (5, 9, 5)]
    assert store.file_states([keys[f1], keys[f2]]) == {
        keys[f1]: FileState(FILE_OBSOLETE, NOW + 10),
        keys[f2]: FileState(FILE_LIVE, None),
    }

    assert store.apply_retention("t", 0, 2, NOW + 20) == 0  # never backwards
    assert store.partition_state("t", 0).log_start_offset == 4

    assert store.apply_retention("t", 0, 1_000, NOW + 30) == 2  # bounded by the high watermark
    state = store.partition_state("t", 0)
    assert (state.log_start_offset, state.high_watermark) == (10, 10)
    assert store.find_chunks("t", 0, 0, 10) == []
    assert store.file_states([keys[f2], keys[f3]]) == {
        keys[f2]: FileState(FILE_LIVE, None),  # still holds t/1
        keys[f3]: FileState(FILE_OBSOLETE, NOW + 30),
    }
    # Offsets continue after the log start; the partition is otherwise untouched.
    assert store.commit_flush(new_file(), [chunk("t", 0, 1)], [], NOW).base_offsets == [10]
    assert spans(store, "t", 1) == [(0, 0, 1)]

    with pytest.raises(UnknownTopic):
        store.apply_retention("nope", 0, 1, NOW)
    with pytest.raises(UnknownPartition):
        store.apply_retention("t", 2, 1, NOW)


def test_obsolete_files_and_forget_files(metadata_store: MetadataStore) -> None:
    store = sql_store(metadata_store)
    store.create_topic("t", 3, {}, NOW)
    fa = flush(store, chunk("t", 0, 1))
    fb = flush(store, chunk("t", 1, 1))
    fc = flush(store, chunk("t", 2, 1))
    live = flush(store, chunk("t", 0, 1))
    keys = {f.file_id: f.object_key for f in store.live_files()}
    claim = store.create_job("compact", {}, [fc], NOW)

    store.apply_retention("t", 0, 1, NOW + 10)
    store.apply_retention("t", 1, 1, NOW + 20)
    store.apply_retention("t", 2, 1, NOW + 5)  # fc is obsolete but still claimed

    def ids(rows: list[FileRow]) -> list[int]:
        return [r.file_id for r in rows]

    assert ids(store.obsolete_files(NOW + 15, 10)) == [fa]
    assert ids(store.obsolete_files(NOW + 20, 10)) == [fa, fb]
    assert ids(store.obsolete_files(NOW + 20, 1)) == [fa]
    assert store.obsolete_files(NOW + 20, 0) == []
    row = store.obsolete_files(NOW + 20, 1)[0]
    assert (row.object_key, row.state, row.obsolete_since_ms) == (keys[fa], FILE_OBSOLETE, NOW + 10)

    # Live, claimed and unknown ids are skipped silently.
    store.forget_files([fa, live, fc, 999_999])
    assert store.known_object_keys(list(keys.values())) == {keys[fb], keys[fc], keys[live]}
    assert ids(store.obsolete_files(NOW + 100, 10)) == [fb]

    store.finish_job(claim.job_id, None, JOB_FAILED, NOW + 30)  # the claim goes, fc is a GC candidate
    assert ids(store.obsolete_files(NOW + 100, 10)) == [fc, fb]  # by obsolete_since_ms
    store.forget_files([fb, fc])
    assert store.obsolete_files(NOW + 100, 10) == []
    assert store.known_object_keys(list(keys.values())) == {keys[live]}
    store.forget_files([])


# --- schema ---------------------------------------------------------------------------------------------


def _backend(url: str) -> Backend:
    if url.startswith("sqlite:"):
        return SqliteBackend(sqlite_path(url))
    return PostgresBackend(url)


def test_migration_2_applies_to_a_version_1_database(metadata_url: str) -> None:
    assert [m.version for m in schema.SQLITE_MIGRATIONS][:2] == [1, 2]
    assert [m.version for m in schema.POSTGRES_MIGRATIONS][:2] == [1, 2]

    # A database as Strata with only migration 1 left it, with a topic, a file and a chunk in it.
    backend = _backend(metadata_url)
    dialect = backend.dialect.name

    def version_1(tx: Tx) -> list[int]:
        applied = schema.migrate_to(tx, dialect, NOW, 1)
        tx.execute(
            "INSERT INTO topics (name, partitions, configs, created_ms) VALUES ('t', 1, '{}', ?)", (NOW,)
        )
        tx.execute(
            "INSERT INTO partitions (topic, partition_id, next_offset, log_start_offset)"
            " VALUES ('t', 0, 5, 1)"
        )
        tx.execute(
            "INSERT INTO files (object_key, size, level, state, created_ms)"
            " VALUES ('L0/old', 10, 0, 'live', ?)",
            (NOW,),
        )
        tx.execute(
            "INSERT INTO chunks (topic, partition_id, base_offset, last_offset, record_count, file_id,"
            " position, length, min_timestamp, max_timestamp, crc)"
            " SELECT 't', 0, 0, 4, 5, file_id, 0, 250, ?, ?, 1 FROM files",
            (NOW - 1, NOW),
        )
        return applied

    try:
        assert backend.run(version_1, write=True, what="test setup") == [1]
    finally:
        backend.close()

    store = sql_store(open_metadata_store(metadata_url))
    try:
        assert store.applied_migrations == tuple(range(2, schema.latest_version(dialect) + 1))
        assert store.partition_stats() == [
            PartitionStats("t", 0, 1, 5, 0, None, 250, 250, 1, NOW, 5, NOW - 1)
        ]
        (old,) = store.live_files()
        assert store.file_chunks([old.file_id])[0].chunk.base_offset == 0
        job = leased_job(store, [old.file_id])
        inputs = store.partition_chunks("t", 0)
        store.commit_compaction(
            job.job_id, "w1", [inputs[0].chunk.chunk_id], [merged(inputs)], [CleanedUpTo("t", 0, 5)], NOW
        )
        assert store.partition_stats()[0].dirty_bytes == 0
    finally:
        store.close()

    reopened = sql_store(open_metadata_store(metadata_url))
    try:
        assert reopened.applied_migrations == ()
    finally:
        reopened.close()
