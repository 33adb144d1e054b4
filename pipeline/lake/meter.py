"""The lake's request meter: what the lake round's pyiceberg sends to the object store, by topic.

pyiceberg writes and reads the lake's files (Parquet data files, Avro manifests and manifest lists, the
metadata JSON) through its own FileIO, not through Strata's ``ObjectStore``, so Strata's request counters
never see them. The lake round gives its catalog a counting FileIO (``counting_io.py``) that reports every
request here, and attributes them by **scope**: the round opens one scope per topic around the writer's run,
the measure of a new table, the table's maintenance and the drop of a deleted topic's tables, and takes
the scope's ``usage()`` at its end, to record it in the topic's ``lake_tables`` row and the totals
(``LakeStore.record_lake_usage``).

Why a scope, not the file's location: a topic's lake is up to three tables (the topic's, its ``_dlq``
and its ``_state``), and the row that carries the figures is the topic's, so "everything sent while the
round works on this topic" is the attribution wanted. pyiceberg sends from its own worker threads (data
files are written, manifests read, in parallel), so the scope is the meter's, not a thread's or a
context's. Invariant: one scope at a time per meter (the round works on one topic at a time; opening a
second one raises). Requests outside any scope (a test reading a table through the round's catalog) are not
the round's and are not recorded; they are counted in ``unscoped`` only.

How the counting FileIO finds its meter: pyiceberg makes each FileIO from a class name and the catalog's
properties (``py-io-impl``), never from an object, so the meter is registered here under a token and the
token is a catalog property (``properties``). ``attach`` adds them to a catalog already open: pyiceberg
reads a catalog's ``properties`` at each table it loads or creates, so every FileIO made after counts.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from storage.metadata.lake_state import LakeUsage
from storage.objectstore.base import REQUEST_KINDS

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

# The catalog property naming the meter, and the FileIO class that reads it.
METER_PROPERTY = "strata.lake.meter"
PY_IO_IMPL = "py-io-impl"
COUNTING_FILE_IO = "pipeline.lake.counting_io.CountingFileIO"

_meters: weakref.WeakValueDictionary[str, LakeMeter] = weakref.WeakValueDictionary()
_tokens = itertools.count(1)
_registry_lock = threading.Lock()


@dataclass
class _Counts:
    requests: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REQUEST_KINDS, 0))
    objects_written: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    deletes: int = 0

    def usage(self) -> LakeUsage:
        return LakeUsage(
            requests=dict(self.requests),
            objects_written=self.objects_written,
            bytes_written=self.bytes_written,
            bytes_read=self.bytes_read,
            deletes=self.deletes,
        )


class ScopeBusy(RuntimeError):
    """A second scope was opened on a meter while one was open: attribution would be wrong."""


class LakeMeter:
    """Thread-safe counts of the lake's requests, attributed to the open scope."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scope: _Counts | None = None
        self._unscoped = _Counts()
        with _registry_lock:
            self.token = str(next(_tokens))
            _meters[self.token] = self

    def properties(self) -> dict[str, str]:
        """The catalog properties that make pyiceberg count through this meter."""
        return {PY_IO_IMPL: COUNTING_FILE_IO, METER_PROPERTY: self.token}

    def attach(self, catalog: Catalog) -> None:
        """Make ``catalog`` count through this meter. A catalog that already names a meter (one open for
        another round, shared) keeps counting through that one."""
        if METER_PROPERTY not in catalog.properties:
            catalog.properties.update(self.properties())

    @contextmanager
    def scope(self) -> Iterator[Scope]:
        """Attribute every request until the block ends to one scope, read by its ``usage()``."""
        counts = _Counts()
        with self._lock:
            if self._scope is not None:
                raise ScopeBusy("the lake meter already has an open scope")
            self._scope = counts
        try:
            yield Scope(self, counts)
        finally:
            with self._lock:
                self._scope = None

    def _current(self) -> _Counts:
        return self._scope if self._scope is not None else self._unscoped

    def request(self, kind: str, n: int = 1, *, read: int = 0) -> None:
        with self._lock:
            counts = self._current()
            counts.requests[kind] += n
            counts.bytes_read += read

    def wrote(self, size: int) -> None:
        """An object of ``size`` bytes was completed (its upload's requests are counted apart)."""
        with self._lock:
            counts = self._current()
            counts.objects_written += 1
            counts.bytes_written += size

    def deleted(self) -> None:
        """An object was deleted by pyiceberg (its size is unknown here: the stored figure is no longer)."""
        with self._lock:
            self._current().deletes += 1

    def unscoped(self) -> LakeUsage:
        return self.usage_of(self._unscoped)

    def usage_of(self, counts: _Counts) -> LakeUsage:
        with self._lock:
            return counts.usage()


class Scope:
    """One scope's counts (``LakeMeter.scope``)."""

    def __init__(self, meter: LakeMeter, counts: _Counts) -> None:
        self._meter = meter
        self._counts = counts

    def usage(self) -> LakeUsage:
        return self._meter.usage_of(self._counts)


def meter_of(token: str | None) -> LakeMeter | None:
    """The live meter registered under ``token`` (None: no token, or its meter is gone)."""
    if token is None:
        return None
    with _registry_lock:
        return _meters.get(token)
