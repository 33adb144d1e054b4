"""``strata lake backfill``: a topic's table filled by Spark (``backfill.write_backfill``) and committed with
pyiceberg's ``add_files``, under the lake writer's lease, so the continuous writer goes on from there.

The steps:
1. lease the topic's ``lake_tables`` row, as the continuous writer does (``LeasedElsewhere`` otherwise), and
   keep the lease renewed from a thread while Spark works, since a backfill outlasts a lease;
2. load or create the table (``LakeWriter.load_or_create``) and read its committed offsets;
3. Spark writes the records from those offsets (a partition the table never had: its log start) to each
   partition's last stable offset into ``<table location>/data/backfill-<uuid>/``, split by the table's
   partition spec;
4. one Iceberg transaction adds the files with ``strata.offsets`` set to the table's offsets moved to the
   ends of exactly the ranges Spark wrote, and commits on the snapshot loaded in step 2;
5. record the outcome in ``lake_tables`` and release the lease.

Exactly once, as the continuous writer's commits: files and offsets are one snapshot, committed by the
catalog's compare-and-set on the snapshot whose offsets the files start at, with
``commit.retry.num-retries=0``. A writer that committed in between (a lease that ran out under a long job)
makes the commit fail: nothing is appended, the table keeps the other writer's rows and offsets, and the
backfill's files are left as orphans under its directory (the outcome says which; the lake's orphan
cleanup, or the operator, removes them). A crash before the commit leaves the same orphans; a crash after
it leaves a snapshot the continuous writer goes on from.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipeline.lake.backfill import write_backfill
from pipeline.lake.hooks import CommitHook, NoHook
from pipeline.lake.offsets import OFFSETS_PROPERTY, committed_offsets, encode_offsets
from pipeline.lake.runs import COMMITTED, LEASED_ELSEWHERE, LOST_RACE, UP_TO_DATE, LakeWriterConfig
from pipeline.lake.writer import LakeWriter
from pipeline.reader import Decoder
from storage.clock import Clock
from storage.errors import InvalidConfig, LeaseLost
from storage.lake_config import LakeTopicConfig
from storage.metadata.base import MetadataStore
from storage.metadata.lake_state import LakeClaim, LakeRunResult
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyspark.sql import SparkSession

log = logging.getLogger("strata.lake")


@dataclass(frozen=True, slots=True)
class BackfillRun:
    """What a backfill did: its outcome, the table's offsets after it, the ranges its files hold and where
    they are (orphans unless the outcome is COMMITTED)."""

    topic: str
    outcome: str
    offsets: dict[int, int] = field(default_factory=dict)
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    directory: str | None = None
    files: int = 0
    snapshot_id: int | None = None
    error: str | None = None


class _Heartbeat:
    """Renews the lease every third of its length until stopped; remembers a lost lease."""

    def __init__(self, metadata: MetadataStore, topic: str, owner: str, clock: Clock, lease_ms: int) -> None:
        self._stop = threading.Event()
        self.lost: LeaseLost | None = None

        def beat() -> None:
            while not self._stop.wait(lease_ms / 3000):
                try:
                    metadata.heartbeat_lake_table(topic, owner, clock.now_ms(), lease_ms)
                except LeaseLost as exc:
                    self.lost = exc
                    return

        self._thread = threading.Thread(target=beat, name=f"lake-backfill-lease-{topic}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_backfill(
    spark: SparkSession,
    metadata: MetadataStore,
    store: ObjectStore,
    catalog: Catalog,
    clock: Clock,
    owner: str,
    config: LakeWriterConfig,
    metadata_url: str,
    bucket_url: str,
    topic: str,
    *,
    decoder: Decoder = "jvm",
    hook: CommitHook | None = None,
) -> BackfillRun:
    """Backfill ``topic``'s table (module doc). Raises UnknownTopic, or InvalidConfig when the topic's lake
    is disabled or its partition spec cannot take Spark's files. ``hook`` is called between Spark's files
    and the catalog commit (``pipeline/lake/hooks.py``)."""
    info = metadata.get_topic(topic)
    lake = LakeTopicConfig.from_overrides(info.name, info.configs)
    if not lake.enabled:
        raise InvalidConfig(f"topic {topic!r} has strata.iceberg.mode=disabled: enable the lake first")
    claim = LakeClaim(info.name, lake.table, lake.mode, lake.delete_with_topic, info.created_ms)
    leased = metadata.lease_lake_table(claim, owner, clock.now_ms(), config.lease_ms)
    if leased is None:
        return BackfillRun(topic, LEASED_ELSEWHERE)
    result = LakeRunResult(None, None, None, leased.lag_records, "the backfill did not finish")
    heartbeat = _Heartbeat(metadata, topic, owner, clock, config.lease_ms)
    try:
        writer = LakeWriter(metadata, store, catalog, clock, owner, config)
        table = writer.load_or_create(info, lake)
        offsets, _ = committed_offsets(table)
        directory = f"{table.location()}/data/backfill-{uuid.uuid4().hex}"
        files = write_backfill(
            spark,
            metadata_url,
            bucket_url,
            topic,
            directory,
            offsets,
            decoder=decoder,
            split_by=lake.partition_spec,
        )
        heartbeat.stop()
        ranges = dict(files.ranges)
        new_offsets = {**offsets, **{p: end for p, (_, end) in ranges.items()}}
        if new_offsets == offsets:
            result = LakeRunResult(offsets, None, None, 0, None)
            return BackfillRun(topic, UP_TO_DATE, offsets, ranges)
        if heartbeat.lost is not None:
            raise heartbeat.lost
        metadata.heartbeat_lake_table(topic, owner, clock.now_ms(), config.lease_ms)
        run = _commit(table, topic, files.files, ranges, new_offsets, directory, hook or NoHook())
        committed_ms = clock.now_ms() if run.outcome == COMMITTED else None
        lag = 0 if run.outcome == COMMITTED else leased.lag_records
        result = LakeRunResult(run.offsets, run.snapshot_id, committed_ms, lag, None)
        return run
    finally:
        heartbeat.stop()
        try:
            metadata.finish_lake_run(topic, owner, clock.now_ms(), result)
        except LeaseLost:
            log.warning("lake backfill of %s lost its lease; its status was not recorded", topic)


def _commit(
    table: Table,
    topic: str,
    files: tuple[str, ...],
    ranges: dict[int, tuple[int, int]],
    new_offsets: dict[int, int],
    directory: str,
    hook: CommitHook,
) -> BackfillRun:
    """``files`` added with ``new_offsets`` in one snapshot on the one ``table`` was loaded at; LOST_RACE,
    with the files left as orphans, when another commit came first."""
    from pyiceberg.exceptions import CommitFailedException

    transaction = table.transaction()
    properties = {OFFSETS_PROPERTY: encode_offsets(new_offsets)}
    if files:
        transaction.add_files(list(files), snapshot_properties=properties)
    else:  # the offsets moved without records (aborted transactions, compacted holes)
        transaction.append(table.schema().as_arrow().empty_table(), snapshot_properties=properties)
    hook.before_commit(topic, table)
    try:
        table = transaction.commit_transaction()
    except CommitFailedException as exc:
        table.refresh()
        theirs, theirs_id = committed_offsets(table)
        note = (
            f"lost the commit race to another writer ({exc}): nothing was appended; the files under"
            f" {directory} are orphans"
        )
        log.warning("lake backfill of %s %s", topic, note)
        return BackfillRun(topic, LOST_RACE, theirs, ranges, directory, len(files), theirs_id, note)
    hook.after_commit(topic, table)
    snapshot = table.current_snapshot()
    snapshot_id = None if snapshot is None else snapshot.snapshot_id
    return BackfillRun(topic, COMMITTED, new_offsets, ranges, directory, len(files), snapshot_id)
