"""The SQL implementation of ``MetadataStore``, shared by SQLite and PostgreSQL.

Two layers:
- ``Backend``: runs one function inside one transaction on a pooled connection, and turns every driver
  error into a Strata error (``Unavailable`` when retrying may help). ``sqlite.py`` and ``postgres.py``
  implement it. Every query here is written once, with ``?`` placeholders; the backend adapts them.
- ``SqlMetadataStore``: the queries. It never sees a driver exception.

Locking protocol. SQLite serialises writers with ``BEGIN IMMEDIATE``, so row locks are empty strings
there. PostgreSQL runs at READ COMMITTED and takes row locks; every write transaction takes them in this
global order, so no two transactions can wait on each other in a cycle:
  0. one ``jobs`` row (lease, heartbeat, finish, ``commit_compaction``), always first;
  1. ``partitions`` rows, sorted by (topic in binary/code-point order, partition_id);
  2. ``topics`` rows (only ``update_topic_configs`` and ``delete_topic``, one row);
  3. ``files`` rows, sorted by file_id, taken before deciding that a file has no live chunk left;
  4. ``job_files`` claims, inserted in sorted file_id order (``create_job``) or deleted by job;
  5. ``idempotency`` keys, inserted in sorted key order;
  6. ``group_offsets`` rows, upserted in sorted (topic, partition_id) order.
Every transaction that deletes chunk rows (``delete_topic``, ``apply_retention``, ``commit_compaction``)
first locks the rows' partitions, so once ``commit_compaction`` holds its partitions, its inputs can no
longer disappear underneath it, and a re-read tells it whether they are all still there.
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
from itertools import pairwise
from typing import Any, Protocol, TypeVar

from storage.clock import Clock, SystemClock
from storage.errors import CommitConflict, StrataError, TopicExists, UnknownPartition, UnknownTopic
from storage.metadata import schema
from storage.metadata.base import (
    FILE_LIVE,
    FILE_OBSOLETE,
    JOB_ACTIVE_STATES,
    JOB_DONE,
    JOB_FINAL_STATES,
    JOB_LEASED,
    JOB_PENDING,
    ChunkRow,
    CleanedUpTo,
    CompactionOutput,
    FileChunk,
    FileRow,
    FlushResult,
    GroupOffset,
    IdempotencyConflict,
    IdempotencyEntry,
    Job,
    MetadataStore,
    NewChunk,
    NewFile,
    PartitionState,
    PartitionStats,
    TopicInfo,
    UnknownJob,
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
    # Appended to a locking suffix: skip rows another transaction has locked instead of waiting (leasing).
    skip_locked: str
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


_FILE_COLUMNS = "f.file_id, f.object_key, f.size, f.level, f.state, f.created_ms, f.obsolete_since_ms"

# Aliases c (chunks) and f (files).
_FILE_CHUNK_COLUMNS = (
    "c.file_id, c.chunk_id, c.topic, c.partition_id, c.base_offset, c.last_offset, c.record_count,"
    " f.object_key, c.position, c.length, c.min_timestamp, c.max_timestamp, c.crc, c.has_holes"
)

_JOB_COLUMNS = "job_id, kind, spec, state, lease_owner, lease_expires_ms, attempts, created_ms, updated_ms"


def _file_row(r: Row) -> FileRow:
    return FileRow(
        file_id=int(r[0]),
        object_key=str(r[1]),
        size=int(r[2]),
        level=int(r[3]),
        state=str(r[4]),
        created_ms=int(r[5]),
        obsolete_since_ms=None if r[6] is None else int(r[6]),
    )


def _file_chunk(r: Row) -> FileChunk:
    return FileChunk(
        file_id=int(r[0]),
        chunk=ChunkRow(
            chunk_id=int(r[1]),
            topic=str(r[2]),
            partition=int(r[3]),
            base_offset=int(r[4]),
            last_offset=int(r[5]),
            record_count=int(r[6]),
            object_key=str(r[7]),
            position=int(r[8]),
            length=int(r[9]),
            min_timestamp=int(r[10]),
            max_timestamp=int(r[11]),
            crc=int(r[12]),
            has_holes=bool(r[13]),
        ),
    )


def _job(r: Row) -> Job:
    return Job(
        job_id=int(r[0]),
        kind=str(r[1]),
        spec=_spec_from_json(r[2]),
        state=str(r[3]),
        lease_owner=None if r[4] is None else str(r[4]),
        lease_expires_ms=None if r[5] is None else int(r[5]),
        attempts=int(r[6]),
        created_ms=int(r[7]),
        updated_ms=int(r[8]),
    )


def _spec_to_json(spec: Mapping[str, object]) -> str:
    try:
        return json.dumps(dict(spec), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a job spec must be JSON-serialisable: {exc}") from exc


def _spec_from_json(text: str) -> dict[str, object]:
    loaded = json.loads(text)
    if not isinstance(loaded, dict):
        raise ValueError(f"a stored job spec is not a JSON object: {text[:100]!r}")
    return {str(k): v for k, v in loaded.items()}


def _validate_compaction(outputs: Sequence[CompactionOutput], cleaned: Sequence[CleanedUpTo]) -> None:
    """The checks that need no database: each output chunk on its own, and outputs against each other."""
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    keys: set[str] = set()
    for output in outputs:
        if output.file.object_key in keys:
            raise ValueError(f"output file {output.file.object_key!r} appears twice")
        keys.add(output.file.object_key)
        for c in output.chunks:
            where = f"output chunk {c.topic}/{c.partition} [{c.base_offset}, {c.last_offset}]"
            span = c.last_offset - c.base_offset + 1
            if c.base_offset < 0 or span <= 0:
                raise ValueError(f"{where}: not a valid offset range")
            if not 0 < c.record_count <= span:
                raise ValueError(f"{where}: {c.record_count} records do not fit a span of {span}")
            if c.record_count < span and not c.has_holes:
                raise ValueError(f"{where}: {c.record_count} records in a span of {span} needs has_holes")
            spans.setdefault((c.topic, c.partition), []).append((c.base_offset, c.last_offset))
    for (topic, partition), ranges in spans.items():
        ranges.sort()
        for (_, previous_last), (base, _) in pairwise(ranges):
            if base <= previous_last:
                raise ValueError(f"output chunks of {topic}/{partition} overlap at offset {base}")
    seen: set[tuple[str, int]] = set()
    for up_to in cleaned:
        key = (up_to.topic, up_to.partition)
        if key in seen:
            raise ValueError(f"{up_to.topic}/{up_to.partition} appears twice in the cleaned offsets")
        seen.add(key)
        if up_to.cleaned_offset < 0:
            raise ValueError(f"cleaned offset {up_to.cleaned_offset} of {up_to.topic}/{up_to.partition} < 0")


class _ClaimRefused(Exception):
    """Rolls back ``create_job`` when a file is claimed already or no longer live; never escapes."""


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

    def obsolete_files(self, before_ms: int, limit: int) -> list[FileRow]:
        if limit <= 0:
            return []
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {_FILE_COLUMNS} FROM files f"
                " WHERE f.state = ? AND f.obsolete_since_ms <= ?"
                " AND NOT EXISTS (SELECT 1 FROM job_files j WHERE j.file_id = f.file_id)"
                " ORDER BY f.obsolete_since_ms, f.file_id LIMIT ?",
                (FILE_OBSOLETE, before_ms, limit),
            ),
            write=False,
            what="obsolete_files",
        )
        return [_file_row(r) for r in rows]

    def forget_files(self, file_ids: Sequence[int]) -> None:
        ids = sorted(set(file_ids))

        def work(tx: Tx) -> None:
            # Lock first, then decide in a later statement: under READ COMMITTED that statement sees every
            # transaction that held one of these rows before us (a claim, a chunk insert) as committed.
            for batch in batches(ids):
                tx.all(
                    f"SELECT file_id FROM files WHERE file_id IN ({', '.join(['?'] * len(batch))})"
                    f" ORDER BY file_id{self._d.for_update}",
                    batch,
                )
            for batch in batches(ids):
                tx.execute(
                    f"DELETE FROM files WHERE file_id IN ({', '.join(['?'] * len(batch))}) AND state = ?"
                    " AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.file_id = files.file_id)"
                    " AND NOT EXISTS (SELECT 1 FROM job_files j WHERE j.file_id = files.file_id)",
                    (*batch, FILE_OBSOLETE),
                )

        self._backend.run(work, write=True, what="forget_files")

    # --- compaction: what the planner reads -------------------------------------------------------------
    def partition_stats(self, topic: str | None = None) -> list[PartitionStats]:
        where, params = ("WHERE p.topic = ?", (topic,)) if topic is not None else ("", ())
        # One grouped scan: a partition without chunks still has its row (LEFT JOIN, zero sums).
        rows = self._backend.run(
            lambda tx: tx.all(
                "SELECT p.topic, p.partition_id, p.log_start_offset, p.next_offset, p.cleaned_offset,"
                " p.last_compaction_ms, COALESCE(SUM(c.length), 0),"
                " COALESCE(SUM(CASE WHEN c.last_offset >= p.cleaned_offset THEN c.length ELSE 0 END), 0),"
                " COUNT(c.chunk_id),"
                " MIN(CASE WHEN c.last_offset >= p.cleaned_offset THEN c.max_timestamp END)"
                " FROM partitions p"
                " LEFT JOIN chunks c ON c.topic = p.topic AND c.partition_id = p.partition_id"
                f" {where}"
                " GROUP BY p.topic, p.partition_id, p.log_start_offset, p.next_offset, p.cleaned_offset,"
                " p.last_compaction_ms"
                f" ORDER BY p.topic{self._d.binary_collation}, p.partition_id",
                params,
            ),
            write=False,
            what="partition_stats",
        )
        if topic is not None and not rows:
            raise UnknownTopic(f"unknown topic {topic!r}")
        return [
            PartitionStats(
                topic=str(r[0]),
                partition=int(r[1]),
                log_start_offset=int(r[2]),
                high_watermark=int(r[3]),
                cleaned_offset=int(r[4]),
                last_compaction_ms=None if r[5] is None else int(r[5]),
                live_bytes=int(r[6]),
                dirty_bytes=int(r[7]),
                chunk_count=int(r[8]),
                oldest_dirty_timestamp=None if r[9] is None else int(r[9]),
            )
            for r in rows
        ]

    def live_files(self, level: int | None = None) -> list[FileRow]:
        where, params = ("AND f.level = ?", (FILE_LIVE, level)) if level is not None else ("", (FILE_LIVE,))
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {_FILE_COLUMNS} FROM files f WHERE f.state = ? {where}"
                " ORDER BY f.created_ms, f.file_id",
                params,
            ),
            write=False,
            what="live_files",
        )
        return [_file_row(r) for r in rows]

    def file_chunks(self, file_ids: Sequence[int]) -> list[FileChunk]:
        ids = sorted(set(file_ids))

        def work(tx: Tx) -> list[FileChunk]:
            found: list[FileChunk] = []
            # Batches in file_id order, each ordered by (file_id, position): the concatenation is ordered.
            for batch in batches(ids):
                found.extend(
                    _file_chunk(r)
                    for r in tx.all(
                        f"SELECT {_FILE_CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.file_id = c.file_id"
                        f" WHERE c.file_id IN ({', '.join(['?'] * len(batch))})"
                        " ORDER BY c.file_id, c.position",
                        batch,
                    )
                )
            return found

        return self._backend.run(work, write=False, what="file_chunks")

    def files_of_partitions(self, partitions: Sequence[tuple[str, int]]) -> list[FileRow]:
        keys = sorted(set(partitions))

        def work(tx: Tx) -> list[FileRow]:
            found: dict[int, FileRow] = {}
            for batch in batches(keys):
                for r in tx.all(
                    f"SELECT {_FILE_COLUMNS} FROM files f WHERE f.state = ? AND f.file_id IN"
                    " (SELECT c.file_id FROM chunks c"
                    f" WHERE (c.topic, c.partition_id) IN (VALUES {_placeholders(len(batch), 2)}))",
                    (FILE_LIVE, *(v for key in batch for v in key)),
                ):
                    row = _file_row(r)
                    found[row.file_id] = row
            return sorted(found.values(), key=lambda f: (f.created_ms, f.file_id))

        return self._backend.run(work, write=False, what="files_of_partitions")

    def partition_chunks(self, topic: str, partition: int) -> list[FileChunk]:
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {_FILE_CHUNK_COLUMNS} FROM chunks c JOIN files f ON f.file_id = c.file_id"
                " WHERE c.topic = ? AND c.partition_id = ? ORDER BY c.last_offset",
                (topic, partition),
            ),
            write=False,
            what="partition_chunks",
        )
        return [_file_chunk(r) for r in rows]

    def level_stats(self, topic: str) -> dict[int, tuple[int, int]]:
        def work(tx: Tx) -> dict[int, tuple[int, int]]:
            if tx.one("SELECT 1 FROM topics WHERE name = ?", (topic,)) is None:
                raise UnknownTopic(f"unknown topic {topic!r}")
            # A chunk row's file is always live, so no state filter is needed.
            rows = tx.all(
                "SELECT f.level, COUNT(DISTINCT f.file_id), SUM(c.length)"
                " FROM chunks c JOIN files f ON f.file_id = c.file_id WHERE c.topic = ?"
                " GROUP BY f.level ORDER BY f.level",
                (topic,),
            )
            return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

        return self._backend.run(work, write=False, what="level_stats")

    # --- compaction: jobs ---------------------------------------------------------------------------------
    def create_job(
        self, kind: str, spec: Mapping[str, object], file_ids: Sequence[int], now_ms: int
    ) -> Job | None:
        """Beyond the interface: a job may claim no file at all (e.g. retention work)."""
        if not kind:
            raise ValueError("a job needs a kind")
        spec_json = _spec_to_json(spec)
        ids = sorted(set(file_ids))

        def work(tx: Tx) -> Job:
            # KEY SHARE keeps the rows from being deleted (forget_files) until we commit, without blocking
            # the flushes, compactions and retention that mark files obsolete (they take NO KEY UPDATE).
            live = 0
            for batch in batches(ids):
                live += len(
                    tx.all(
                        "SELECT file_id FROM files WHERE state = ?"
                        f" AND file_id IN ({', '.join(['?'] * len(batch))})"
                        f" ORDER BY file_id{self._d.for_key_share}",
                        (FILE_LIVE, *batch),
                    )
                )
            if live != len(ids):
                raise _ClaimRefused
            row = tx.one(
                "INSERT INTO jobs (kind, spec, state, attempts, created_ms, updated_ms)"
                f" VALUES (?, ?, ?, 0, ?, ?) RETURNING {_JOB_COLUMNS}",
                (kind, spec_json, JOB_PENDING, now_ms, now_ms),
            )
            if row is None:  # INSERT ... RETURNING without ON CONFLICT always returns its row
                raise StrataError("inserting a job returned no row")
            job_id = int(row[0])
            # The primary key on file_id is the claim. On PostgreSQL a concurrent uncommitted claim of the
            # same file is waited for: if it commits, ours is not inserted (and not returned).
            for batch in batches(ids):
                claimed = tx.all(
                    f"INSERT INTO job_files (file_id, job_id) VALUES {_placeholders(len(batch), 2)}"
                    " ON CONFLICT (file_id) DO NOTHING RETURNING file_id",
                    [v for file_id in batch for v in (file_id, job_id)],
                )
                if len(claimed) != len(batch):
                    raise _ClaimRefused
            return _job(row)

        try:
            return self._backend.run(work, write=True, what="create_job")
        except _ClaimRefused:
            return None

    def lease_job(self, owner: str, now_ms: int, lease_ms: int) -> Job | None:
        if lease_ms <= 0:
            raise ValueError(f"a lease must last a positive time, got {lease_ms} ms")
        if not owner:
            raise ValueError("a lease needs an owner")

        def work(tx: Tx) -> Job | None:
            # SKIP LOCKED: a worker racing us for the same row moves on to the next job instead of
            # waiting for ours and then finding it leased. (SQLite: BEGIN IMMEDIATE serialises us.)
            row = tx.one(
                "SELECT job_id FROM jobs WHERE state = ? OR (state = ? AND lease_expires_ms < ?)"
                f" ORDER BY created_ms, job_id LIMIT 1{self._d.for_update}{self._d.skip_locked}",
                (JOB_PENDING, JOB_LEASED, now_ms),
            )
            if row is None:
                return None
            leased = tx.one(
                "UPDATE jobs SET state = ?, lease_owner = ?, lease_expires_ms = ?, attempts = attempts + 1,"
                f" updated_ms = ? WHERE job_id = ? RETURNING {_JOB_COLUMNS}",
                (JOB_LEASED, owner, now_ms + lease_ms, now_ms, int(row[0])),
            )
            return None if leased is None else _job(leased)

        return self._backend.run(work, write=True, what="lease_job")

    def heartbeat_job(self, job_id: int, owner: str, now_ms: int, lease_ms: int) -> bool:
        if lease_ms <= 0:
            raise ValueError(f"a lease must last a positive time, got {lease_ms} ms")
        expires = now_ms + lease_ms
        changed = self._backend.run(
            lambda tx: tx.execute(
                "UPDATE jobs SET lease_expires_ms ="
                " CASE WHEN lease_expires_ms > ? THEN lease_expires_ms ELSE ? END, updated_ms = ?"
                " WHERE job_id = ? AND state = ? AND lease_owner = ?",
                (expires, expires, now_ms, job_id, JOB_LEASED, owner),
            ),
            write=True,
            what="heartbeat_job",
        )
        return changed == 1

    def finish_job(self, job_id: int, owner: str | None, state: str, now_ms: int) -> None:
        if state not in JOB_FINAL_STATES:
            raise ValueError(f"a job finishes as one of {JOB_FINAL_STATES}, not {state!r}")

        def work(tx: Tx) -> None:
            current, lease_owner = self._lock_job(tx, job_id)
            if owner is not None and lease_owner == owner and current == state:
                return  # a retry of a finish that committed
            if owner is not None and (current != JOB_LEASED or lease_owner != owner):
                raise CommitConflict(
                    f"job {job_id} is {current} (lease owner {lease_owner!r}); {owner!r} cannot finish it"
                )
            self._finish(tx, job_id, state, now_ms)

        self._backend.run(work, write=True, what="finish_job")

    def _lock_job(self, tx: Tx, job_id: int) -> tuple[str, str | None]:
        row = tx.one(f"SELECT state, lease_owner FROM jobs WHERE job_id = ?{self._d.for_update}", (job_id,))
        if row is None:
            raise UnknownJob(f"no job {job_id}")
        return str(row[0]), None if row[1] is None else str(row[1])

    def _finish(self, tx: Tx, job_id: int, state: str, now_ms: int) -> None:
        tx.execute("UPDATE jobs SET state = ?, updated_ms = ? WHERE job_id = ?", (state, now_ms, job_id))
        tx.execute("DELETE FROM job_files WHERE job_id = ?", (job_id,))

    def active_jobs(self) -> list[Job]:
        rows = self._backend.run(
            lambda tx: tx.all(
                f"SELECT {_JOB_COLUMNS} FROM jobs WHERE state IN (?, ?) ORDER BY job_id", JOB_ACTIVE_STATES
            ),
            write=False,
            what="active_jobs",
        )
        return [_job(r) for r in rows]

    def get_job(self, job_id: int) -> Job:
        row = self._backend.run(
            lambda tx: tx.one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)),
            write=False,
            what="get_job",
        )
        if row is None:
            raise UnknownJob(f"no job {job_id}")
        return _job(row)

    # --- compaction: the swap -------------------------------------------------------------------------------
    def commit_compaction(
        self,
        job_id: int,
        owner: str,
        input_chunk_ids: Sequence[int],
        outputs: Sequence[CompactionOutput],
        cleaned: Sequence[CleanedUpTo],
        now_ms: int,
    ) -> None:
        """Beyond the interface's contract:
        - An output file without chunks is inserted as obsolete (GC deletes its object after the grace
          period), like a flush file whose chunks were all dropped.
        - A cleaned offset for a partition that no longer exists is a CommitConflict (its topic was
          deleted while the job ran).
        - Replaying a commit that succeeded (the caller retried after an ``Unavailable`` that hid the
          COMMIT) writes nothing and returns: the job is done, was leased by ``owner``, and every output
          object key has a files row. Keys are generated per upload, so that means this very commit.
        - Raises UnknownJob for a job id that does not exist.
        """
        inputs = sorted(set(input_chunk_ids))
        outputs = tuple(outputs)
        cleaned = tuple(cleaned)
        _validate_compaction(outputs, cleaned)
        self._backend.run(
            lambda tx: self._commit_compaction(tx, job_id, owner, inputs, outputs, cleaned, now_ms),
            write=True,
            what="commit_compaction",
        )

    def _commit_compaction(
        self,
        tx: Tx,
        job_id: int,
        owner: str,
        inputs: list[int],
        outputs: tuple[CompactionOutput, ...],
        cleaned: tuple[CleanedUpTo, ...],
        now_ms: int,
    ) -> None:
        # (a) The lease, under the job's row lock: heartbeats, finishes and other commits of this job wait;
        # lease_job skips it.
        state, lease_owner = self._lock_job(tx, job_id)
        if not (state == JOB_LEASED and lease_owner == owner):
            if state == JOB_DONE and lease_owner == owner and self._outputs_recorded(tx, outputs):
                return
            raise CommitConflict(
                f"job {job_id} is {state} (lease owner {lease_owner!r}), not leased by {owner!r}"
            )

        # (b) Where the inputs are. Chunk rows never change, they only disappear, so this unlocked read is
        # good for everything but existence, which is checked again under the partition locks.
        found = self._input_chunks(tx, inputs)
        if len(found) != len(inputs):
            raise CommitConflict(f"{len(inputs) - len(found)} input chunk(s) of job {job_id} are gone")
        hulls: dict[tuple[str, int], tuple[int, int]] = {}
        for _, topic, partition, base, last, _ in found:
            lo, hi = hulls.get((topic, partition), (base, last))
            hulls[(topic, partition)] = (min(lo, base), max(hi, last))
        for output in outputs:
            for c in output.chunks:
                hull = hulls.get((c.topic, c.partition))
                if hull is None or c.base_offset < hull[0] or c.last_offset > hull[1]:
                    raise ValueError(
                        f"output chunk {c.topic}/{c.partition} [{c.base_offset}, {c.last_offset}] is outside"
                        f" the span of its partition's input chunks {hull}"
                    )

        # (c) Locks in the global order: partitions, then the input files.
        keys = sorted(set(hulls) | {(up_to.topic, up_to.partition) for up_to in cleaned})
        next_offsets = self._lock_partitions(tx, keys, self._d.for_no_key_update)
        file_ids = sorted({file_id for *_, file_id in found})
        for batch in batches(file_ids):
            tx.all(
                f"SELECT file_id FROM files WHERE file_id IN ({', '.join(['?'] * len(batch))})"
                f" ORDER BY file_id{self._d.for_no_key_update}",
                batch,
            )
        if len(self._input_chunks(tx, inputs)) != len(inputs):
            raise CommitConflict(f"input chunks of job {job_id} were removed while it committed")
        for up_to in cleaned:
            hwm = next_offsets.get((up_to.topic, up_to.partition))
            if hwm is None:
                raise CommitConflict(f"{up_to.topic}/{up_to.partition} no longer exists")
            if up_to.cleaned_offset > hwm:
                raise ValueError(
                    f"cleaned offset {up_to.cleaned_offset} of {up_to.topic}/{up_to.partition} is beyond"
                    f" its high watermark {hwm}"
                )

        # (d) The swap.
        for batch in batches(inputs):
            tx.execute(f"DELETE FROM chunks WHERE chunk_id IN ({', '.join(['?'] * len(batch))})", batch)
        self._check_no_overlap(tx, outputs)
        for output in outputs:
            self._insert_output(tx, output, now_ms)
        tx.executemany(
            "UPDATE partitions SET cleaned_offset ="
            " CASE WHEN cleaned_offset > ? THEN cleaned_offset ELSE ? END, last_compaction_ms = ?"
            " WHERE topic = ? AND partition_id = ?",
            [
                (up_to.cleaned_offset, up_to.cleaned_offset, now_ms, up_to.topic, up_to.partition)
                for up_to in sorted(cleaned, key=lambda u: (u.topic, u.partition))
            ],
        )
        self._mark_obsolete_if_empty(tx, file_ids, now_ms)
        self._finish(tx, job_id, JOB_DONE, now_ms)

    def _input_chunks(self, tx: Tx, chunk_ids: Sequence[int]) -> list[tuple[int, str, int, int, int, int]]:
        """(chunk_id, topic, partition, base_offset, last_offset, file_id) of the rows that still exist."""
        found: list[tuple[int, str, int, int, int, int]] = []
        for batch in batches(chunk_ids):
            found.extend(
                (int(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]))
                for r in tx.all(
                    "SELECT chunk_id, topic, partition_id, base_offset, last_offset, file_id FROM chunks"
                    f" WHERE chunk_id IN ({', '.join(['?'] * len(batch))})",
                    batch,
                )
            )
        return found

    def _check_no_overlap(self, tx: Tx, outputs: Sequence[CompactionOutput]) -> None:
        """After the inputs are deleted: no remaining chunk may share an offset with an output chunk."""
        spans = [(c.topic, c.partition, c.base_offset, c.last_offset) for o in outputs for c in o.chunks]
        for batch in batches(spans):
            # VALUES columns are named column1.. in both dialects.
            row = tx.one(
                f"SELECT o.column1, o.column2, o.column3 FROM (VALUES {_placeholders(len(batch), 4)}) AS o"
                " WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.topic = o.column1"
                " AND c.partition_id = o.column2 AND c.last_offset >= o.column3"
                " AND c.base_offset <= o.column4) LIMIT 1",
                [v for span in batch for v in span],
            )
            if row is not None:
                raise ValueError(
                    f"output chunk {row[0]}/{row[1]} at offset {row[2]} overlaps a chunk that is not an input"
                )

    def _insert_output(self, tx: Tx, output: CompactionOutput, now_ms: int) -> None:
        file, chunks = output.file, output.chunks
        live = bool(chunks)
        row = tx.one(
            "INSERT INTO files (object_key, size, level, state, created_ms, obsolete_since_ms)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING file_id",
            (
                file.object_key,
                file.size,
                file.level,
                FILE_LIVE if live else FILE_OBSOLETE,
                file.created_ms,
                None if live else now_ms,
            ),
        )
        if row is None:  # INSERT ... RETURNING without ON CONFLICT always returns its row
            raise StrataError("inserting an output file returned no row")
        file_id = int(row[0])
        tx.executemany(
            "INSERT INTO chunks (topic, partition_id, base_offset, last_offset, record_count, file_id,"
            " position, length, min_timestamp, max_timestamp, crc, has_holes)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    c.topic,
                    c.partition,
                    c.base_offset,
                    c.last_offset,
                    c.record_count,
                    file_id,
                    c.position,
                    c.length,
                    c.min_timestamp,
                    c.max_timestamp,
                    c.crc,
                    c.has_holes,
                )
                for c in chunks
            ],
        )

    def _outputs_recorded(self, tx: Tx, outputs: Sequence[CompactionOutput]) -> bool:
        keys = sorted({o.file.object_key for o in outputs})
        known = 0
        for batch in batches(keys):
            row = tx.one(
                f"SELECT COUNT(*) FROM files WHERE object_key IN ({', '.join(['?'] * len(batch))})", batch
            )
            known += 0 if row is None else int(row[0])
        return known == len(keys)

    # --- retention ----------------------------------------------------------------------------------------
    def apply_retention(self, topic: str, partition: int, new_log_start: int, now_ms: int) -> int:
        def work(tx: Tx) -> int:
            row = tx.one(
                "SELECT log_start_offset, next_offset FROM partitions WHERE topic = ? AND partition_id = ?"
                f"{self._d.for_no_key_update}",
                (topic, partition),
            )
            if row is None:
                raise self._missing_partition(tx, topic, partition)
            current, high_watermark = int(row[0]), int(row[1])
            start = min(max(current, new_log_start), high_watermark)
            if start != current:
                tx.execute(
                    "UPDATE partitions SET log_start_offset = ? WHERE topic = ? AND partition_id = ?",
                    (start, topic, partition),
                )
            file_ids = [
                int(r[0])
                for r in tx.all(
                    "SELECT file_id FROM files WHERE file_id IN (SELECT file_id FROM chunks"
                    " WHERE topic = ? AND partition_id = ? AND last_offset < ?)"
                    f" ORDER BY file_id{self._d.for_no_key_update}",
                    (topic, partition, start),
                )
            ]
            removed = tx.execute(
                "DELETE FROM chunks WHERE topic = ? AND partition_id = ? AND last_offset < ?",
                (topic, partition, start),
            )
            self._mark_obsolete_if_empty(tx, file_ids, now_ms)
            return removed

        return self._backend.run(work, write=True, what="apply_retention")
