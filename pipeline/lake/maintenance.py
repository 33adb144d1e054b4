"""Lake table maintenance: the rewrite of small files (``rewrite.py``), snapshot expiry and orphan-file
cleanup, in that order, run by the lake round (``round.py``) on each table at most every
``MaintenanceConfig.interval_ms``. The order makes the files a rewrite replaced orphans once the
snapshots that still name them expire.

Snapshot expiry. A snapshot goes once it has not been the table's current snapshot for the topic's
``strata.iceberg.snapshot.retention.ms`` (the time comes from the table's snapshot log: the entry that
replaced it; a snapshot that was never current counts from its own timestamp). Judging by when a snapshot
stopped being current, not by when it was made, keeps the snapshot a reader loaded a moment ago on a table
idle for weeks. Never expired: the current snapshot, and every snapshot from it back to the newest one whose
summary carries ``strata.offsets``. The writer finds its offsets by walking ancestors
(``offsets.committed_offsets``), and a walk stops at the first missing parent, so removing a snapshot on
that path would make the writer start the table again from the log start. Branch and tag heads are kept
by pyiceberg itself. Expiry is a catalog commit (a compare-and-set), so a writer committing at the same
moment loses the race and goes on at its next run, never appending twice (``writer.py``).

Orphan-file cleanup. pyiceberg 0.12 has no ``delete_orphan_files`` and its expiry deletes no file, so the
cleanup lists the table's location through Strata's object store and deletes every object that is older
than ``orphan_grace_ms`` and that nothing live names: the current metadata file and those in its metadata
log, each live snapshot's manifest list, its manifests, the data files their live entries name, and the
statistics files. That removes the files of expired snapshots and the uploads of writers that crashed or
lost a commit race. The grace is what makes it safe against a writer between its upload and its commit
(the files exist, no snapshot names them yet): it must exceed the longest upload-to-commit time, which the
writer's lease bounds (minutes), so the default is a day. Objects are listed under the table's location
with a trailing ``/``, so a table whose name extends another's is never listed with it.

A table whose location is outside the warehouse (made by another tool) is not cleaned: its objects may not
be Strata's. Errors of one table (the catalog, the store) are logged and end that table's maintenance only.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pipeline.lake.footprint import companion_tables, key_of, location_prefix, measure_tables
from pipeline.lake.offsets import committed_offsets
from pipeline.lake.rewrite import RewriteConfig, rewrite_small_files
from storage.clock import Clock
from storage.lake_config import LakeTopicConfig
from storage.metadata.rows import TopicInfo
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger("strata.lake")

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class MaintenanceConfig:
    interval_ms: int = HOUR_MS  # per table, per process
    orphan_grace_ms: int = 24 * HOUR_MS
    rewrite: RewriteConfig = field(default_factory=RewriteConfig)


@dataclass(frozen=True, slots=True)
class MaintenanceResult:
    table: str
    snapshots_expired: int = 0
    orphans_deleted: int = 0
    error: str | None = None
    partitions_rewritten: int = 0
    # What the table's location holds after the cleanup, from its listing, with its _dlq and _state
    # tables' (footprint.py; None: not listed).
    objects: int | None = None
    bytes: int | None = None


def protected_snapshots(table: Table) -> set[int]:
    """The current snapshot and its ancestors back to the newest one carrying ``strata.offsets``."""
    from pyiceberg.table.snapshots import ancestors_of

    current = table.current_snapshot()
    if current is None:
        return set()
    _, offsets_id = committed_offsets(table)
    kept = set()
    for snapshot in ancestors_of(current, table.metadata):
        kept.add(snapshot.snapshot_id)
        if offsets_id is None or snapshot.snapshot_id == offsets_id:
            break
    return kept


def expirable_snapshots(table: Table, now_ms: int, retention_ms: int) -> list[int]:
    """The snapshots that have not been current for ``retention_ms``, less the protected ones."""
    replaced: dict[int, int] = {}  # snapshot id -> when another became current after it
    log_entries = table.metadata.snapshot_log
    for entry, following in itertools.pairwise(log_entries):
        if following.snapshot_id != entry.snapshot_id:
            replaced[entry.snapshot_id] = following.timestamp_ms
    kept = protected_snapshots(table)
    return sorted(
        s.snapshot_id
        for s in table.metadata.snapshots
        if s.snapshot_id not in kept and now_ms - replaced.get(s.snapshot_id, s.timestamp_ms) >= retention_ms
    )


def expire_snapshots(table: Table, now_ms: int, retention_ms: int) -> tuple[Table, int]:
    """Expire what ``expirable_snapshots`` names, in one commit: (the table after, how many went)."""
    ids = expirable_snapshots(table, now_ms, retention_ms)
    if ids:
        table.maintenance.expire_snapshots().by_ids(ids).commit()
        table.refresh()
    return table, len(ids)


def referenced_files(table: Table) -> set[str]:
    """Every file location the table's metadata names (see the module's docstring)."""
    io = table.io
    metadata = table.metadata
    names = {table.metadata_location, *(e.metadata_file for e in metadata.metadata_log)}
    names.update(s.statistics_path for s in metadata.statistics)
    names.update(s.statistics_path for s in metadata.partition_statistics)
    manifests = set()
    for snapshot in metadata.snapshots:
        names.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in manifests:
                continue  # carried forward from an earlier snapshot: read once
            manifests.add(manifest.manifest_path)
            names.add(manifest.manifest_path)
            names.update(
                e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=True)
            )
    return names


class TableMaintenance:
    """Expiry and cleanup of one table at a time. ``warehouse``: the catalog's warehouse location, which is
    the object store's ``lake/`` prefix (``storage/lake_catalog.py``)."""

    def __init__(self, store: ObjectStore, clock: Clock, warehouse: str, config: MaintenanceConfig) -> None:
        self.store = store
        self.clock = clock
        self.warehouse = warehouse.rstrip("/")
        self.config = config

    def key_of(self, location: str) -> str | None:
        """The object key of a file location under the warehouse; None for one outside it."""
        return key_of(self.warehouse, location)

    def run(self, table: Table, snapshot_retention_ms: int) -> MaintenanceResult:
        from pyiceberg.exceptions import CommitFailedException

        name = ".".join(table.name())
        rewritten = 0
        try:
            table, rewritten = rewrite_small_files(table, self.clock.now_ms(), self.config.rewrite)
        except CommitFailedException as exc:
            # A writer committed first: the rewrite is dropped, and the next maintenance tries again.
            log.info("lake table %s: a rewrite lost a commit race (%s)", name, exc)
            table.refresh()
        table, expired = expire_snapshots(table, self.clock.now_ms(), snapshot_retention_ms)
        prefix = location_prefix(self.warehouse, table.location())
        if prefix is None:
            log.warning("lake table %s is outside the warehouse; its orphan files are not cleaned", name)
            return MaintenanceResult(name, expired, partitions_rewritten=rewritten)
        # The table's metadata is read before the listing: a file committed in between is younger than
        # the grace, so it is never taken for an orphan.
        live = {k for k in map(self.key_of, referenced_files(table)) if k is not None}
        cutoff = self.clock.now_ms() - self.config.orphan_grace_ms
        orphans, objects, size = [], 0, 0
        for info in self.store.list(prefix):
            if not info.key.startswith(prefix):
                continue
            if info.key not in live and info.last_modified_ms < cutoff:
                orphans.append(info.key)
            else:
                objects += 1
                size += info.size
        for key in orphans:
            self.store.delete(key)
        if expired or orphans:
            log.info(
                "lake table %s: %d snapshot(s) expired, %d orphan file(s) deleted",
                name,
                expired,
                len(orphans),
            )
        return MaintenanceResult(
            name, expired, len(orphans), objects=objects, bytes=size, partitions_rewritten=rewritten
        )


def maintain_table(
    catalog: Catalog, store: ObjectStore, clock: Clock, config: MaintenanceConfig, info: TopicInfo
) -> MaintenanceResult | None:
    """Maintain the table of the lake-enabled topic ``info``; None when it does not exist yet (or holds
    another topic). A failure (a writer's commit won the race with the expiry, the store or the catalog
    failed) is logged and returned as the result's error: the next interval tries again."""
    from pyiceberg.exceptions import CommitFailedException, NoSuchTableError

    from pipeline.lake.table_properties import TOPIC_PROPERTY
    from pipeline.lake.writer import lake_failures

    lake = LakeTopicConfig.from_overrides(info.name, info.configs)
    failures: tuple[type[BaseException], ...] = (CommitFailedException, *lake_failures())
    try:
        table = catalog.load_table(lake.table)
        if table.properties.get(TOPIC_PROPERTY, info.name) != info.name:
            return None  # another topic's table (the writer refuses it too): its own topic maintains it
        maintenance = TableMaintenance(store, clock, catalog.properties["warehouse"], config)
        return _with_companions(
            catalog, store, lake.table, maintenance.run(table, lake.snapshot_retention_ms)
        )
    except NoSuchTableError:
        return None
    except failures as exc:
        log.warning("maintenance of the lake table %s failed: %s", lake.table, exc)
        return MaintenanceResult(lake.table, error=f"{type(exc).__name__}: {exc}")


def _with_companions(
    catalog: Catalog, store: ObjectStore, table: str, result: MaintenanceResult
) -> MaintenanceResult:
    """``result`` with what the table's ``_dlq`` and ``_state`` tables hold added to its objects and bytes:
    they are measured only, not maintained, and what they hold is the topic's lake too. Their failure
    leaves the figures unknown, not the maintenance failed."""
    from pipeline.lake.writer import lake_failures

    if result.objects is None or result.bytes is None:
        return result
    try:
        others = measure_tables(catalog, store, companion_tables(table))
    except lake_failures() as exc:
        log.warning("measuring the companions of the lake table %s failed: %s", table, exc)
        others = None
    if others is None:
        return replace(result, objects=None, bytes=None)
    return replace(result, objects=result.objects + others[0], bytes=result.bytes + others[1])
