"""Garbage collection: obsolete files after their grace period, and orphan uploads.

Obsolete files: compaction and retention mark a file obsolete when no live chunk references it. A fetch
or a Spark read that looked its chunks up just before may still be reading it, so the object is deleted
only ``obsolete_grace_ms`` (default 10 min, longer than the longest read) after it became obsolete, and
its row is forgotten after the object is gone (a crash in between just repeats the delete).

Orphans: a flush uploads its file before the metadata commit. If the agent dies in between, or the commit
fails, or an idempotency conflict makes it upload again, the object has no ``files`` row. Such an object
is deleted once it is older than ``orphan_grace_ms``: the grace must exceed the longest upload-to-commit
time, or a slow commit would commit chunk rows that point at a deleted object. Objects with a files row
are never touched here; deleting obsolete files is the compaction GC's job.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.clock import Clock
from storage.keys import DATA_PREFIX
from storage.metadata.base import FileCatalog
from storage.objectstore.base import ObjectStore

log = logging.getLogger("strata.gc")

_PAGE = 500


@dataclass(frozen=True, slots=True)
class GcStats:
    scanned: int
    orphans_deleted: int


class ObsoleteCollector:
    def __init__(self, store: ObjectStore, metadata: FileCatalog, clock: Clock, grace_ms: int) -> None:
        self.store = store
        self.metadata = metadata
        self.clock = clock
        self.grace_ms = grace_ms

    def run_once(self) -> int:
        deleted = 0
        while True:
            files = self.metadata.obsolete_files(self.clock.now_ms() - self.grace_ms, _PAGE)
            if not files:
                break
            for f in files:
                self.store.delete(f.object_key)  # never a referenced file: it has no live chunk
            self.metadata.forget_files([f.file_id for f in files])
            deleted += len(files)
            if len(files) < _PAGE:
                break
        if deleted:
            log.info("deleted %d obsolete file(s)", deleted)
        return deleted


class OrphanCollector:
    def __init__(self, store: ObjectStore, metadata: FileCatalog, clock: Clock, orphan_grace_ms: int) -> None:
        self.store = store
        self.metadata = metadata
        self.clock = clock
        self.orphan_grace_ms = orphan_grace_ms

    def run_once(self) -> GcStats:
        cutoff = self.clock.now_ms() - self.orphan_grace_ms
        scanned = deleted = 0
        page: list[str] = []
        for info in self.store.list(DATA_PREFIX):
            scanned += 1
            if info.last_modified_ms < cutoff:
                page.append(info.key)
            if len(page) >= _PAGE:
                deleted += self._delete_orphans(page)
                page = []
        if page:
            deleted += self._delete_orphans(page)
        if deleted:
            log.info("deleted %d orphan object(s) of %d scanned", deleted, scanned)
        return GcStats(scanned, deleted)

    def _delete_orphans(self, keys: list[str]) -> int:
        known = self.metadata.known_object_keys(keys)
        orphans = [k for k in keys if k not in known]
        for key in orphans:
            self.store.delete(key)
        return len(orphans)
