"""Group commit to the local disk, for the Kafka sink's ``--durable`` modes (bench/kafka_sink.py): what the
disk alone lets a broker that acknowledges only durable bytes do, with none of Strata's work around it.

One writer thread takes every append submitted since its last write, writes them with one ``writev``, makes
them durable, and resolves each append's future on its event loop. Appends submitted while it writes wait
for the next round: classic group commit, one round in flight, as Kafka with ``flush.messages=1`` or a
broker that fsyncs before acks=all answers. Two layouts:

- ``log``: one file, appended to and ``fdatasync``ed per round (a Kafka segment, never rolled);
- ``files``: a new file per round, written, ``fsync``ed, renamed into place and its directory ``fsync``ed:
  the steps of Strata's local object store (storage/objectstore/local.py) for one flush, without the
  metadata commit;
- ``files+commit``: ``files``, then one SQLite transaction per round that records the file (WAL,
  ``synchronous=FULL``, as Strata's embedded metadata store commits a flush): the least a broker does that
  keeps Strata's two rules, a file per flush and offsets committed in the metadata store before the ack.

After each round the written range is dropped from the page cache (``POSIX_FADV_DONTNEED``; the pages are
clean once durable), so later rounds write into pages the kernel recycles rather than pages it must take
fresh: on a virtual machine a page touched for the first time costs the hypervisor a fault. That is the
best case of both layouts, which is what a ceiling should be.

Disk: at most ``KEEP_BYTES`` of what was written is kept (the log rolls to a new segment every
``SEGMENT_BYTES``); older segments and files are unlinked by a thread of their own, off the writer's
path, as a broker's retention runs beside its appends.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

Piece = bytes | memoryview
MODES = ("log", "files", "files+commit")
KEEP_BYTES = 1 << 30
SEGMENT_BYTES = 128 << 20


class GroupCommit:
    def __init__(self, directory: Path, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown durable mode {mode!r}")
        self.directory = directory
        self.mode = mode
        directory.mkdir(parents=True, exist_ok=True)
        self._segment = 0
        self._log_fd = self._open_segment()
        self._log_end = 0
        self._kept: deque[tuple[Path, int]] = deque()  # segments or files on disk, oldest first
        self._kept_bytes = 0
        self._unlink: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._cleaner = threading.Thread(target=self._clean, name="group-commit-retention", daemon=True)
        self._cleaner.start()
        self._pending: list[tuple[Sequence[Piece], asyncio.Future[None]]] = []
        self._wake = threading.Condition()
        self._closed = False
        self._round = 0
        self.totals = {"rounds": 0, "appends": 0, "bytes": 0, "write_s": 0.0}
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def append(self, pieces: Sequence[Piece]) -> asyncio.Future[None]:
        """A future, resolved on the caller's loop once ``pieces`` are durable (or failed with the error)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._wake:
            self._pending.append((pieces, future))
            self._wake.notify()
        return future

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()
        os.close(self._log_fd)
        self._unlink.put(None)
        self._cleaner.join()

    def _open_segment(self) -> int:
        path = self.directory / f"{self._segment:08d}.log"
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _clean(self) -> None:
        while (path := self._unlink.get()) is not None:
            path.unlink(missing_ok=True)

    def _keep(self, path: Path, nbytes: int) -> None:
        """``path`` holds ``nbytes`` more: hand the oldest beyond ``KEEP_BYTES`` to the cleaner."""
        if self._kept and self._kept[-1][0] == path:
            self._kept[-1] = (path, self._kept[-1][1] + nbytes)
        else:
            self._kept.append((path, nbytes))
        self._kept_bytes += nbytes
        while self._kept_bytes > KEEP_BYTES and len(self._kept) > 1:
            old, size = self._kept.popleft()
            self._kept_bytes -= size
            self._unlink.put(old)

    def _run(self) -> None:
        db = None
        if self.mode == "files+commit":
            db = sqlite3.connect(self.directory / "metadata.db", isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("CREATE TABLE IF NOT EXISTS files (round INTEGER PRIMARY KEY, size INTEGER)")
        while True:
            with self._wake:
                while not self._pending and not self._closed:
                    self._wake.wait()
                if not self._pending:
                    if db is not None:
                        db.close()
                    return
                batch, self._pending = self._pending, []
            pieces = [piece for appended, _ in batch for piece in appended]
            started = time.perf_counter()
            try:
                nbytes = self._write(pieces)
                if db is not None:
                    db.execute("BEGIN")
                    db.execute("INSERT INTO files VALUES (?, ?)", (self._round, nbytes))
                    db.execute("COMMIT")
            except (OSError, sqlite3.Error) as exc:
                for _, future in batch:
                    future.get_loop().call_soon_threadsafe(_fail, future, exc)
                continue
            self.totals["write_s"] += time.perf_counter() - started
            self.totals["rounds"] += 1
            self.totals["appends"] += len(batch)
            self.totals["bytes"] += nbytes
            for _, future in batch:
                future.get_loop().call_soon_threadsafe(_done, future)

    def _write(self, pieces: list[Piece]) -> int:
        if self.mode == "log":
            nbytes = _writev_all(self._log_fd, pieces)
            os.fdatasync(self._log_fd)
            os.posix_fadvise(self._log_fd, self._log_end, nbytes, os.POSIX_FADV_DONTNEED)
            self._log_end += nbytes
            self._keep(self.directory / f"{self._segment:08d}.log", nbytes)
            if self._log_end >= SEGMENT_BYTES:
                os.close(self._log_fd)
                self._segment += 1
                self._log_fd = self._open_segment()
                self._log_end = 0
            return nbytes
        self._round += 1
        final = self.directory / f"{self._round:012d}.bin"
        tmp = final.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            nbytes = _writev_all(fd, pieces)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, nbytes, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._keep(final, nbytes)
        return nbytes


def _writev_all(fd: int, pieces: list[Piece]) -> int:
    """Write every piece, resuming short writes; 1024 pieces per call (Linux's IOV_MAX)."""
    total = 0
    views = [memoryview(p) for p in pieces if len(p)]
    while views:
        written = os.writev(fd, views[:1024])
        total += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]
    return total


def _done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _fail(future: asyncio.Future[None], exc: Exception) -> None:
    if not future.done():
        future.set_exception(exc)
