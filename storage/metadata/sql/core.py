"""The SQL layer under ``SqlMetadataStore``, shared by SQLite and PostgreSQL, and its locking protocol.

Two layers:
- ``Backend``: runs one function inside one transaction on a pooled connection, and turns every driver
  error into a Strata error (``Unavailable`` when retrying may help). ``sqlite.py`` and ``postgres.py``
  implement it. Every query is written once, with ``?`` placeholders; the backend adapts them.
- the queries: one module per role of ``storage.metadata.base`` (``topics``, ``groups``, ``flush``,
  ``reads``, ``jobs``, ``compaction``, ``files``, ``producers``), combined into ``SqlMetadataStore``
  (``store``). They never see a driver exception.

Locking protocol. SQLite serialises writers with ``BEGIN IMMEDIATE``, so row locks are empty strings
there. PostgreSQL runs at READ COMMITTED and takes row locks; every write transaction takes them in this
global order, so no two transactions can wait on each other in a cycle:
  0. one ``jobs`` row (lease, heartbeat, finish, ``commit_compaction``), always first;
  1. ``partitions`` rows, sorted by (topic in binary/code-point order, partition_id);
  2. ``topics`` rows (only ``update_topic_configs`` and ``delete_topic``, one row);
  3. ``files`` rows, sorted by file_id, taken before deciding that a file has no live chunk left;
  4. ``job_files`` claims, inserted in sorted file_id order (``create_job``) or deleted by job;
  4b. ``txn_partitions`` rows, sorted by (topic, partition_id, producer_id): locked and updated by
     ``commit_flush`` under the partitions' locks (``txn_append``), deleted by a transaction's end under
     them (``transactions``), inserted by AddPartitionsToTxn (new keys, after a ``transactions`` row);
  5. ``producer_state`` rows, sorted by (topic, partition_id, producer_id), locked and upserted only by
     ``commit_flush`` under the partitions' locks (``delete_topic`` deletes a topic's rows under them);
     ``expire_producers`` deletes rows with SKIP LOCKED and never waits;
  6. ``idempotency`` keys, inserted in sorted key order;
  7. ``group_offsets`` rows, upserted in sorted (topic, partition_id) order (a transaction's end: sorted
     by (group, topic, partition_id));
  8. ``txn_offsets`` rows (TxnOffsetCommit upserts them; a transaction's end deletes them).
``job_topics`` rows are written only by the transaction that creates their job or one holding the job's row
(0), so they need no rank of their own. ``dirty_samples`` rows are written by ``record_dirty_samples`` in
a transaction that takes no other lock, and deleted with their topic by ``delete_topic``.
A ``consumer_groups`` row (one group's coordinator state) is taken first in its transaction, before 1 and
7; no transaction holding a lock above takes one (``groups``). A ``transactions`` row (one transactional
id) comes next: after a ``consumer_groups`` row (TxnOffsetCommit), before every rank above (the
transaction APIs, ``transactions``); ``commit_flush`` never locks one.
One ``producer_ids`` row is locked alone, by ``init_producer_id``, in a transaction of its own.
The ``security_version`` row is locked first by every transaction that changes ``acls`` or
``scram_credentials`` (``security``), and those transactions take no other lock.
The schema registry's transactions (``schemas``, ``schema_config``) take no lock above either. Their own
order: the global ``sr_mode`` row (FOR KEY SHARE by a registration or a subject's mode change, FOR UPDATE
by a global mode change), then ``sr_subjects`` rows one by one in code-point order (the subject written
to FOR UPDATE, inserted first if absent; the subjects a new schema references FOR KEY SHARE), then the
rows written under a subject's lock (``sr_versions``, ``sr_schemas``, ``sr_references``, ``sr_mode``).
``sr_config`` rows are upserted and deleted in transactions that take no other lock.
A ``lake_tables`` row (one lake-enabled topic's writer lease and status, ``lake``) is taken alone, in
transactions that take no other lock.
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from storage.clock import Clock, SystemClock
from storage.errors import UnknownPartition, UnknownTopic
from storage.metadata import schema
from storage.metadata.rows import FILE_LIVE, FILE_OBSOLETE, ChunkRow, FileChunk, FileRow, Job

Param = str | int | float | bool | None
Row = tuple[Any, ...]
T = TypeVar("T")
X = TypeVar("X")

# Rows per multi-row statement. Stays well under the bound-parameter limits (SQLite 32766, PostgreSQL
# 65535) with up to 12 parameters per row (a chunk row), while keeping a flush of many partitions to a few
# statements.
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

    @property
    def row_locks(self) -> bool:
        """Whether SELECT ... FOR UPDATE locks rows. Without (SQLite: a write transaction holds the whole
        database), rows read only for their values may come back aggregated into one (lock_partitions)."""
        return bool(self.for_update)


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


class SqlBase:
    """The state every query module shares: the backend and its dialect. Migrates the schema on open."""

    def __init__(self, backend: Backend, url: str, *, clock: Clock | None = None) -> None:
        self.url = url
        self._backend = backend
        self._d = backend.dialect
        self._clock = clock or SystemClock()
        now_ms = self._clock.now_ms()
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


# --- statement building -----------------------------------------------------------------------------------
def batches(items: Sequence[X], size: int = BATCH_ROWS) -> Iterator[Sequence[X]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def in_list(count: int) -> str:
    """``(?, ?, ...)`` with ``count`` placeholders, for ``x IN {in_list(n)}`` (count >= 1)."""
    return "(" + ", ".join(["?"] * count) + ")"


def values(rows: int, per_row: int) -> str:
    """``(?, ?), (?, ?), ...``: ``rows`` rows of ``per_row`` placeholders (VALUES, IN over tuples)."""
    return ", ".join([in_list(per_row)] * rows)


# --- JSON columns -------------------------------------------------------------------------------------------
def offsets_to_json(offsets: Sequence[tuple[int, int]]) -> str:
    return json.dumps([[p, o] for p, o in offsets], separators=(",", ":"))


def offsets_from_json(text: str) -> list[tuple[int, int]]:
    return [(int(p), int(o)) for p, o in json.loads(text)]


def configs_from_json(text: str) -> dict[str, str]:
    loaded = json.loads(text)
    return {str(k): str(v) for k, v in loaded.items()}


def _object_to_json(obj: Mapping[str, object], what: str) -> str:
    """A job's spec or report as canonical JSON (sorted keys, no NaN)."""
    try:
        return json.dumps(dict(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a job {what} must be JSON-serialisable: {exc}") from exc


def _object_from_json(text: str, what: str) -> dict[str, object]:
    loaded = json.loads(text)
    if not isinstance(loaded, dict):
        raise ValueError(f"a stored job {what} is not a JSON object: {text[:100]!r}")
    return {str(k): v for k, v in loaded.items()}


def spec_to_json(spec: Mapping[str, object]) -> str:
    return _object_to_json(spec, "spec")


def spec_from_json(text: str) -> dict[str, object]:
    return _object_from_json(text, "spec")


# --- row mappers: each column list next to the function that reads it -------------------------------------
FILE_COLUMNS = "f.file_id, f.object_key, f.size, f.level, f.state, f.created_ms, f.obsolete_since_ms"


def file_row(r: Row) -> FileRow:
    return FileRow(
        file_id=int(r[0]),
        object_key=str(r[1]),
        size=int(r[2]),
        level=int(r[3]),
        state=str(r[4]),
        created_ms=int(r[5]),
        obsolete_since_ms=None if r[6] is None else int(r[6]),
    )


# Aliases c (chunks) and f (files). A chunk row's topic and partition are known to the caller of
# ``find_chunks``, so they are not among these columns.
CHUNK_COLUMNS = (
    "c.chunk_id, c.base_offset, c.last_offset, c.record_count, f.object_key, c.position,"
    " c.length, c.min_timestamp, c.max_timestamp, c.crc, c.has_holes, f.size"
)


def chunk_row(topic: str, partition: int, r: Row) -> ChunkRow:
    return ChunkRow(
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
        file_size=int(r[11]),
    )


FILE_CHUNK_COLUMNS = "c.file_id, c.topic, c.partition_id, " + CHUNK_COLUMNS


def file_chunk(r: Row) -> FileChunk:
    return FileChunk(file_id=int(r[0]), chunk=chunk_row(str(r[1]), int(r[2]), r[3:]))


_JOB_COLUMN_NAMES = (
    "job_id",
    "kind",
    "spec",
    "state",
    "lease_owner",
    "lease_expires_ms",
    "attempts",
    "created_ms",
    "updated_ms",
    "partitions",
    "stats",
)


def job_columns(alias: str = "") -> str:
    """The columns ``job_row`` reads, each prefixed with ``alias`` (``"j."`` in joins)."""
    return ", ".join(alias + name for name in _JOB_COLUMN_NAMES)


JOB_COLUMNS = job_columns()


def job_row(r: Row) -> Job:
    return Job(
        job_id=int(r[0]),
        kind=str(r[1]),
        spec=spec_from_json(r[2]),
        state=str(r[3]),
        lease_owner=None if r[4] is None else str(r[4]),
        lease_expires_ms=None if r[5] is None else int(r[5]),
        attempts=int(r[6]),
        created_ms=int(r[7]),
        updated_ms=int(r[8]),
        partitions=None if r[9] is None else partitions_from_json(r[9]),
        stats=None if r[10] is None else stats_from_json(r[10]),
    )


def stats_to_json(stats: Mapping[str, object]) -> str:
    return _object_to_json(stats, "report")


def stats_from_json(text: str) -> dict[str, object]:
    return _object_from_json(text, "report")


def partitions_to_json(partitions: Sequence[tuple[str, int]]) -> str:
    return json.dumps([[t, p] for t, p in partitions], separators=(",", ":"))


def partitions_from_json(text: str) -> tuple[tuple[str, int], ...]:
    return tuple((str(t), int(p)) for t, p in json.loads(text))


# --- statements more than one role runs -----------------------------------------------------------------
# (topic, partition_id, base_offset, last_offset, record_count, file_id, position, length, min_timestamp,
#  max_timestamp, crc, has_holes): the one way chunk rows are written, by flushes and by compactions.
ChunkValues = tuple[str, int, int, int, int, int, int, int, int, int, int, bool]


def insert_chunks(tx: Tx, rows: Sequence[ChunkValues]) -> None:
    """Insert chunk rows, many to a statement.

    One statement per batch rather than ``executemany``'s one per row: Python's sqlite3 module gives up
    the GIL around every statement step and must win it back each time, and on an agent whose event loop
    keeps the GIL busy each win waits for the loop to yield (the switch interval, 5 ms). A flush commit of
    32 chunks took ~100 steps, and with the main thread busy hundreds of times longer than without; in ~10
    steps, several times less (bench/commit_contention.py, docs/benchmarks.md). PostgreSQL gains fewer
    statements.
    """
    for batch in batches(rows):
        tx.execute(
            "INSERT INTO chunks (topic, partition_id, base_offset, last_offset, record_count, file_id,"
            " position, length, min_timestamp, max_timestamp, crc, has_holes)"
            f" VALUES {values(len(batch), 12)}",
            [v for row in batch for v in row],
        )


def set_next_offsets(tx: Tx, next_offsets: Mapping[tuple[str, int], int]) -> None:
    """Set the next offset of each (topic, partition), one statement per batch (see ``insert_chunks``)."""
    for batch in batches(sorted(next_offsets.items())):
        tx.execute(
            f"WITH v (n, topic, p) AS (VALUES {values(len(batch), 3)})"
            " UPDATE partitions SET next_offset = v.n FROM v"
            " WHERE partitions.topic = v.topic AND partitions.partition_id = v.p",
            [v for (topic, partition), n in batch for v in (n, topic, partition)],
        )


def lock_partitions(
    tx: Tx, d: Dialect, keys: Sequence[tuple[str, int]], lock: str
) -> dict[tuple[str, int], int]:
    """Lock the partitions rows of ``keys`` (sorted, distinct); returns next_offset of those that exist.

    Batches are taken in ``keys`` order and rows within a batch in the same (binary) order, so the
    locks are acquired in one global order.
    """
    return {key: next_offset for key, (next_offset, _) in lock_partition_offsets(tx, d, keys, lock).items()}


def lock_partition_offsets(
    tx: Tx, d: Dialect, keys: Sequence[tuple[str, int]], lock: str
) -> dict[tuple[str, int], tuple[int, int]]:
    """``lock_partitions``, returning (next_offset, log_start_offset) of each partition that exists."""
    rows = rows_by_keys(
        tx, d, "partitions", ("topic", "partition_id"), ("next_offset", "log_start_offset"), keys, lock
    )
    return {(str(topic), int(partition)): (int(n), int(start)) for topic, partition, n, start in rows}


def rows_by_keys(
    tx: Tx,
    d: Dialect,
    table: str,
    key_columns: Sequence[str],
    columns: Sequence[str],
    keys: Sequence[Sequence[Param]],
    lock: str,
) -> list[Row]:
    """The rows of ``table`` whose ``key_columns`` (a text column first) equal one of ``keys`` (sorted), as
    (*key_columns, *columns), locked with ``lock`` (``Dialect.for_update`` or "") batch by batch in key
    order, so that locks are taken in one global order.

    SQLite has no row locks to take, and its sqlite3 module gives up and wins back the GIL for every row it
    steps through (see ``insert_chunks``), so there each batch comes back as one JSON row.
    """
    names = ", ".join(key_columns)
    selected = ", ".join([*key_columns, *columns])
    found: list[Row] = []
    for batch in batches(keys):
        where = f" FROM {table} WHERE ({names}) IN (VALUES {values(len(batch), len(key_columns))})"
        params = [v for key in batch for v in key]
        if d.row_locks:
            order = ", ".join([f"{key_columns[0]}{d.binary_collation}", *key_columns[1:]])
            found.extend(tx.all(f"SELECT {selected}{where} ORDER BY {order}{lock}", params))
            continue
        row = tx.one(f"SELECT json_group_array(json_array({selected})){where}", params)
        found.extend(tuple(r) for r in (json.loads(str(row[0])) if row is not None else ()))
    return found


def missing_partition(tx: Tx, topic: str, partition: int) -> UnknownTopic | UnknownPartition:
    """The error for a partition row that is not there: its topic is unknown, or it has fewer partitions."""
    row = tx.one("SELECT partitions FROM topics WHERE name = ?", (topic,))
    if row is None:
        return UnknownTopic(f"unknown topic {topic!r}")
    return UnknownPartition(f"topic {topic!r} has {row[0]} partition(s); there is no partition {partition}")


def mark_obsolete_if_empty(tx: Tx, file_ids: Sequence[int], now_ms: int) -> None:
    """Files among ``file_ids`` (already row-locked by the caller) with no chunk row left -> obsolete."""
    for batch in batches(sorted(file_ids)):
        tx.execute(
            "UPDATE files SET state = ?, obsolete_since_ms = ?"
            f" WHERE state = ? AND file_id IN {in_list(len(batch))}"
            " AND NOT EXISTS (SELECT 1 FROM chunks WHERE chunks.file_id = files.file_id)",
            (FILE_OBSOLETE, now_ms, FILE_LIVE, *batch),
        )
