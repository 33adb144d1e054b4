"""The SQL implementation of ``MetadataStore``, shared by SQLite and PostgreSQL.

Two layers:
- ``Backend``: runs one function inside one transaction on a pooled connection, and turns every driver
  error into a Strata error (``Unavailable`` when retrying may help). ``sqlite.py`` and ``postgres.py``
  implement it. Every query here is written once, with ``?`` placeholders; the backend adapts them.
- ``SqlMetadataStore``: the queries. It never sees a driver exception.

Locking protocol. SQLite serialises writers with ``BEGIN IMMEDIATE``, so row locks are empty strings
there. PostgreSQL runs at READ COMMITTED and takes row locks; every write transaction takes them in this
global order, so no two transactions can wait on each other in a cycle:
  1. ``partitions`` rows, sorted by (topic in binary/code-point order, partition_id);
  2. ``topics`` rows (only ``update_topic_configs`` and ``delete_topic``, one row);
  3. ``files`` rows, sorted by file_id, taken before deciding that a file has no live chunk left;
  4. ``idempotency`` keys, inserted in sorted key order;
  5. ``group_offsets`` rows, upserted in sorted (topic, partition_id) order.
A deadlock or serialization failure can still be reported by the server (it is free to); the PostgreSQL
backend re-runs the transaction a few times before giving up with ``Unavailable``.

Lock strengths: a flush only changes ``next_offset`` (not a key), so it takes FOR NO KEY UPDATE;
committing group offsets only needs the partition to keep existing, so it takes FOR KEY SHARE. The two do
not block each other, while ``delete_topic`` (FOR UPDATE, then DELETE) excludes both.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from storage.clock import Clock, SystemClock
from storage.errors import CommitConflict, TopicExists, UnknownPartition, UnknownTopic
from storage.metadata import schema
from storage.metadata.base import (
    FILE_LIVE,
    FILE_OBSOLETE,
    ChunkRow,
    FlushResult,
    GroupOffset,
    IdempotencyConflict,
    IdempotencyEntry,
    MetadataStore,
    NewChunk,
    NewFile,
    PartitionState,
    TopicInfo,
)

Param = str | int | float | bool | None
Row = tuple[Any, ...]
T = TypeVar("T")
X = TypeVar("X")

# Rows per multi-row statement. Stays well under the bound-parameter limits (SQLite 32766, PostgreSQL
# 65535) with up to 5 parameters per row, while keeping a flush of many partitions to a few round trips.
BATCH_ROWS = 400


class Tx(Protocol):
    """One open transaction. Statements use ``?`` placeholders."""

    def execute(self, sql: str, params: Sequence[Param] = ()) -> int:
        """Run a statement; returns the number of rows it changed."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Param]]) -> None: ...

    def all(self, sql: str, params: Sequence[Param] = ()) -> list[Row]: ...

    def one(self, sql: str, params: Sequence[Param] = ()) -> Row | None: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    name: str  # a key of schema.MIGRATIONS
    # Suffixes for SELECT that take row locks (empty where the backend serialises writers instead).
    for_update: str
    for_no_key_update: str
    for_key_share: str
    # Collation suffix for ORDER BY on text so that the database sorts as Python does (by code point):
    # lock order is decided partly in Python (batching) and partly in SQL, and the two must agree.
    binary_collation: str


class Backend(ABC):
    dialect: Dialect
    description: str  # where the database is, for error messages; never contains a password

    @abstractmethod
    def run(self, work: Callable[[Tx], T], *, write: bool, what: str) -> T:
        """Run ``work`` in one transaction: commit if it returns, roll back if it raises.

        ``write`` transactions may change rows; read transactions must not. ``work`` may be called more
        than once (the backend retries lost races), so it must have no effect outside the transaction.
        Driver errors come out as ``Unavailable`` (retriable) or ``StrataError``; exceptions raised by
        ``work`` itself propagate unchanged after the rollback. ``what`` names the operation in errors.
        """

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FileState:
    state: str  # FILE_LIVE or FILE_OBSOLETE
    obsolete_since_ms: int | None


def batches(items: Sequence[X], size: int = BATCH_ROWS) -> Iterator[Sequence[X]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _placeholders(rows: int, per_row: int) -> str:
    row = "(" + ", ".join(["?"] * per_row) + ")"
    return ", ".join([row] * rows)


def _offsets_to_json(offsets: Sequence[tuple[int, int]]) -> str:
    return json.dumps([[p, o] for p, o in offsets], separators=(",", ":"))


def _offsets_from_json(text: str) -> list[tuple[int, int]]:
    return [(int(p), int(o)) for p, o in json.loads(text)]


def _configs_from_json(text: str) -> dict[str, str]:
    loaded = json.loads(text)
    return {str(k): str(v) for k, v in loaded.items()}


def _validate_flush(chunks: Sequence[NewChunk], idempotency: Sequence[IdempotencyEntry]) -> None:
    """Caller bugs are ValueErrors raised before any SQL runs."""
    seen: set[tuple[str, int]] = set()
    for chunk in chunks:
        if chunk.record_count <= 0:
            raise ValueError(f"chunk of {chunk.topic}/{chunk.partition} has no records")
        key = (chunk.topic, chunk.partition)
        if key in seen:
            raise ValueError(f"{chunk.topic}/{chunk.partition} appears twice in one flush")
        seen.add(key)
    keys: set[str] = set()
    for entry in idempotency:
        if entry.key in keys:
            raise ValueError(f"idempotency key {entry.key!r} appears twice in one flush")
        keys.add(entry.key)
        for index, relative in entry.placements:
            if not 0 <= index < len(chunks):
                raise ValueError(f"idempotency key {entry.key!r} points at chunk {index} of {len(chunks)}")
            chunk = chunks[index]
            if chunk.topic != entry.topic:
                raise ValueError(
                    f"idempotency key {entry.key!r} is for {entry.topic}, chunk is {chunk.topic}"
                )
            if not 0 <= relative < chunk.record_count:
                raise ValueError(f"idempotency key {entry.key!r}: relative offset {relative} out of chunk")


def _request_offsets(
    chunks: Sequence[NewChunk], bases: Sequence[int], entry: IdempotencyEntry
) -> list[tuple[int, int]]:
    """Absolute (partition, offset) of each record of a request; offset -1 where the chunk was dropped."""
    return [
        (chunks[index].partition, bases[index] + relative if bases[index] >= 0 else -1)
        for index, relative in entry.placements
    ]


class SqlMetadataStore(MetadataStore):
    """``MetadataStore`` over any ``Backend``. Thread-safe: every call is one backend transaction."""

    def __init__(self, backend: Backend, url: str, *, clock: Clock | None = None) -> None:
        self.url = url
        self._backend = backend
        self._d = backend.dialect
        now_ms = (clock or SystemClock()).now_ms()
        try:
            self.applied_migrations: tuple[int, ...] = tuple(
                backend.run(
                    lambda tx: schema.migrate(tx, backend.dialect.name, now_ms), write=True, what="migrate"
                )
            )
        except BaseException:
            backend.close()
            raise

    def close(self) -> None:
        self._backend.close()

    # --- topics -----------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str], now_ms: int) -> TopicInfo:
        if partitions <= 0:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        stored = dict(configs)

        def work(tx: Tx) -> TopicInfo:
            # ON CONFLICT DO NOTHING rather than catching a unique violation: on PostgreSQL a failed
            # statement poisons the transaction, and a concurrent creator's row is waited for, not missed.
            inserted = tx.execute(
                "INSERT INTO topics (name, partitions, configs, created_ms) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name) DO NOTHING",
                (name, partitions, json.dumps(stored, sort_keys=True), now_ms),
            )
            if inserted == 0:
                raise TopicExists(f"topic {name!r} already exists")
            tx.executemany(
                "INSERT INTO partitions (topic, partition_id, next_offset, log_start_offset)"
                " VALUES (?, ?, 0, 0)",
                [(name, p) for p in range(partitions)],
            )
            return TopicInfo(name, partitions, stored, now_ms)

        return self._backend.run(work, write=True, what="create_topic")

    def get_topic(self, name: str) -> TopicInfo:
        return self._backend.run(lambda tx: self._get_topic(tx, name, ""), write=False, what="get_topic")

    def _get_topic(self, tx: Tx, name: str, lock: str) -> TopicInfo:
        row = tx.one(
            f"SELECT name, partitions, configs, created_ms FROM topics WHERE name = ?{lock}", (name,)
        )
        if row is None:
            raise UnknownTopic(f"unknown topic {name!r}")
        return TopicInfo(str(row[0]), int(row[1]), _configs_from_json(row[2]), int(row[3]))

    def list_topics(self) -> list[str]:
        rows = self._backend.run(
            lambda tx: tx.all(f"SELECT name FROM topics ORDER BY name{self._d.binary_collation}"),
            write=False,
            what="list_topics",
        )
        return [str(r[0]) for r in rows]

    def update_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> TopicInfo:
        changes = dict(changes)

        def work(tx: Tx) -> TopicInfo:
            # Read-modify-write under the topic's row lock: two concurrent updates of different keys
            # both survive instead of the later one overwriting the earlier.
            topic = self._get_topic(tx, name, self._d.for_update)
            merged = dict(topic.configs)
            for key, value in changes.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            tx.execute(
                "UPDATE topics SET configs = ? WHERE name = ?", (json.dumps(merged, sort_keys=True), name)
            )
            return TopicInfo(topic.name, topic.partitions, merged, topic.created_ms)

        return self._backend.run(work, write=True, what="update_topic_configs")

    def delete_topic(self, name: str, now_ms: int) -> None:
        """Raises UnknownTopic. Its files that keep no live chunk become obsolete (GC after grace)."""

        def work(tx: Tx) -> None:
            locked = tx.all(
                "SELECT partition_id FROM partitions WHERE topic = ?"
                f" ORDER BY partition_id{self._d.for_update}",
                (name,),
            )
            if not locked:
                raise UnknownTopic(f"unknown topic {name!r}")
            # Lock the files before deleting the chunks, so that whoever else removes chunk rows from the
            # same files (compaction) decides on obsolescence after us, seeing our deletes, and vice versa.
            file_ids = [
                int(r[0])
                for r in tx.all(
                    "SELECT file_id FROM files WHERE file_id IN (SELECT file_id FROM chunks WHERE topic = ?)"
                    f" ORDER BY file_id{self._d.for_no_key_update}",
                    (name,),
                )
            ]
            tx.execute("DELETE FROM chunks WHERE topic = ?", (name,))
            self._mark_obsolete_if_empty(tx, file_ids, now_ms)
            tx.execute("DELETE FROM group_offsets WHERE topic = ?", (name,))
            tx.execute("DELETE FROM partitions WHERE topic = ?", (name,))
            tx.execute("DELETE FROM topics WHERE name = ?", (name,))

        self._backend.run(work, write=True, what="delete_topic")

    def _mark_obsolete_if_empty(self, tx: Tx, file_ids: Sequence[int], now_ms: int) -> None:
        """Files among ``file_ids`` (already row-locked by the caller) with no chunk row left -> obsolete."""
        for batch in batches(sorted(file_ids)):
            tx.execute(
                "UPDATE files SET state = ?, obsolete_since_ms = ?"
                f" WHERE state = ? AND file_id IN ({', '.join(['?'] * len(batch))})"
                " AND NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.file_id = files.file_id)",
                (FILE_OBSOLETE, now_ms, FILE_LIVE, *batch),
            )

    # --- partitions ---------------------------------------------------------------------------------------
    def partition_states(self, topic: str) -> list[PartitionState]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT partition_id, log_start_offset, next_offset FROM partitions WHERE topic = ?"
                " ORDER BY partition_id",
                (topic,),
            ),
            write=False,
            what="partition_states",
        )
        # A topic has at least one partition row for as long as it exists (created and deleted together).
        if not rows:
            raise UnknownTopic(f"unknown topic {topic!r}")
        return [PartitionState(topic, int(r[0]), int(r[1]), int(r[2])) for r in rows]

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        def work(tx: Tx) -> PartitionState:
            row = tx.one(
                "SELECT log_start_offset, next_offset FROM partitions WHERE topic = ? AND partition_id = ?",
                (topic, partition),
            )
            if row is None:
                raise self._missing_partition(tx, topic, partition)
            return PartitionState(topic, partition, int(row[0]), int(row[1]))

        return self._backend.run(work, write=False, what="partition_state")

    def _missing_partition(self, tx: Tx, topic: str, partition: int) -> UnknownTopic | UnknownPartition:
        row = tx.one("SELECT partitions FROM topics WHERE name = ?", (topic,))
        if row is None:
            return UnknownTopic(f"unknown topic {topic!r}")
        return UnknownPartition(
            f"topic {topic!r} has {row[0]} partition(s); there is no partition {partition}"
        )

    def _lock_partitions(
        self, tx: Tx, keys: Sequence[tuple[str, int]], lock: str
    ) -> dict[tuple[str, int], int]:
        """Lock the partitions rows of ``keys`` (sorted, distinct); returns next_offset of those that exist.

        Batches are taken in ``keys`` order and rows within a batch in the same (binary) order, so the
        locks are acquired in one global order.
        """
        found: dict[tuple[str, int], int] = {}
        for batch in batches(keys):
            rows = tx.all(
                "SELECT topic, partition_id, next_offset FROM partitions"
                f" WHERE (topic, partition_id) IN (VALUES {_placeholders(len(batch), 2)})"
                f" ORDER BY topic{self._d.binary_collation}, partition_id{lock}",
                [v for key in batch for v in key],
            )
            for topic, partition, next_offset in rows:
                found[(str(topic), int(partition))] = int(next_offset)
        return found

    # --- the write path -----------------------------------------------------------------------------------
    def commit_flush(
        self,
        file: NewFile,
        chunks: Sequence[NewChunk],
        idempotency: Sequence[IdempotencyEntry],
        now_ms: int,
    ) -> FlushResult:
        """One transaction: the file row, every chunk's base offset and row, the idempotency rows.

        Beyond the interface's contract:
        - A partition number the topic does not have is treated like a deleted topic: base offset -1.
        - A request (idempotency entry) with records in a dropped chunk gets offset -1 for those records
          and no idempotency row: nothing of it is live to point at.
        - If the file is all dropped chunks, its row is written obsolete at once (GC collects the object).
        - Replaying a commit whose file row already exists (the caller retried after an ``Unavailable``
          that hid a successful commit) writes nothing and returns the recorded result. Object keys are
          generated per upload, so an existing key means this very flush. A chunk whose row is gone by
          then (its topic deleted, or compaction moved it into another file) is reported as -1.
        """
        chunks = tuple(chunks)
        entries = tuple(idempotency)
        _validate_flush(chunks, entries)
        return self._backend.run(
            lambda tx: self._commit_flush(tx, file, chunks, entries, now_ms), write=True, what="commit_flush"
        )

    def _commit_flush(
        self,
        tx: Tx,
        file: NewFile,
        chunks: tuple[NewChunk, ...],
        entries: tuple[IdempotencyEntry, ...],
        now_ms: int,
    ) -> FlushResult:
        order = sorted(range(len(chunks)), key=lambda i: (chunks[i].topic, chunks[i].partition))
        next_offsets = self._lock_partitions(
            tx, [(chunks[i].topic, chunks[i].partition) for i in order], self._d.for_no_key_update
        )
        # Offsets are assigned here, under the partition locks: base = next_offset, next_offset += n.
        bases = [-1] * len(chunks)
        for i in order:
            key = (chunks[i].topic, chunks[i].partition)
            if key in next_offsets:
                bases[i] = next_offsets[key]
                next_offsets[key] += chunks[i].record_count
        live = any(base >= 0 for base in bases)

        row = tx.one(
            "INSERT INTO files (object_key, size, level, state, created_ms, obsolete_since_ms)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (object_key) DO NOTHING RETURNING file_id",
            (
                file.object_key,
                file.size,
                file.level,
                FILE_LIVE if live else FILE_OBSOLETE,
                file.created_ms,
                None if live else now_ms,
            ),
        )
        if row is None:
            return self._replay_flush(tx, file, chunks, entries)
        file_id = int(row[0])

        tx.executemany(
            "UPDATE partitions SET next_offset = ? WHERE topic = ? AND partition_id = ?",
            [(n, topic, partition) for (topic, partition), n in sorted(next_offsets.items())],
        )
        chunk_rows: list[tuple[Param, ...]] = []
        for i in order:
            c, base = chunks[i], bases[i]
            if base < 0:
                continue
            chunk_rows.append(
                (
                    c.topic,
                    c.partition,
                    base,
                    base + c.record_count - 1,
                    c.record_count,
                    file_id,
                    c.position,
                    c.length,
                    c.min_timestamp,
                    c.max_timestamp,
                    c.crc,
                    False,  # a fresh flush chunk holds every offset of its range
                )
            )
        tx.executemany(
            "INSERT INTO chunks (topic, partition_id, base_offset, last_offset, record_count, file_id,"
            " position, length, min_timestamp, max_timestamp, crc, has_holes)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            chunk_rows,
        )

        request_offsets = {e.key: _request_offsets(chunks, bases, e) for e in entries}
        to_record = sorted(
            (e for e in entries if all(o >= 0 for _, o in request_offsets[e.key])), key=lambda e: e.key
        )
        self._insert_idempotency(tx, to_record, request_offsets, now_ms)
        return FlushResult(bases, request_offsets)

    def _insert_idempotency(
        self,
        tx: Tx,
        entries: Sequence[IdempotencyEntry],
        request_offsets: Mapping[str, list[tuple[int, int]]],
        now_ms: int,
    ) -> None:
        """Insert the rows (``entries`` sorted by key); raise IdempotencyConflict if any key exists.

        ON CONFLICT DO NOTHING RETURNING tells inserted keys from existing ones without a failed statement.
        On PostgreSQL it waits for a concurrent transaction inserting the same key, and counts the key as
        existing if that one commits. Raising makes the backend roll back everything, offsets included.
        """
        existing: list[str] = []
        for batch in batches(entries):
            rows = tx.all(
                "INSERT INTO idempotency (key, topic, offsets, created_ms)"
                f" VALUES {_placeholders(len(batch), 4)} ON CONFLICT (key) DO NOTHING RETURNING key",
                [
                    v
                    for e in batch
                    for v in (e.key, e.topic, _offsets_to_json(request_offsets[e.key]), now_ms)
                ],
            )
            inserted = {str(r[0]) for r in rows}
            existing.extend(e.key for e in batch if e.key not in inserted)
        if not existing:
            return
        found: dict[str, list[tuple[int, int]]] = {}
        for keys in batches(existing):
            for key, offsets in tx.all(
                f"SELECT key, offsets FROM idempotency WHERE key IN ({', '.join(['?'] * len(keys))})", keys
            ):
                found[str(key)] = _offsets_from_json(offsets)
        if len(found) != len(existing):
            # The conflicting row expired between the two statements; a retry will not conflict.
            raise CommitConflict("an idempotency key expired while this flush committed; retry the commit")
        raise IdempotencyConflict(found)

    def _replay_flush(
        self, tx: Tx, file: NewFile, chunks: tuple[NewChunk, ...], entries: tuple[IdempotencyEntry, ...]
    ) -> FlushResult:
        recorded = {
            (str(topic), int(partition)): int(base)
            for topic, partition, base in tx.all(
                "SELECT c.topic, c.partition_id, c.base_offset FROM chunks c"
                " JOIN files f ON f.file_id = c.file_id WHERE f.object_key = ?",
                (file.object_key,),
            )
        }
        bases = [recorded.get((c.topic, c.partition), -1) for c in chunks]
        return FlushResult(bases, {e.key: _request_offsets(chunks, bases, e) for e in entries})

    def lookup_idempotency(self, key: str, not_before_ms: int) -> list[tuple[int, int]] | None:
        row = self._backend.run(
            lambda tx: tx.one(
                "SELECT offsets FROM idempotency WHERE key = ? AND created_ms >= ?", (key, not_before_ms)
            ),
            write=False,
            what="lookup_idempotency",
        )
        return None if row is None else _offsets_from_json(row[0])

    def expire_idempotency(self, before_ms: int) -> int:
        return self._backend.run(
            lambda tx: tx.execute("DELETE FROM idempotency WHERE created_ms < ?", (before_ms,)),
            write=True,
            what="expire_idempotency",
        )

    # --- the read path ------------------------------------------------------------------------------------
    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        """Chunk rows ordered by base_offset; an unknown topic or partition simply has none."""
        if limit <= 0:
            return []
        # ORDER BY last_offset is ORDER BY base_offset (a partition's chunk ranges never overlap) and lets
        # the index (topic, partition_id, last_offset) serve both the filter and the order with no sort.
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT c.chunk_id, c.base_offset, c.last_offset, c.record_count, f.object_key, c.position,"
                " c.length, c.min_timestamp, c.max_timestamp, c.crc, c.has_holes"
                " FROM chunks c JOIN files f ON f.file_id = c.file_id"
                " WHERE c.topic = ? AND c.partition_id = ? AND c.last_offset >= ?"
                " ORDER BY c.last_offset LIMIT ?",
                (topic, partition, offset, limit),
            ),
            write=False,
            what="find_chunks",
        )
        return [
            ChunkRow(
                chunk_id=int(r[0]),
                topic=topic,
                partition=partition,
                base_offset=int(r[1]),
                last_offset=int(r[2]),
                record_count=int(r[3]),
                object_key=str(r[4]),
                position=int(r[5]),
                length=int(r[6]),
                min_timestamp=int(r[7]),
                max_timestamp=int(r[8]),
                crc=int(r[9]),
                has_holes=bool(r[10]),
            )
            for r in rows
        ]

    # --- consumer groups ----------------------------------------------------------------------------------
    def commit_group_offsets(self, group: str, offsets: Sequence[tuple[str, int, int]], now_ms: int) -> None:
        """All or nothing. A (topic, partition) given twice keeps the later offset."""
        latest = {(topic, partition): offset for topic, partition, offset in offsets}
        keys = sorted(latest)

        def work(tx: Tx) -> None:
            existing = self._lock_partitions(tx, keys, self._d.for_key_share)
            for topic, partition in keys:
                if (topic, partition) not in existing:
                    raise self._missing_partition(tx, topic, partition)
            tx.executemany(
                "INSERT INTO group_offsets (group_id, topic, partition_id, committed_offset, committed_ms)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (group_id, topic, partition_id) DO UPDATE"
                " SET committed_offset = excluded.committed_offset, committed_ms = excluded.committed_ms",
                [(group, topic, partition, latest[(topic, partition)], now_ms) for topic, partition in keys],
            )

        self._backend.run(work, write=True, what="commit_group_offsets")

    def group_offsets(self, group: str) -> list[GroupOffset]:
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT topic, partition_id, committed_offset, committed_ms FROM group_offsets"
                f" WHERE group_id = ? ORDER BY topic{self._d.binary_collation}, partition_id",
                (group,),
            ),
            write=False,
            what="group_offsets",
        )
        return [GroupOffset(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows]

    # --- files (GC) -------------------------------------------------------------------------------------
    def known_object_keys(self, keys: Sequence[str]) -> set[str]:
        distinct = sorted(set(keys))

        def work(tx: Tx) -> set[str]:
            known: set[str] = set()
            for batch in batches(distinct):
                rows = tx.all(
                    f"SELECT object_key FROM files WHERE object_key IN ({', '.join(['?'] * len(batch))})",
                    batch,
                )
                known.update(str(r[0]) for r in rows)
            return known

        return self._backend.run(work, write=False, what="known_object_keys")

    def file_states(self, keys: Iterable[str]) -> dict[str, FileState]:
        """State of the files rows of ``keys`` (keys without a row are absent). For GC and tests."""
        distinct = sorted(set(keys))

        def work(tx: Tx) -> dict[str, FileState]:
            states: dict[str, FileState] = {}
            for batch in batches(distinct):
                for key, state, since in tx.all(
                    "SELECT object_key, state, obsolete_since_ms FROM files"
                    f" WHERE object_key IN ({', '.join(['?'] * len(batch))})",
                    batch,
                ):
                    states[str(key)] = FileState(str(state), None if since is None else int(since))
            return states

        return self._backend.run(work, write=False, what="file_states")
