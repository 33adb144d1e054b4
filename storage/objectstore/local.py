"""A local directory as the bucket: the embedded default (``file://`` URLs).

Layout: key ``a/b/c`` is the file ``<root>/a/b/c``. Every ``/`` in a key is a directory level, so a key
can never also be a "directory" of other keys (``a`` and ``a/b`` cannot both exist); Strata's keys are
generated (a level prefix and a ULID/UUID), so this S3 difference never matters in practice.

Durability and atomicity of ``put``: the bytes go to a new temporary file in the target directory, which is
fsynced, then renamed over the final name (atomic on POSIX within one filesystem), and the directory is
fsynced so the rename itself survives a crash. A reader therefore sees the old object or the new one, never
a prefix. What a crash leaves behind: at most an orphan temp file named ``.tmp-*``; such names are never
valid keys and ``list`` never returns them. These steps run in one native call (storage/_durable.c), which
gives up the GIL once for all of them: written in Python, each step had to win the GIL back from an event
loop busy with requests (docs/benchmarks.md, "The low-latency ack against the request rate").

Page cache: only the last ``page_cache_bytes`` (512 MiB) of written objects are left cached by the kernel;
older ones are dropped (``pagecache.py`` says why, with the measurements). Reads are left alone.

Objects are created with mode 0600 (``storage/_durable.c`` creates the temporary file exclusively with it):
the directory belongs to the Strata process.

Directories created for a key are not removed when their last object is deleted: removing them would race
with a concurrent ``put`` into the same directory, and the number of directories is small (prefixes).

Requests are counted like the S3 backend would send them, so tests and benchmarks see the same cost shape
on either backend: one request per call, and one LIST per page of ``list_page_size`` keys.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import stat
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from storage._durable import write_file
from storage.errors import ObjectNotFound, ObjectStoreError
from storage.objectstore.base import (
    DELETE,
    GET,
    HEAD,
    LIST,
    ON_DURABLE,
    PUT,
    AsyncObjectStore,
    Body,
    EmptyStream,
    ObjectInfo,
    ObjectStore,
    ObjectStream,
    RequestCounters,
    StreamBase,
    body_size,
    empty_range,
)
from storage.objectstore.pagecache import DEFAULT_PAGE_CACHE_BYTES, RecentWrites

# Threads for the async store's puts: as many as an agent has flushes in flight with the default settings
# (agents.agent.AgentConfig.inflight_flushes); more puts than threads wait for one in turn.
PUT_THREADS = 8
# Prefix of in-progress upload files. A key segment may not start with it, so a temp file can never be
# mistaken for (or collide with) an object.
TEMP_PREFIX = ".tmp-"

# S3's ListObjectsV2 maximum page size; the local backend counts LIST pages with the same size.
DEFAULT_LIST_PAGE_SIZE = 1000


def validate_key(key: str) -> list[str]:
    """Split ``key`` into path segments, rejecting anything that could escape the root or alias a key.

    Rejected with ValueError: empty keys, absolute paths, empty segments (``a//b``, trailing ``/``),
    ``.``/``..`` segments, NUL, and segments that look like temp files.
    """
    if not key:
        raise ValueError("object key is empty")
    if "\x00" in key:
        raise ValueError(f"object key contains NUL: {key!r}")
    if key.startswith("/"):
        raise ValueError(f"object key is absolute: {key!r}")
    segments = key.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise ValueError(f"object key has an empty, '.' or '..' segment: {key!r}")
        if segment.startswith(TEMP_PREFIX):
            raise ValueError(f"object key segment starts with the reserved {TEMP_PREFIX!r}: {key!r}")
    return segments


def _store_error(action: str, key: str, exc: OSError) -> ObjectStoreError:
    return ObjectStoreError(f"local object store: {action} {key!r} failed: {exc}")


def _temp_name() -> str:
    """A fresh temporary entry name: ``TEMP_PREFIX`` and 64 random bits. It is created exclusively, so a
    collision (with a crash's leftover, say) fails the put rather than write into another put's file."""
    return TEMP_PREFIX + os.urandom(8).hex()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalObjectStream(StreamBase):
    """One open file read forward from ``start`` up to ``end`` (exclusive) or EOF."""

    def __init__(self, file: BinaryIO, remaining: int | None, counters: RequestCounters) -> None:
        self._file = file
        # Bytes still allowed before ``end``; None means "until EOF".
        self._remaining = remaining
        self._counters = counters

    def read(self, n: int) -> bytes:
        if n < 0:
            raise ValueError("read size must be >= 0")
        if self._remaining is not None:
            n = min(n, self._remaining)
        if n == 0:
            return b""
        try:
            data = self._file.read(n)
        except OSError as exc:
            raise ObjectStoreError(f"local object store: stream read failed: {exc}") from exc
        if self._remaining is not None:
            self._remaining -= len(data)
        self._counters.add_bytes(read=len(data))
        return data

    def close(self) -> None:
        self._file.close()


class LocalObjectStore(ObjectStore):
    def __init__(
        self,
        root: Path,
        *,
        counters: RequestCounters | None = None,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        page_cache_bytes: int = DEFAULT_PAGE_CACHE_BYTES,
    ) -> None:
        if list_page_size < 1:
            raise ValueError("list_page_size must be >= 1")
        self.root = Path(root)
        self.recent_writes = RecentWrites(page_cache_bytes)
        self.counters = counters if counters is not None else RequestCounters()
        self.url = "file://" + quote(self.root.as_posix())
        self._list_page_size = list_page_size
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _store_error("create root", str(self.root), exc) from exc

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*validate_key(key))

    # --- writes ---------------------------------------------------------------------------------------

    def _ensure_dir(self, directory: Path) -> None:
        """Create ``directory`` (and missing parents), fsyncing each parent so the new entries are durable."""
        missing: list[Path] = []
        current = directory
        while not current.is_dir():
            missing.append(current)
            if current == self.root:
                break
            current = current.parent
        for path in reversed(missing):
            try:
                path.mkdir()
            except FileExistsError:
                # A concurrent put created it (fine), or a file of that name exists: then the key's parent
                # is an object, which the next step reports as an error.
                if not path.is_dir():
                    raise
            _fsync_dir(path.parent)

    def put(self, key: str, data: Body) -> None:
        """``data`` in pieces is written as it is (no joined copy), durably, in one native call
        (storage/_durable.c): a new temporary file in the object's directory, fsynced, renamed into place,
        and the directory fsynced. A failed put leaves no temporary file."""
        path = self._path(key)
        size = body_size(data)
        self.counters.incr(PUT, written=size)
        try:
            self._ensure_dir(path.parent)
            # write_file holds its own copy of the list for the call: the caller's stays as it was.
            write_file(path.parent, _temp_name(), path.name, [data] if isinstance(data, bytes) else data)
        except OSError as exc:
            raise _store_error("put", key, exc) from exc
        if (durable := ON_DURABLE.get()) is not None:
            durable()
        self.recent_writes.written(path, size)

    def delete(self, key: str) -> None:
        path = self._path(key)
        self.counters.incr(DELETE)
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            # S3 semantics: deleting a missing key succeeds.
            return
        except IsADirectoryError:
            # A "directory" is not an object, so there is nothing to delete.
            return
        except OSError as exc:
            raise _store_error("delete", key, exc) from exc
        try:
            _fsync_dir(path.parent)
        except OSError as exc:
            raise _store_error("delete", key, exc) from exc

    # --- reads ----------------------------------------------------------------------------------------

    def _open(self, key: str, path: Path) -> BinaryIO:
        try:
            return path.open("rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            raise ObjectNotFound(f"object {key!r} not found in {self.url}") from exc
        except OSError as exc:
            raise _store_error("open", key, exc) from exc

    def get(self, key: str) -> bytes:
        path = self._path(key)
        self.counters.incr(GET)
        with self._open(key, path) as f:
            try:
                data = f.read()
            except OSError as exc:
                raise _store_error("get", key, exc) from exc
        self.counters.add_bytes(read=len(data))
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end), clipped to the object's size (like S3, a range past EOF returns less)."""
        empty = empty_range(start, end)
        path = self._path(key)
        if empty:
            return b""
        self.counters.incr(GET)
        with self._open(key, path) as f:
            try:
                f.seek(start)
                data = f.read(end - start)
            except OSError as exc:
                raise _store_error("get_range", key, exc) from exc
        self.counters.add_bytes(read=len(data))
        return data

    def open_stream(self, key: str, start: int = 0, end: int | None = None) -> ObjectStream:
        empty = empty_range(start, end)
        path = self._path(key)
        if empty:
            return EmptyStream()
        self.counters.incr(GET)
        f = self._open(key, path)
        try:
            f.seek(start)
        except OSError as exc:
            f.close()
            raise _store_error("open_stream", key, exc) from exc
        return LocalObjectStream(f, None if end is None else end - start, self.counters)

    def head(self, key: str) -> ObjectInfo:
        path = self._path(key)
        self.counters.incr(HEAD)
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise ObjectNotFound(f"object {key!r} not found in {self.url}") from exc
        except OSError as exc:
            raise _store_error("head", key, exc) from exc
        if not stat.S_ISREG(st.st_mode):
            raise ObjectNotFound(f"object {key!r} not found in {self.url} (it is a directory)")
        return ObjectInfo(key=key, size=st.st_size, last_modified_ms=st.st_mtime_ns // 1_000_000)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in key (code point = UTF-8 byte) order.

        Counts one LIST when iteration starts and one more per further page of ``list_page_size`` keys,
        exactly as ListObjectsV2 would be paged. The walk is lazy and holds one directory's entries per
        level at a time, never the whole store.
        """
        dir_part, _, name_prefix = prefix.rpartition("/")
        if "\x00" in prefix or prefix.startswith("/"):
            raise ValueError(f"invalid list prefix: {prefix!r}")
        base = self.root.joinpath(*validate_key(dir_part)) if dir_part else self.root
        key_base = dir_part + "/" if dir_part else ""
        return self._list_pages(base, key_base, name_prefix)

    def _list_pages(self, base: Path, key_base: str, name_prefix: str) -> Iterator[ObjectInfo]:
        self.counters.incr(LIST)
        for produced, info in enumerate(self._walk(base, key_base, name_prefix)):
            # Key number ``produced`` (0-based) opens a new page every ``list_page_size`` keys.
            if produced and produced % self._list_page_size == 0:
                self.counters.incr(LIST)
            yield info

    def _walk(self, directory: Path, key_base: str, name_prefix: str) -> Iterator[ObjectInfo]:
        try:
            with os.scandir(directory) as it:
                entries = [e for e in it if e.name.startswith(name_prefix)]
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise _store_error("list", key_base, exc) from exc
        # Sorting a directory's children by name, with "/" appended to subdirectories, yields keys in
        # global key order: every key under subdirectory "n" starts with "n/", so it compares against a
        # sibling exactly as "n/" does (e.g. "a-c" < "a/b" because "-" < "/").
        children: list[tuple[str, os.DirEntry[str], bool]] = []
        for entry in entries:
            if entry.name.startswith(TEMP_PREFIX):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError as exc:
                raise _store_error("list", key_base + entry.name, exc) from exc
            children.append((entry.name + "/" if is_dir else entry.name, entry, is_dir))
        children.sort(key=lambda child: child[0])
        for sort_name, entry, is_dir in children:
            if is_dir:
                yield from self._walk(Path(entry.path), key_base + sort_name, "")
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                # Deleted between the directory read and now: it is simply no longer listed.
                continue
            except OSError as exc:
                raise _store_error("list", key_base + entry.name, exc) from exc
            yield ObjectInfo(
                key=key_base + entry.name, size=st.st_size, last_modified_ms=st.st_mtime_ns // 1_000_000
            )


class LocalAsyncObjectStore(AsyncObjectStore):
    """The local store for async callers: each call runs the sync store in a worker thread.

    File IO cannot be made non-blocking portably, so worker threads keep the event loop free while a put
    fsyncs. It shares ``counters`` with the sync store it wraps.

    Puts run in threads of their own (``PUT_THREADS``), not the loop's default executor: a flush commit
    beside its upload (agents/flusher.py) holds its database locks until the put has written, and other
    metadata calls waiting for those locks may hold every default thread meanwhile. The threads run in
    the caller's context, as ``asyncio.to_thread`` would, so ``ON_DURABLE`` reaches the put.
    """

    remote = False  # reads of what was just written come from the OS page cache (its last 512 MiB)

    def __init__(
        self,
        root: Path,
        *,
        counters: RequestCounters | None = None,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        page_cache_bytes: int = DEFAULT_PAGE_CACHE_BYTES,
    ) -> None:
        self.sync = LocalObjectStore(
            root, counters=counters, list_page_size=list_page_size, page_cache_bytes=page_cache_bytes
        )
        self.counters = self.sync.counters
        self.url = self.sync.url
        self._put_pool = ThreadPoolExecutor(PUT_THREADS, thread_name_prefix="strata-local-put")

    async def put(self, key: str, data: Body) -> None:
        call = functools.partial(contextvars.copy_context().run, self.sync.put, key, data)
        await asyncio.get_running_loop().run_in_executor(self._put_pool, call)

    async def get(self, key: str) -> bytes:
        return await asyncio.to_thread(self.sync.get, key)

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        return await asyncio.to_thread(self.sync.get_range, key, start, end)


__all__ = [
    "TEMP_PREFIX",
    "LocalAsyncObjectStore",
    "LocalObjectStore",
    "LocalObjectStream",
    "validate_key",
]
