"""The metadata store against real databases: every test runs on SQLite and on PostgreSQL.

The invariant these tests guard above all (docs/architecture.md, Invariants): per partition, offsets are
assigned once, densely, never reused, however many stores, threads and processes commit at once.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import uuid
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from storage.errors import (
    InvalidPartitionCount,
    SettingsError,
    StrataError,
    TopicExists,
    Unavailable,
    UnknownPartition,
    UnknownTopic,
)
from storage.metadata import (
    FILE_LIVE,
    FILE_OBSOLETE,
    LEVEL_INGEST,
    GroupOffset,
    IdempotencyConflict,
    IdempotencyEntry,
    MetadataStore,
    NewChunk,
    NewFile,
    PartitionState,
    open_metadata_store,
    schema,
)
from storage.metadata.postgres import open_postgres_store
from storage.metadata.sql import FileState, SqlMetadataStore
from storage.metadata.sql.core import BATCH_ROWS
from storage.metadata.sqlite import open_sqlite_store

pytestmark = pytest.mark.integration

# Every migration: a new database applies them all, the same on both dialects.
LATEST = schema.latest_version("sqlite")
assert schema.latest_version("postgres") == LATEST

NOW = 1_700_000_000_000
Committed = list[tuple[int, int, int]]  # (partition, base offset, record count) per committed chunk


def new_file(key: str | None = None) -> NewFile:
    return NewFile(key or f"L0/{uuid.uuid4().hex}", size=4096, level=LEVEL_INGEST, created_ms=NOW)


def chunk(topic: str, partition: int, count: int, position: int = 0) -> NewChunk:
    return NewChunk(
        topic=topic,
        partition=partition,
        record_count=count,
        position=position,
        length=100 * count,
        min_timestamp=NOW - 5,
        max_timestamp=NOW,
        crc=0xFFFF_FFFF,  # the largest CRC-32C must fit
    )


def sql_store(store: MetadataStore) -> SqlMetadataStore:
    assert isinstance(store, SqlMetadataStore)
    return store


def commit_many(url: str, topic: str, worker: int, flushes: int, partitions: int = 3) -> Committed:
    """Commit ``flushes`` files, each with a chunk for every partition, through a store of its own.

    Runs in threads and in spawned processes (so it lives at module level). The chunk order within a
    file alternates, so the store's own sorting is what keeps the lock order deterministic.
    """
    store = open_metadata_store(url)
    try:
        try:
            store.create_topic(topic, partitions, {}, NOW)
        except TopicExists:
            pass
        committed: Committed = []
        for i in range(flushes):
            order = range(partitions) if i % 2 else reversed(range(partitions))
            chunks = [chunk(topic, p, 1 + (worker + i + p) % 4, position=100 * p) for p in order]
            result = store.commit_flush(new_file(), chunks, [], NOW)
            committed.extend(
                (c.partition, b, c.record_count) for c, b in zip(chunks, result.base_offsets, strict=True)
            )
        return committed
    finally:
        store.close()


def assert_dense(store: MetadataStore, topic: str, partitions: int, committed: Committed) -> None:
    """Chunk rows cover 0..high_watermark-1 exactly once, and are exactly the committed chunks."""
    for p in range(partitions):
        rows = store.find_chunks(topic, p, 0, 1_000_000)
        assert [(r.base_offset, r.record_count) for r in rows] == sorted(
            (b, n) for q, b, n in committed if q == p
        )
        expected_next = 0
        for row in rows:
            assert row.base_offset == expected_next
            assert row.last_offset == row.base_offset + row.record_count - 1
            expected_next = row.last_offset + 1
        assert store.partition_state(topic, p).high_watermark == expected_next


# --- topics ---------------------------------------------------------------------------------------------


def test_topic_crud_and_errors(metadata_store: MetadataStore) -> None:
    info = metadata_store.create_topic("orders", 3, {"cleanup.policy": "compact"}, NOW)
    assert (info.name, info.partitions, dict(info.configs), info.created_ms) == (
        "orders",
        3,
        {"cleanup.policy": "compact"},
        NOW,
    )
    assert metadata_store.get_topic("orders") == info
    metadata_store.create_topic("a.b-c_d", 1, {}, NOW)
    assert metadata_store.list_topics() == ["a.b-c_d", "orders"]
    assert metadata_store.partition_states("orders") == [PartitionState("orders", p, 0, 0) for p in range(3)]
    assert metadata_store.partition_state("orders", 2) == PartitionState("orders", 2, 0, 0)

    with pytest.raises(TopicExists):
        metadata_store.create_topic("orders", 5, {}, NOW)
    assert metadata_store.get_topic("orders").partitions == 3  # the failed create changed nothing
    for bad in (-1, 3):
        with pytest.raises(UnknownPartition):
            metadata_store.partition_state("orders", bad)
    with pytest.raises(UnknownTopic):
        metadata_store.get_topic("nope")
    with pytest.raises(UnknownTopic):
        metadata_store.partition_states("nope")
    with pytest.raises(UnknownTopic):
        metadata_store.partition_state("nope", 0)
    with pytest.raises(UnknownTopic):
        metadata_store.update_topic_configs("nope", {"retention.ms": "1"})
    with pytest.raises(UnknownTopic):
        metadata_store.delete_topic("nope", NOW)
    with pytest.raises(ValueError):
        metadata_store.create_topic("empty", 0, {}, NOW)

    metadata_store.delete_topic("orders", NOW)
    assert metadata_store.list_topics() == ["a.b-c_d"]
    with pytest.raises(UnknownTopic):
        metadata_store.get_topic("orders")


def test_config_merge_and_reset(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 1, {"cleanup.policy": "compact", "retention.ms": "1000"}, NOW)
    updated = metadata_store.update_topic_configs(
        "t", {"retention.ms": "2000", "min.cleanable.dirty.ratio": "0.1", "cleanup.policy": None}
    )
    expected = {"retention.ms": "2000", "min.cleanable.dirty.ratio": "0.1"}
    assert dict(updated.configs) == expected
    assert dict(metadata_store.get_topic("t").configs) == expected
    # Resetting a key that is not set is not an error.
    assert dict(metadata_store.update_topic_configs("t", {"max.message.bytes": None}).configs) == expected


# --- the write path -------------------------------------------------------------------------------------


def test_add_partitions_only_grows_and_new_partitions_start_empty(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("grow", 2, {"retention.ms": "5"}, 0)
    metadata_store.commit_flush(NewFile("k1", 10, 0, 0), [chunk("grow", 1, 3)], [], 0)
    info = metadata_store.add_partitions("grow", 4)
    assert (info.partitions, dict(info.configs)) == (4, {"retention.ms": "5"})
    assert metadata_store.get_topic("grow").partitions == 4
    states = [
        (s.partition, s.log_start_offset, s.high_watermark) for s in metadata_store.partition_states("grow")
    ]
    assert states == [(0, 0, 0), (1, 0, 3), (2, 0, 0), (3, 0, 0)]
    for count in (4, 3):
        with pytest.raises(InvalidPartitionCount):
            metadata_store.add_partitions("grow", count)
    assert metadata_store.get_topic("grow").partitions == 4
    with pytest.raises(UnknownTopic):
        metadata_store.add_partitions("nope", 2)


def test_flush_offsets_are_dense_per_partition(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 3, {}, NOW)
    committed: Committed = []
    for i in range(30):
        # Varying subsets and sizes: partition p gets a chunk in every flush where (i + p) % 3 != 0.
        chunks = [chunk("t", p, 1 + (i * 7 + p) % 5) for p in (2, 0, 1) if (i + p) % 3 != 0]
        result = metadata_store.commit_flush(new_file(), chunks, [], NOW)
        assert len(result.base_offsets) == len(chunks)
        committed.extend(
            (c.partition, b, c.record_count) for c, b in zip(chunks, result.base_offsets, strict=True)
        )
    assert all(b >= 0 for _, b, _ in committed)
    assert_dense(metadata_store, "t", 3, committed)


def test_flush_over_more_partitions_than_one_statement_holds(metadata_store: MetadataStore) -> None:
    # The chunk rows and next offsets are written BATCH_ROWS to a statement: a flush spanning more
    # partitions than that takes several, and every partition still gets its own dense offsets.
    partitions = BATCH_ROWS + 37
    metadata_store.create_topic("wide", partitions, {}, NOW)
    committed: Committed = []
    for i in range(3):
        chunks = [chunk("wide", p, 1 + (p + i) % 4) for p in reversed(range(partitions))]
        result = metadata_store.commit_flush(new_file(), chunks, [], NOW)
        committed.extend(
            (c.partition, b, c.record_count) for c, b in zip(chunks, result.base_offsets, strict=True)
        )
    assert all(b >= 0 for _, b, _ in committed)
    assert_dense(metadata_store, "wide", partitions, committed)


def test_chunks_of_deleted_or_missing_partitions_get_minus_one(metadata_store: MetadataStore) -> None:
    store = sql_store(metadata_store)
    store.create_topic("kept", 2, {}, NOW)
    store.create_topic("gone", 1, {}, NOW)
    store.delete_topic("gone", NOW)

    mixed = new_file()
    result = store.commit_flush(
        mixed, [chunk("gone", 0, 4), chunk("kept", 1, 2), chunk("kept", 7, 3), chunk("never", 0, 1)], [], NOW
    )
    assert result.base_offsets == [-1, 0, -1, -1]
    assert [(r.topic, r.partition, r.base_offset) for r in store.find_chunks("kept", 1, 0, 10)] == [
        ("kept", 1, 0)
    ]
    assert store.find_chunks("gone", 0, 0, 10) == []
    assert store.file_states([mixed.object_key]) == {mixed.object_key: FileState(FILE_LIVE, None)}

    # A file holding nothing live is still recorded (so it is not an orphan) but obsolete at once.
    dead = new_file()
    assert store.commit_flush(dead, [chunk("gone", 0, 4)], [], NOW + 1).base_offsets == [-1]
    assert store.file_states([dead.object_key]) == {dead.object_key: FileState(FILE_OBSOLETE, NOW + 1)}
    assert store.known_object_keys([dead.object_key]) == {dead.object_key}


def test_commit_flush_rejects_malformed_input(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 2, {}, NOW)
    with pytest.raises(ValueError):
        metadata_store.commit_flush(new_file(), [chunk("t", 0, 1), chunk("t", 0, 2)], [], NOW)
    with pytest.raises(ValueError):
        metadata_store.commit_flush(new_file(), [chunk("t", 0, 0)], [], NOW)
    for placements in ([(1, 0)], [(0, 2)], [(0, -1)]):
        with pytest.raises(ValueError):
            metadata_store.commit_flush(
                new_file(), [chunk("t", 0, 2)], [IdempotencyEntry("k", "t", placements)], NOW
            )
    assert metadata_store.partition_state("t", 0).high_watermark == 0


def test_replayed_commit_returns_the_recorded_result(metadata_store: MetadataStore) -> None:
    """A commit retried after an ambiguous failure (same object key) must not assign offsets twice."""
    metadata_store.create_topic("t", 2, {}, NOW)
    file = new_file()
    chunks = [chunk("t", 1, 3), chunk("t", 0, 2)]
    entries = [IdempotencyEntry("req", "t", [(0, 2), (1, 0)])]
    first = metadata_store.commit_flush(file, chunks, entries, NOW)
    again = metadata_store.commit_flush(file, chunks, entries, NOW + 10)
    assert again == first
    assert [s.high_watermark for s in metadata_store.partition_states("t")] == [2, 3]


def test_commit_reports_each_chunks_log_start(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 2, {}, NOW)
    metadata_store.commit_flush(new_file(), [chunk("t", 0, 5)], [], NOW)
    metadata_store.apply_retention("t", 0, 3, NOW)
    result = metadata_store.commit_flush(
        new_file(), [chunk("t", 1, 1), chunk("t", 0, 2), chunk("u", 0, 1)], [], NOW
    )
    assert result.base_offsets == [0, 5, -1]
    assert result.log_starts == [0, 3, -1]  # a topic that is not there: unknown


# --- idempotency ----------------------------------------------------------------------------------------


def test_idempotency_lookup_window_and_expiry(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 2, {}, NOW)
    metadata_store.commit_flush(new_file(), [chunk("t", 0, 5)], [], NOW)  # partition 0 now starts at 5
    result = metadata_store.commit_flush(
        new_file(),
        [chunk("t", 0, 3), chunk("t", 1, 2)],
        [IdempotencyEntry("a", "t", [(0, 0), (1, 1), (0, 2)]), IdempotencyEntry("b", "t", [(1, 0)])],
        NOW,
    )
    assert result.base_offsets == [5, 0]
    assert result.request_offsets == {"a": [(0, 5), (1, 1), (0, 7)], "b": [(1, 0)]}
    assert metadata_store.lookup_idempotency("a", NOW) == [(0, 5), (1, 1), (0, 7)]
    assert metadata_store.lookup_idempotency("a", NOW - 1000) == [(0, 5), (1, 1), (0, 7)]
    assert metadata_store.lookup_idempotency("a", NOW + 1) is None  # committed before the window
    assert metadata_store.lookup_idempotency("unknown", 0) is None

    metadata_store.commit_flush(
        new_file(), [chunk("t", 1, 1)], [IdempotencyEntry("c", "t", [(0, 0)])], NOW + 50
    )
    assert metadata_store.expire_idempotency(NOW + 1) == 2
    assert metadata_store.lookup_idempotency("a", 0) is None
    assert metadata_store.lookup_idempotency("c", 0) == [(1, 2)]
    assert metadata_store.expire_idempotency(NOW + 1) == 0


def test_idempotency_conflict_writes_nothing(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 2, {}, NOW)
    metadata_store.commit_flush(new_file(), [chunk("t", 0, 4)], [IdempotencyEntry("dup", "t", [(0, 3)])], NOW)
    before = metadata_store.partition_states("t")

    loser = new_file()
    with pytest.raises(IdempotencyConflict) as raised:
        metadata_store.commit_flush(
            loser,
            [chunk("t", 0, 2), chunk("t", 1, 2)],
            [IdempotencyEntry("fresh", "t", [(1, 0)]), IdempotencyEntry("dup", "t", [(0, 0), (0, 1)])],
            NOW + 5,
        )
    assert raised.value.existing == {"dup": [(0, 3)]}
    assert metadata_store.partition_states("t") == before
    assert metadata_store.known_object_keys([loser.object_key]) == set()
    assert metadata_store.lookup_idempotency("fresh", 0) is None
    assert [r.base_offset for r in metadata_store.find_chunks("t", 0, 0, 10)] == [0]

    # The caller commits the rest without the duplicate's records: offsets continue where they were.
    result = metadata_store.commit_flush(
        loser, [chunk("t", 1, 2)], [IdempotencyEntry("fresh", "t", [(0, 0)])], NOW + 6
    )
    assert result.request_offsets == {"fresh": [(1, 0)]}


def test_before_commit_runs_last_and_its_failure_writes_nothing(metadata_store: MetadataStore) -> None:
    """The flusher's hook for a commit beside its upload: it runs after every statement, inside the
    transaction, and if it raises (the upload failed) the file, chunks and offsets are rolled back."""
    metadata_store.create_topic("t", 2, {}, NOW)
    metadata_store.commit_flush(new_file(), [chunk("t", 0, 4)], [], NOW)
    before = metadata_store.partition_states("t")
    seen: list[list[int]] = []

    def upload_failed() -> None:
        # Another connection sees none of this transaction's work yet.
        seen.append([s.high_watermark for s in metadata_store.partition_states("t")])
        raise Unavailable("the flush's upload failed: disk gone")

    failed = new_file()
    with pytest.raises(Unavailable):
        metadata_store.commit_flush(
            failed, [chunk("t", 0, 2), chunk("t", 1, 3)], [], NOW + 1, before_commit=upload_failed
        )
    assert seen == [[4, 0]]
    assert metadata_store.partition_states("t") == before
    assert metadata_store.known_object_keys([failed.object_key]) == set()

    calls: list[str] = []
    result = metadata_store.commit_flush(
        new_file(), [chunk("t", 0, 2)], [], NOW + 2, before_commit=lambda: calls.append("waited")
    )
    assert calls == ["waited"]
    assert result.base_offsets == [4]
    assert metadata_store.partition_state("t", 0).high_watermark == 6


def test_requests_in_dropped_chunks_are_not_recorded(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 1, {}, NOW)
    result = metadata_store.commit_flush(
        new_file(),
        [chunk("t", 0, 1), chunk("deleted", 0, 2)],
        [IdempotencyEntry("ok", "t", [(0, 0)]), IdempotencyEntry("lost", "deleted", [(1, 0), (1, 1)])],
        NOW,
    )
    assert result.request_offsets == {"ok": [(0, 0)], "lost": [(0, -1), (0, -1)]}
    assert metadata_store.lookup_idempotency("ok", 0) == [(0, 0)]
    assert metadata_store.lookup_idempotency("lost", 0) is None


# --- the read path --------------------------------------------------------------------------------------


def test_find_chunks_order_offset_and_limit(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 2, {}, NOW)
    keys = []
    for count in (3, 1, 4, 1, 5):  # offsets 0-2, 3, 4-7, 8, 9-13
        file = new_file()
        keys.append(file.object_key)
        metadata_store.commit_flush(file, [chunk("t", 1, 1), chunk("t", 0, count, position=64)], [], NOW)

    every = metadata_store.find_chunks("t", 0, 0, 100)
    assert [(r.base_offset, r.last_offset) for r in every] == [(0, 2), (3, 3), (4, 7), (8, 8), (9, 13)]
    assert [r.object_key for r in every] == keys
    first = every[0]
    assert (first.topic, first.partition, first.position, first.length, first.record_count) == (
        "t",
        0,
        64,
        300,
        3,
    )
    assert (first.min_timestamp, first.max_timestamp, first.crc, first.has_holes) == (
        NOW - 5,
        NOW,
        0xFFFF_FFFF,
        False,
    )
    assert len({r.chunk_id for r in every}) == 5

    assert [r.base_offset for r in metadata_store.find_chunks("t", 0, 0, 2)] == [0, 3]
    assert [r.base_offset for r in metadata_store.find_chunks("t", 0, 5, 2)] == [4, 8]  # 5 is inside 4-7
    assert [r.base_offset for r in metadata_store.find_chunks("t", 0, 13, 10)] == [9]
    assert metadata_store.find_chunks("t", 0, 14, 10) == []
    assert metadata_store.find_chunks("t", 0, 0, 0) == []
    assert metadata_store.find_chunks("nope", 0, 0, 10) == []


# --- consumer groups ------------------------------------------------------------------------------------


def test_group_offsets_upsert_and_errors(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("b", 2, {}, NOW)
    metadata_store.create_topic("a", 1, {}, NOW)
    metadata_store.commit_group_offsets("g", [("b", 1, 10), ("a", 0, 3)], NOW)
    metadata_store.commit_group_offsets("g", [("b", 1, 12), ("b", 0, 1), ("b", 0, 2)], NOW + 1)
    metadata_store.commit_group_offsets("other", [("a", 0, 99)], NOW + 2)
    assert metadata_store.group_offsets("g") == [
        GroupOffset("a", 0, 3, NOW),
        GroupOffset("b", 0, 2, NOW + 1),
        GroupOffset("b", 1, 12, NOW + 1),
    ]
    assert metadata_store.group_offsets("nobody") == []

    with pytest.raises(UnknownTopic):
        metadata_store.commit_group_offsets("g", [("a", 0, 50), ("zzz", 0, 1)], NOW + 3)
    with pytest.raises(UnknownPartition):
        metadata_store.commit_group_offsets("g", [("a", 0, 50), ("b", 2, 1)], NOW + 3)
    assert metadata_store.group_offsets("g")[0] == GroupOffset("a", 0, 3, NOW)  # all or nothing

    metadata_store.delete_topic("a", NOW + 4)
    assert [o.topic for o in metadata_store.group_offsets("g")] == ["b", "b"]
    assert metadata_store.group_offsets("other") == []


# --- files ------------------------------------------------------------------------------------------------


def test_delete_topic_marks_files_without_live_chunks_obsolete(metadata_store: MetadataStore) -> None:
    store = sql_store(metadata_store)
    store.create_topic("t", 2, {}, NOW)
    store.create_topic("u", 1, {}, NOW)
    only_t, shared = new_file(), new_file()
    store.commit_flush(only_t, [chunk("t", 0, 2), chunk("t", 1, 2)], [], NOW)
    store.commit_flush(shared, [chunk("t", 0, 1), chunk("u", 0, 1)], [], NOW)
    store.commit_group_offsets("g", [("t", 0, 1)], NOW)

    store.delete_topic("t", NOW + 100)
    assert store.file_states([only_t.object_key, shared.object_key]) == {
        only_t.object_key: FileState(FILE_OBSOLETE, NOW + 100),
        shared.object_key: FileState(FILE_LIVE, None),
    }
    assert store.find_chunks("t", 0, 0, 10) == []
    assert store.group_offsets("g") == []
    # Obsolete files stay known (GC deletes them after the grace period, not the orphan sweep).
    assert store.known_object_keys([only_t.object_key, shared.object_key, "L0/orphan"]) == {
        only_t.object_key,
        shared.object_key,
    }

    store.delete_topic("u", NOW + 200)
    assert store.file_states([shared.object_key]) == {shared.object_key: FileState(FILE_OBSOLETE, NOW + 200)}

    # A topic created again under the same name starts from offset 0 with no trace of the old one.
    store.create_topic("t", 1, {}, NOW + 300)
    assert store.partition_states("t") == [PartitionState("t", 0, 0, 0)]
    assert store.commit_flush(new_file(), [chunk("t", 0, 1)], [], NOW).base_offsets == [0]


def test_known_object_keys(metadata_store: MetadataStore) -> None:
    metadata_store.create_topic("t", 1, {}, NOW)
    files = [new_file() for _ in range(3)]
    for f in files:
        metadata_store.commit_flush(f, [chunk("t", 0, 1)], [], NOW)
    keys = [f.object_key for f in files]
    assert metadata_store.known_object_keys([]) == set()
    assert metadata_store.known_object_keys([*keys, "nope", keys[0]]) == set(keys)
    # More keys than one statement's batch.
    assert metadata_store.known_object_keys([f"x{i}" for i in range(1000)] + keys[:1]) == {keys[0]}


# --- schema and opening ---------------------------------------------------------------------------------


def test_migrations_are_idempotent(metadata_url: str) -> None:
    first = sql_store(open_metadata_store(metadata_url))
    try:
        assert first.applied_migrations == tuple(range(1, LATEST + 1))
        first.create_topic("t", 1, {"k": "v"}, NOW)
    finally:
        first.close()
    second = sql_store(open_metadata_store(metadata_url))
    try:
        assert second.applied_migrations == ()
        assert dict(second.get_topic("t").configs) == {"k": "v"}
    finally:
        second.close()


def test_concurrent_first_opens_migrate_once(metadata_url: str) -> None:
    openers = 4
    barrier = threading.Barrier(openers)

    def open_after_barrier(_: int) -> SqlMetadataStore:
        barrier.wait()
        return sql_store(open_metadata_store(metadata_url))

    with ThreadPoolExecutor(openers) as pool:
        stores = list(pool.map(open_after_barrier, range(openers)))
    try:
        assert sorted(s.applied_migrations for s in stores) == [(), (), (), tuple(range(1, LATEST + 1))]
        stores[0].create_topic("t", 1, {}, NOW)
        assert all(s.list_topics() == ["t"] for s in stores)
    finally:
        for s in stores:
            s.close()


def test_sqlite_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_metadata_store("sqlite:///nested/dir/meta.db")  # relative, parents created
    store.close()
    assert (tmp_path / "nested" / "dir" / "meta.db").is_file()
    absolute = tmp_path / "abs" / "meta.db"
    store = open_metadata_store(f"sqlite:///{absolute}")
    store.close()
    assert absolute.is_file()
    for bad in (
        "sqlite://:memory:",
        "sqlite:///",
        "sqlite:///dir/",
        "sqlite:///m.db?mode=ro",
        "mysql://x/y",
        "nope",
    ):
        with pytest.raises(SettingsError):
            open_metadata_store(bad)


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "meta.db"
    open_sqlite_store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (99, 'from the future', 0)")
    conn.close()
    with pytest.raises(SettingsError):
        open_sqlite_store(path)


# --- failures become Unavailable ------------------------------------------------------------------------


def test_sqlite_locked_beyond_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "meta.db"
    store = open_sqlite_store(path, busy_timeout_s=0.2)
    try:
        store.create_topic("t", 1, {}, NOW)
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
            with pytest.raises(Unavailable) as raised:
                store.commit_flush(new_file(), [chunk("t", 0, 1)], [], NOW)
            assert raised.value.retriable
            assert not isinstance(raised.value.__cause__, Unavailable)  # the driver error is only the cause
            assert store.partition_state("t", 0).high_watermark == 0  # WAL: readers are not blocked
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert store.commit_flush(new_file(), [chunk("t", 0, 1)], [], NOW).base_offsets == [0]
    finally:
        store.close()


def test_postgres_unreachable_is_unavailable_and_a_malformed_url_a_settings_error() -> None:
    with pytest.raises(Unavailable):
        open_metadata_store("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")
    with pytest.raises(SettingsError):
        open_metadata_store("postgres://postgres@127.0.0.1:1/test?no_such_parameter=1")


@pytest.mark.postgres
def test_postgres_lock_timeout_is_unavailable(postgres_schema_url: str) -> None:
    store = open_postgres_store(postgres_schema_url, lock_timeout_s=0.2)
    try:
        store.create_topic("t", 1, {}, NOW)
        with psycopg.connect(postgres_schema_url) as holder:
            holder.execute("SELECT * FROM partitions WHERE topic = 't' FOR UPDATE")  # another agent, stuck
            with pytest.raises(Unavailable):
                store.commit_flush(new_file(), [chunk("t", 0, 1)], [], NOW)
            holder.rollback()
        assert store.commit_flush(new_file(), [chunk("t", 0, 1)], [], NOW).base_offsets == [0]
    finally:
        store.close()


def test_closed_store_raises_a_strata_error(metadata_store: MetadataStore) -> None:
    metadata_store.close()
    with pytest.raises(StrataError):
        metadata_store.list_topics()


# --- concurrency ----------------------------------------------------------------------------------------


def test_concurrent_threads_get_unique_contiguous_offsets(metadata_url: str) -> None:
    threads, flushes = 8, 50
    setup = open_metadata_store(metadata_url)
    try:
        setup.create_topic("t", 3, {}, NOW)
        with ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(lambda w: commit_many(metadata_url, "t", w, flushes), range(threads)))
        committed = [c for r in results for c in r]
        assert len(committed) == threads * flushes * 3
        assert_dense(setup, "t", 3, committed)
    finally:
        setup.close()


def test_concurrent_sqlite_processes_get_unique_contiguous_offsets(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    processes, flushes = 3, 40
    # Every process starts on a fresh file: the schema migration and the topic creation race too.
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(commit_many, url, "t", w, flushes) for w in range(processes)]
        committed = [c for f in futures for c in f.result(timeout=60)]
    store = open_metadata_store(url)
    try:
        assert len(committed) == processes * flushes * 3
        assert_dense(store, "t", 3, committed)
    finally:
        store.close()
