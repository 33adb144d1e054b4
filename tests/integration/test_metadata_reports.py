"""What the metadata store keeps of compaction's work and shows of the log's shape, against SQLite and
PostgreSQL: job reports and the topics a job touches, the job listing (newest first, by state and topic,
paged by job id, on indexes), removals per topic, dirty-ratio samples, per-partition detail and topic
summaries; and the schema upgrade that adds them (version 6) to a database an older Strata left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

from storage.errors import UnknownTopic
from storage.metadata import (
    JOB_DONE,
    JOB_FAILED,
    JOB_LEASED,
    JOB_PENDING,
    DirtySample,
    JobRemoval,
    JobReport,
    MetadataStore,
    TopicVolume,
    open_metadata_store,
    schema,
    sqlite_path,
)
from storage.metadata.postgres import PostgresBackend
from storage.metadata.sql import Backend, Param, Row, SqlMetadataStore, Tx
from storage.metadata.sqlite import SqliteBackend
from tests.integration.test_metadata_compaction import (
    LEASE_MS,
    NOW,
    chunk,
    flush,
    leased_job,
    merged,
    new_file,
)

pytestmark = pytest.mark.integration

T = TypeVar("T")
MINUTE = 60_000
DAY = 24 * 3_600_000


def report(outcome: str = "committed", **topics: TopicVolume) -> JobReport:
    return JobReport({"outcome": outcome, "records_in": 7}, topics)


def test_a_job_knows_its_partitions_and_keeps_its_reports(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("a", 2, {}, NOW)
    store.create_topic("b", 1, {}, NOW)
    f1 = flush(store, chunk("a", 0, 3), chunk("a", 1, 2, position=300), chunk("b", 0, 2, position=500))
    f2 = flush(store, chunk("a", 0, 2))

    job = store.create_job("merge", {"inputs": []}, [f1, f2], NOW)
    assert job.partitions == (("a", 0), ("a", 1), ("b", 0))
    assert (job.topics, job.stats, job.state) == (["a", "b"], None, JOB_PENDING)
    assert store.list_jobs(JOB_PENDING, "b") == [job]
    leased = store.lease_job("w1", NOW, LEASE_MS)
    assert leased is not None
    assert leased.partitions == job.partitions
    # The copy of the state in the topic index follows the job's.
    assert store.list_jobs(JOB_PENDING, "b") == []
    assert [j.job_id for j in store.list_jobs(JOB_LEASED, "b")] == [job.job_id]

    # An interrupted attempt's report is kept only while its owner holds the lease.
    assert not store.record_attempt(job.job_id, "w2", report("interrupted"), NOW + 1)
    assert store.get_job(job.job_id).stats is None
    assert store.record_attempt(job.job_id, "w1", report("interrupted"), NOW + 1)
    assert store.get_job(job.job_id).stats == {"outcome": "interrupted", "records_in": 7}

    # The commit stores its report and the volume per topic in its own transaction.
    inputs = [fc for p in (("a", 0), ("a", 1), ("b", 0)) for fc in store.partition_chunks(*p)]
    volumes = {"a": TopicVolume(7, 4, 700, 400), "b": TopicVolume(2, 2, 200, 200)}
    store.commit_compaction(
        job.job_id,
        "w1",
        [fc.chunk.chunk_id for fc in inputs],
        [merged(inputs, drop=0)],
        [],
        NOW + 5,
        JobReport({"outcome": "committed"}, volumes),
    )
    done = store.get_job(job.job_id)
    assert (done.state, done.stats, done.partitions) == (JOB_DONE, {"outcome": "committed"}, job.partitions)
    assert [j.job_id for j in store.list_jobs(JOB_DONE, "a")] == [job.job_id]
    assert store.list_jobs(JOB_LEASED, "a") == []
    # Only what removed something is a removal: b lost nothing.
    assert store.job_removals("a", NOW, 10) == [JobRemoval(job.job_id, NOW + 5, 3, 300)]
    assert store.job_removals("a", NOW + 6, 10) == []
    assert store.job_removals("b", NOW, 10) == []

    # Finishing with a report stores it; finishing without one keeps the last attempt's.
    f3 = flush(store, chunk("b", 0, 1))
    failed = leased_job(store, [f3])
    assert failed.partitions == (("b", 0),)
    store.record_attempt(failed.job_id, "w1", report("interrupted"), NOW + 7)
    store.finish_job(failed.job_id, "w1", JOB_FAILED, NOW + 8)
    assert store.get_job(failed.job_id).stats == {"outcome": "interrupted", "records_in": 7}
    f4 = flush(store, chunk("b", 0, 1))
    forced = leased_job(store, [f4])
    store.finish_job(forced.job_id, None, JOB_FAILED, NOW + 9, report("failed"))
    assert store.get_job(forced.job_id).stats == {"outcome": "failed", "records_in": 7}
    assert [j.job_id for j in store.list_jobs(JOB_FAILED, "b")] == [forced.job_id, failed.job_id]
    assert store.job_removals("b", NOW, 10) == []  # failed jobs removed nothing

    # A job whose files hold nothing touches nothing.
    empty = store.create_job("merge", {"inputs": []}, [], NOW)
    assert (empty.partitions, empty.topics) == ((), [])


def test_list_jobs_newest_first_filtered_and_paged(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("a", 1, {}, NOW)
    store.create_topic("b", 1, {}, NOW)
    ids: dict[str, list[int]] = {"a": [], "b": []}
    for i in range(10):
        topic = "a" if i % 3 else "b"
        job = store.create_job("merge", {"inputs": []}, [flush(store, chunk(topic, 0, 1))], NOW + i)
        ids[topic].append(job.job_id)
    every = sorted(ids["a"] + ids["b"], reverse=True)
    # Lease and finish a few: the oldest job is leased first.
    first = store.lease_job("w1", NOW + 20, LEASE_MS)
    second = store.lease_job("w1", NOW + 20, LEASE_MS)
    assert first is not None
    assert second is not None
    store.finish_job(first.job_id, "w1", JOB_DONE, NOW + 21)

    def listed(*args: Any, **kwargs: Any) -> list[int]:
        return [j.job_id for j in store.list_jobs(*args, **kwargs)]

    assert listed() == every
    assert listed(limit=3) == every[:3]
    assert listed(before=every[2], limit=3) == every[3:6]
    assert listed(before=every[-1]) == []
    assert listed(before=2**70) == every  # a bound past any id is no bound
    assert listed(limit=0) == []
    assert listed(JOB_DONE) == [first.job_id]
    assert listed(JOB_LEASED) == [second.job_id]
    assert listed(JOB_PENDING) == [j for j in every if j not in (first.job_id, second.job_id)]
    assert listed(topic="a") == sorted(ids["a"], reverse=True)
    assert listed(topic="b", before=sorted(ids["b"])[-1], limit=2) == sorted(ids["b"], reverse=True)[1:3]
    assert listed(JOB_PENDING, "b") == [j for j in sorted(ids["b"], reverse=True) if j != first.job_id]
    assert listed(topic="nope") == []


def test_dirty_samples_are_throttled_pruned_and_go_with_their_topic(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("a", 1, {}, NOW)
    store.create_topic("b", 1, {}, NOW)

    def sample(now: int, *topics: str) -> int:
        return store.record_dirty_samples(
            [DirtySample(t, now, 10 * len(t), 40) for t in topics], now, MINUTE, DAY
        )

    assert sample(NOW, "a", "b") == 2
    assert sample(NOW + MINUTE - 1, "a", "b") == 0  # at most one per topic per minute
    assert sample(NOW + MINUTE, "a") == 1
    assert sample(NOW + MINUTE + 1, "b") == 1
    assert store.dirty_samples("a", 0) == [
        DirtySample("a", NOW, 10, 40),
        DirtySample("a", NOW + MINUTE, 10, 40),
    ]
    assert store.dirty_samples("a", NOW + 1) == [DirtySample("a", NOW + MINUTE, 10, 40)]
    assert store.dirty_samples("a", 0)[0].dirty_ratio == 0.25
    assert store.dirty_samples("nope", 0) == []

    # A day later the first samples go, whoever is sampled.
    assert sample(NOW + DAY + MINUTE // 2) == 0
    assert [s.ts_ms for s in store.dirty_samples("a", 0)] == [NOW + MINUTE]
    assert [s.ts_ms for s in store.dirty_samples("b", 0)] == [NOW + MINUTE + 1]

    store.delete_topic("b", NOW)
    assert store.dirty_samples("b", 0) == []
    assert len(store.dirty_samples("a", 0)) == 1


def test_partition_details_and_topic_summaries(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("t", 3, {"cleanup.policy": "compact"}, NOW)
    store.create_topic("u", 1, {}, NOW + 1)
    f1 = flush(store, chunk("t", 0, 3), chunk("t", 1, 2, position=300), chunk("u", 0, 4, position=500))
    f2 = flush(store, chunk("t", 0, 2))

    details = store.partition_details("t", -1, 10)
    assert [d.stats.partition for d in details] == [0, 1, 2]
    assert [(d.records, d.stats.live_bytes, dict(d.levels)) for d in details] == [
        (5, 500, {0: (2, 500)}),
        (2, 200, {0: (1, 200)}),
        (0, 0, {}),
    ]
    assert [d.stats.partition for d in store.partition_details("t", 0, 1)] == [1]
    assert [d.stats.partition for d in store.partition_details("t", 1, 5)] == [2]
    assert store.partition_details("t", 2, 5) == []
    assert store.partition_details("t", 0, 0) == []
    with pytest.raises(UnknownTopic):
        store.partition_details("nope", -1, 5)

    # Compact t/0 into level 1, dropping 2 records: its records and bytes by level follow.
    job = leased_job(store, [f1, f2])
    inputs = store.partition_chunks("t", 0)
    output = merged(inputs, level=1, drop=2)
    store.commit_compaction(job.job_id, "w1", [fc.chunk.chunk_id for fc in inputs], [output], [], NOW + 5)
    (p0,) = store.partition_details("t", -1, 1)
    assert (p0.records, p0.stats.live_bytes, dict(p0.levels)) == (3, 300, {1: (1, 300)})

    summaries = store.topic_summaries(["u", "nope", "t", "t"])
    assert [(s.name, s.partitions, dict(s.configs), s.created_ms) for s in summaries] == [
        ("t", 3, {"cleanup.policy": "compact"}, NOW),
        ("u", 1, {}, NOW + 1),
    ]
    assert [(s.records, s.live_bytes, s.dirty_bytes) for s in summaries] == [(5, 500, 500), (4, 400, 400)]
    assert store.topic_summaries([]) == []


class _Recording(Backend):
    """A backend that remembers every statement run through it (to ask SQLite how it runs them)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.dialect = inner.dialect
        self.description = inner.description
        self.statements: list[tuple[str, tuple[Param, ...]]] = []

    def run(self, work: Callable[[Tx], T], *, write: bool, what: str) -> T:
        recording = self

        class _Tx:
            def __init__(self, tx: Tx) -> None:
                self.tx = tx

            def execute(self, sql: str, params: Sequence[Param] = ()) -> int:
                recording.statements.append((sql, tuple(params)))
                return self.tx.execute(sql, params)

            def executemany(self, sql: str, rows: Sequence[Sequence[Param]]) -> None:
                self.tx.executemany(sql, rows)

            def all(self, sql: str, params: Sequence[Param] = ()) -> list[Row]:
                recording.statements.append((sql, tuple(params)))
                return self.tx.all(sql, params)

            def one(self, sql: str, params: Sequence[Param] = ()) -> Row | None:
                recording.statements.append((sql, tuple(params)))
                return self.tx.one(sql, params)

        return self.inner.run(lambda tx: work(_Tx(tx)), write=write, what=what)

    def close(self) -> None:
        self.inner.close()


def test_job_listings_are_index_range_scans(tmp_path: Any) -> None:
    """SQLite's plan for each listing: an index walked in order, never a table scan or a sort. (PostgreSQL
    picks its plan by table size; the same indexes serve it.)"""
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    recording = _Recording(SqliteBackend(sqlite_path(url)))
    store = SqlMetadataStore(recording, url)
    try:
        store.create_topic("a", 1, {}, NOW)
        store.create_job("merge", {"inputs": []}, [flush(store, chunk("a", 0, 1))], NOW)
        recording.statements.clear()
        store.list_jobs()
        store.list_jobs(JOB_DONE)
        store.list_jobs(topic="a", before=5)
        store.list_jobs(JOB_DONE, "a", limit=3)
        store.job_removals("a", NOW, 10)
        store.dirty_samples("a", NOW)
        assert len(recording.statements) == 6
        plans = recording.inner.run(
            lambda tx: [
                " / ".join(str(r[-1]) for r in tx.all("EXPLAIN QUERY PLAN " + sql, params))
                for sql, params in recording.statements
            ],
            write=False,
            what="explain",
        )
    finally:
        store.close()
    for plan in plans:
        assert "TEMP B-TREE" not in plan, plan  # no sort: the index gives the order
        assert all(
            step.startswith(("SEARCH", "SCAN j USING INTEGER PRIMARY KEY")) for step in plan.split(" / ")
        ), plan
    assert "jobs_by_state_id" in plans[1]
    assert "job_topics_by_topic" in plans[2]
    assert "job_topics_by_state" in plans[3]
    assert "job_topics_by_finish" in plans[4]


def _backend(url: str) -> Backend:
    return SqliteBackend(sqlite_path(url)) if url.startswith("sqlite:") else PostgresBackend(url)


def test_migration_6_applies_to_a_version_5_database(metadata_url: str) -> None:
    # A database as Strata with migrations 1-5 left it: a topic with one chunk, a pending job that claims
    # its file, and a job that finished before jobs kept reports.
    backend = _backend(metadata_url)
    dialect = backend.dialect.name

    def version_5(tx: Tx) -> list[int]:
        applied = schema.migrate_to(tx, dialect, NOW, 5)
        tx.execute(
            "INSERT INTO topics (name, partitions, configs, created_ms) VALUES ('t', 1, '{}', ?)", (NOW,)
        )
        tx.execute(
            "INSERT INTO partitions (topic, partition_id, next_offset, log_start_offset)"
            " VALUES ('t', 0, 5, 0)"
        )
        tx.execute(
            "INSERT INTO files (object_key, size, level, state, created_ms)"
            " VALUES ('L0/old', 10, 0, 'live', ?)",
            (NOW,),
        )
        tx.execute(
            "INSERT INTO chunks (topic, partition_id, base_offset, last_offset, record_count, file_id,"
            " position, length, min_timestamp, max_timestamp, crc)"
            " SELECT 't', 0, 0, 4, 5, file_id, 0, 500, ?, ?, 1 FROM files",
            (NOW - 1, NOW),
        )
        for state in ("done", "pending"):
            tx.execute(
                "INSERT INTO jobs (kind, spec, state, attempts, created_ms, updated_ms)"
                " VALUES ('merge', '{\"inputs\":[]}', ?, 0, ?, ?)",
                (state, NOW, NOW),
            )
        tx.execute(
            "INSERT INTO job_files (file_id, job_id) SELECT f.file_id, j.job_id FROM files f, jobs j"
            " WHERE j.state = 'pending'"
        )
        return applied

    try:
        assert backend.run(version_5, write=True, what="test setup") == [1, 2, 3, 4, 5]
    finally:
        backend.close()

    store = open_metadata_store(metadata_url)
    try:
        assert isinstance(store, SqlMetadataStore)
        assert store.applied_migrations == tuple(range(6, schema.latest_version(dialect) + 1))
        old_done, old_pending = sorted(store.list_jobs(), key=lambda j: j.state)
        assert (old_done.state, old_done.partitions, old_done.stats) == (JOB_DONE, None, None)
        assert (old_pending.state, old_pending.partitions, old_pending.topics) == (JOB_PENDING, None, [])
        # The active job's topics were found from the files it claims; the finished one's cannot be.
        assert store.list_jobs(topic="t") == [old_pending]
        assert store.list_jobs(JOB_PENDING, "t") == [old_pending]

        # The old job runs to its commit with a report, as a new one would.
        leased = store.lease_job("w1", NOW, LEASE_MS)
        assert leased is not None
        assert leased.job_id == old_pending.job_id
        inputs = store.partition_chunks("t", 0)
        store.commit_compaction(
            leased.job_id,
            "w1",
            [fc.chunk.chunk_id for fc in inputs],
            [merged(inputs, drop=2)],
            [],
            NOW + 1,
            JobReport({"outcome": "committed"}, {"t": TopicVolume(5, 3, 500, 300)}),
        )
        assert store.get_job(leased.job_id).stats == {"outcome": "committed"}
        assert store.job_removals("t", NOW, 5) == [JobRemoval(leased.job_id, NOW + 1, 2, 200)]
        assert store.record_dirty_samples([DirtySample("t", NOW, 1, 2)], NOW, MINUTE, DAY) == 1
        new = store.create_job(
            "merge", {"inputs": []}, [flush(store, chunk("t", 0, 1), file=new_file())], NOW
        )
        assert new.partitions == (("t", 0),)
    finally:
        store.close()
