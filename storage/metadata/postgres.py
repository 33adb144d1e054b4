"""PostgreSQL backend: for several agents on several hosts sharing one metadata database.

- psycopg 3 with a ``psycopg_pool.ConnectionPool``; connections run in autocommit mode and every
  operation is one explicit ``conn.transaction()`` block at READ COMMITTED. Consistency comes from row
  locks taken in the global order documented in ``sql.py``, not from the isolation level.
- A serialization failure or deadlock means the server rolled the transaction back; it is re-run a few
  times with a short backoff, then reported as ``Unavailable``.
- Any other operational error (connection lost, server shutting down, a lock wait beyond
  ``lock_timeout``, no pooled connection within the pool timeout) is ``Unavailable``. Read transactions
  are re-run once first: they wrote nothing, and the pool has replaced a broken connection. A write is
  never re-run after such an error, because the failure may have hidden a successful COMMIT; the caller
  decides (``commit_flush`` is safe to replay, see its docstring).
- Error messages name the server without the password.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool

from storage.clock import Clock, SystemClock
from storage.errors import SettingsError, StrataError, Unavailable
from storage.metadata.sql import Backend, Dialect, Param, Row, SqlMetadataStore, Tx

T = TypeVar("T")

POSTGRES_DIALECT = Dialect(
    name="postgres",
    for_update=" FOR UPDATE",
    for_no_key_update=" FOR NO KEY UPDATE",
    for_key_share=" FOR KEY SHARE",
    skip_locked=" SKIP LOCKED",
    binary_collation=' COLLATE "C"',  # byte order of UTF-8, which is code-point order, as Python sorts
)

_Conn = psycopg.Connection[tuple[Any, ...]]
_Cursor = psycopg.Cursor[tuple[Any, ...]]

# Errors after which the server has already rolled the whole transaction back, so re-running it is safe.
_RERUN = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


@functools.lru_cache(maxsize=512)
def _pyformat(sql: str) -> str:
    """``?`` placeholders -> psycopg's ``%s``. The shared SQL contains no literal ``?`` or ``%``."""
    return sql.replace("?", "%s")


class _PgTx:
    def __init__(self, cur: _Cursor) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Param] = ()) -> int:
        self._cur.execute(_pyformat(sql), params)
        return self._cur.rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Param]]) -> None:
        if rows:
            self._cur.executemany(_pyformat(sql), rows)

    def all(self, sql: str, params: Sequence[Param] = ()) -> list[Row]:
        self._cur.execute(_pyformat(sql), params)
        return self._cur.fetchall()

    def one(self, sql: str, params: Sequence[Param] = ()) -> Row | None:
        self._cur.execute(_pyformat(sql), params)
        return self._cur.fetchone()


def redact(url: str) -> str:
    """``postgresql://user@host:port/db``: the URL without password and query, for messages."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    host = parts.hostname or "localhost"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


class PostgresBackend(Backend):
    dialect = POSTGRES_DIALECT

    def __init__(
        self,
        url: str,
        *,
        min_connections: int = 1,
        max_connections: int = 10,
        connect_timeout_s: float = 10.0,
        lock_timeout_s: float = 30.0,
        pool_timeout_s: float = 30.0,
        max_attempts: int = 5,
        clock: Clock | None = None,
    ) -> None:
        self.description = f"PostgreSQL {redact(url)}"
        self._max_attempts = max_attempts
        self._clock = clock or SystemClock()
        self._lock_timeout_ms = int(lock_timeout_s * 1000)
        # One direct connection first: a wrong URL or a server that is down fails here with the driver's
        # reason (refused, bad password, no database), where a pool would only report a timeout.
        try:
            probe = psycopg.connect(url, connect_timeout=max(1, int(connect_timeout_s)))
        except psycopg.ProgrammingError as exc:  # the URL itself is malformed: retrying cannot help
            raise SettingsError(f"invalid PostgreSQL URL {self.description}: {exc}") from exc
        except psycopg.Error as exc:
            raise Unavailable(f"cannot connect to {self.description}: {exc}") from exc
        probe.close()
        self._pool: ConnectionPool[_Conn] = ConnectionPool(
            url,
            min_size=min_connections,
            max_size=max_connections,
            kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s))},
            configure=self._configure,
            timeout=pool_timeout_s,
            name="strata-metadata",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg.OperationalError as exc:
            self._pool.close()
            raise Unavailable(f"cannot open a connection pool to {self.description}: {exc}") from exc

    def _configure(self, conn: _Conn) -> None:
        # A lock wait longer than this becomes LockNotAvailable -> Unavailable, instead of a hung request.
        conn.execute(f"SET lock_timeout = {self._lock_timeout_ms}")

    def run(self, work: Callable[[Tx], T], *, write: bool, what: str) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                    return work(_PgTx(cur))
            except _RERUN as exc:
                if attempt >= self._max_attempts:
                    raise Unavailable(
                        f"{self.description}: {what} was rolled back {attempt} times ({exc.sqlstate});"
                        " retry later"
                    ) from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if write or attempt >= 2:
                    raise Unavailable(f"{self.description}: {what} failed, retry later: {exc}") from exc
            except psycopg.Error as exc:
                raise StrataError(f"{self.description}: {what} failed: {type(exc).__name__}: {exc}") from exc
            # Exponential backoff, 10 ms doubling: long enough for the winner to commit.
            self._clock.sleep(0.01 * 2 ** (attempt - 1))

    def close(self) -> None:
        self._pool.close()


def open_postgres_store(
    url: str, *, max_connections: int = 10, lock_timeout_s: float = 30.0, clock: Clock | None = None
) -> SqlMetadataStore:
    """Open (migrating if needed) the metadata schema in the database and search_path ``url`` names."""
    backend = PostgresBackend(
        url, max_connections=max_connections, lock_timeout_s=lock_timeout_s, clock=clock
    )
    return SqlMetadataStore(backend, url, clock=clock)
