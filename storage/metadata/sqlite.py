"""SQLite backend: the embedded default. One database file, shared safely by threads and processes.

- WAL journal: readers never block the writer and the writer never blocks readers.
- ``synchronous=FULL``: every commit is fsynced before it returns. NORMAL would be crash-safe for the
  process but may roll back the last commits on power loss; a lost flush commit would un-acknowledge records
  and let their offsets be handed out again. Commits are few (about one per flush interval per agent), so the
  fsync is cheap here.
- Every write transaction starts with ``BEGIN IMMEDIATE``: it takes the database's single write lock up
  front, waiting up to the busy timeout. A deferred transaction that reads and later writes could instead
  fail with SQLITE_BUSY without waiting (the lock upgrade cannot be granted while another writer holds
  a newer snapshot). Holding the write lock for the whole transaction is also what makes offset
  assignment atomic across processes, so the SQL layer needs no row locks here.
- Connections are pooled: a thread borrows one for one transaction and returns it, so a connection is
  never used by two threads at once. A connection that saw a driver error is closed, not reused.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from storage.clock import Clock, SystemClock
from storage.errors import SettingsError, StrataError, Unavailable
from storage.metadata.sql import Backend, Dialect, Param, Row, SqlMetadataStore, Tx

T = TypeVar("T")

SQLITE_DIALECT = Dialect(
    name="sqlite",
    for_update="",
    for_no_key_update="",
    for_key_share="",
    skip_locked="",
    binary_collation="",  # the default BINARY collation compares UTF-8 bytes, i.e. code points
)

# RETURNING needs 3.35, STRICT tables 3.37.
MIN_SQLITE_VERSION = (3, 37, 0)

# Primary result codes after which the same transaction may succeed later: the file is locked, the disk
# is full or failing, or the file cannot be opened right now. Anything else (SQL errors, a corrupt file,
# constraint violations) is a bug or a broken installation, which retrying does not fix.
_LOCK_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_RETRIABLE_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PROTOCOL,
    }
)


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Param] = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Param]]) -> None:
        self._conn.executemany(sql, rows)

    def all(self, sql: str, params: Sequence[Param] = ()) -> list[Row]:
        return self._conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Param] = ()) -> Row | None:
        row: Row | None = self._conn.execute(sql, params).fetchone()
        return row


class SqliteBackend(Backend):
    dialect = SQLITE_DIALECT

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0, clock: Clock | None = None) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE_VERSION:
            raise SettingsError(
                f"SQLite {sqlite3.sqlite_version} is too old for the metadata store; need"
                f" {'.'.join(map(str, MIN_SQLITE_VERSION))} or newer"
            )
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._clock = clock or SystemClock()
        self.description = f"SQLite database {path}"
        self._lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = []
        self._closed = False

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: the sqlite3 module issues no implicit BEGIN/COMMIT; run() does.
        # check_same_thread=False: the pool hands a connection to one thread at a time, not always the same.
        conn = sqlite3.connect(
            self._path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL (stored in the file, so a no-op once done), waiting out other openers.

        Switching a fresh file needs an exclusive lock, and when several connections switch at once SQLite
        fails some of them with SQLITE_BUSY immediately instead of calling the busy handler (deadlock
        avoidance). So this retries with backoff for up to the busy timeout itself.
        """
        deadline = self._clock.monotonic() + self._busy_timeout_s
        delay = 0.002
        while True:
            try:
                row = conn.execute("PRAGMA journal_mode=WAL").fetchone()
                break
            except sqlite3.OperationalError as exc:
                if _primary_code(exc) not in _LOCK_CODES or self._clock.monotonic() >= deadline:
                    raise
            self._clock.sleep(delay)
            delay = min(delay * 2, 0.1)
        if row is None or str(row[0]).lower() != "wal":
            raise SettingsError(f"{self.description}: cannot use the WAL journal mode (got {row})")

    def _acquire(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise Unavailable(f"{self.description}: the metadata store is closed")
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _release(self, conn: sqlite3.Connection, *, reusable: bool) -> None:
        with self._lock:
            if reusable and not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def run(self, work: Callable[[Tx], T], *, write: bool, what: str) -> T:
        try:
            conn = self._acquire()
        except sqlite3.Error as exc:
            raise _translate(exc, what, self.description) from exc
        reusable = True
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = work(_SqliteTx(conn))
                conn.execute("COMMIT")
            except BaseException:
                # Also for Strata errors raised by ``work`` (UnknownTopic, IdempotencyConflict): nothing of
                # a failed operation may be committed by the next user of this connection.
                conn.rollback()
                raise
            return result
        except sqlite3.Error as exc:
            reusable = False
            raise _translate(exc, what, self.description) from exc
        finally:
            self._release(conn, reusable=reusable)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _primary_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code; None for errors the sqlite3 module raises itself (closed cursor)."""
    code = getattr(exc, "sqlite_errorcode", None)
    # Extended result codes (e.g. SQLITE_BUSY_SNAPSHOT) carry the primary code in their low byte.
    return None if code is None else int(code) & 0xFF


def _translate(exc: sqlite3.Error, what: str, where: str) -> StrataError:
    if _primary_code(exc) in _RETRIABLE_CODES:
        return Unavailable(f"{where}: {what} failed, retry later: {exc}")
    return StrataError(f"{where}: {what} failed: {type(exc).__name__}: {exc}")


def open_sqlite_store(
    path: Path, *, busy_timeout_s: float = 30.0, clock: Clock | None = None, url: str | None = None
) -> SqlMetadataStore:
    """Open (creating and migrating if needed) the metadata database at ``path``."""
    backend = SqliteBackend(path, busy_timeout_s=busy_timeout_s, clock=clock)
    return SqlMetadataStore(backend, url or f"sqlite:///{path}", clock=clock)
