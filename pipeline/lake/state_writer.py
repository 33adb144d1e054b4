"""A topic's state table, kept by the lake writer beside its table when ``strata.iceberg.upsert`` is on (by
default for compacted topics): ``<table>_state``, one row per live key with its latest value, a tombstone
deleting the key's row, keyless records left out (``pipeline/lake/upsert.py`` does the copy-on-write of the
key buckets a commit touches; this module decides what to apply and commits it exactly once).

Raw mode: the columns are ``upsert.state_columns`` with the value as ``value`` (binary): ``key``,
``key_bucket``, ``partition``, ``offset``, ``timestamp``, ``value``. The table is partitioned by
``identity(key_bucket)``, its bucket count (``strata.iceberg.upsert.buckets``) stored as the table property
``strata.upsert.buckets`` when it is created and read from there afterwards: a key's bucket must not move
under rows already written, so a later change of the config does not apply to an existing table (the run's
status says so).

Exactly once. The state table carries its own ``strata.offsets`` (``pipeline/lake/offsets.py``), S, in the
same snapshot as its rows, and the invariant is: the rows are the latest record of each live key among the
read_committed records below S (from each partition's log start). A run reads [S, S') (``source.read_slice``:
read_committed, so records of aborted or open transactions are never applied) and commits the changes with
S' in one transaction on the snapshot it read (``commit_upsert``), or not at all:
- a crash before the catalog commit leaves S and the rows as they were (and unreferenced files); a crash
  after it leaves S' with its rows; the next run reads from the table's S either way;
- two writers on one snapshot: the catalog takes the first commit and the second gets
  ``CommitFailedException`` (lake tables set ``commit.retry.num-retries=0``), changes nothing, and stops;
- a run whose records change no key (keyless records, aborted transactions, compacted holes) still commits
  S', in an empty snapshot. Replaying the last commit's records would give the same rows (setting a row to
  the value it has, deleting an absent row), but replaying older ones could bring back an older value, so
  the offsets are kept exact rather than relied on to be harmless.
Compaction of the topic does not change the state a run reaches: it removes a record only when a later
record of its key exists, and a run that has not read the removed one reads that later one too. The one
exception is Kafka's own: a tombstone is removed ``delete.retention.ms`` after it was compacted, so a state
table lagging longer than that can miss it and keep the key, as a consumer would.

The state is independent of the topic's table: its offsets move on their own, and a run reads the records
once for both when the two tables are at the same offsets (the usual case), and otherwise reads its own
slice. Either way the records come a piece at a time (``source.py``) and are reduced to one change per key
as they come (``StateChanges``), so the commit holds the keys it changes, not the records it read; the
buckets it rewrites are read whole (``upsert.commit_upsert``), which the bucket count bounds, not
``lake_write_buffer_bytes``. A partition the state table has never had starts at its log start, whatever
``strata.iceberg.backfill`` says: the state of the keys needs the records that set them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.lake.hooks import CommitHook, NoHook
from pipeline.lake.offsets import OFFSETS_PROPERTY, committed_offsets, encode_offsets
from pipeline.lake.runs import COMMITTED, LOST_RACE, UP_TO_DATE, LakeWriterConfig, StateRun
from pipeline.lake.source import Slice, read_slice
from pipeline.lake.table_properties import check_topic, ensure_no_retry, new_table_properties
from storage.clock import Clock
from storage.errors import StrataError
from storage.lake_config import LakeTopicConfig
from storage.metadata.base import MetadataStore
from storage.metadata.rows import TopicInfo
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger("strata.lake")

STATE_SUFFIX = "_state"
BUCKETS_PROPERTY = "strata.upsert.buckets"


def state_table_name(table: str) -> str:
    """The state table of the topic's table ``table``: the same namespace, ``_state`` appended."""
    return table + STATE_SUFFIX


@dataclass(frozen=True, slots=True)
class SourceRead:
    """What the topic's table read in this run: the starts it asked for (``read_slice``'s ``starts``),
    the slice it got, and the slice's records reduced to the state's changes (``StateChanges``), kept as
    it read the pieces. The state uses them when its own offsets are those starts."""

    starts: Mapping[int, int | None]
    read: Slice
    changes: pa.Table


def _value_columns() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field("value", pa.binary())])


class StateChanges:
    """A read's records as ``commit_upsert`` takes them, reduced to one change per key as the pieces come
    (``upsert.reduce_changes``): what it holds is the keys changed, not the records read. Columns: the
    state's but ``key_bucket``, and ``deleted`` (a null value: a tombstone)."""

    def __init__(self) -> None:
        self._changes = self._records([])

    def add(self, batches: list[pa.RecordBatch]) -> None:
        """One piece's decoded batches."""
        import pyarrow as pa

        from pipeline.lake.upsert import reduce_changes

        self._changes = reduce_changes(pa.concat_tables([self._changes, self._records(batches)]))

    def table(self) -> pa.Table:
        return self._changes

    @staticmethod
    def _records(batches: list[pa.RecordBatch]) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc

        from pipeline.lake.table_layout import raw_schema, to_table_rows

        rows = to_table_rows(batches, raw_schema())
        records = rows.select(["key", "partition", "offset", "timestamp", "value"])
        return records.append_column("deleted", pc.is_null(records["value"]).cast(pa.bool_()))


class StateWriter:
    """Brings a topic's state table up to date, under the lease the lake writer holds."""

    def __init__(
        self,
        metadata: MetadataStore,
        store: ObjectStore,
        catalog: Catalog,
        clock: Clock,
        owner: str,
        config: LakeWriterConfig,
        hook: CommitHook | None = None,
    ) -> None:
        self.metadata = metadata
        self.store = store
        self.catalog = catalog
        self.clock = clock
        self.owner = owner
        self.config = config
        self.hook: CommitHook = hook or NoHook()

    def run(self, info: TopicInfo, lake: LakeTopicConfig, source: SourceRead | None) -> StateRun:
        """One commit of the state table of ``info``. Raises what the lake writer's run catches."""
        from pyiceberg.exceptions import CommitFailedException

        from pipeline.lake.upsert import commit_upsert

        identifier = state_table_name(lake.table)
        table = self.load_or_create(info, lake, identifier)
        buckets = int(table.properties[BUCKETS_PROPERTY])
        note = None
        if buckets != lake.upsert_buckets:
            note = (
                f"the state table keeps its {buckets} buckets; strata.iceberg.upsert.buckets="
                f"{lake.upsert_buckets} applies to a new state table only (drop this one to rebuild it)"
            )
        offsets, snapshot_id = committed_offsets(table)
        if source is not None and dict(source.starts) == offsets:
            read, records = source.read, source.changes
        else:
            config = self.config
            read = read_slice(
                self.metadata,
                self.store,
                info.name,
                offsets,
                config.max_bytes_per_commit,
                config.write_buffer_bytes,
            )
            changes = StateChanges()
            for piece in read.pieces(self.store):
                changes.add(piece)
            records = changes.table()
        new_offsets = {**offsets, **read.end}
        if new_offsets == offsets:
            return StateRun(identifier, UP_TO_DATE, buckets, offsets, snapshot_id, error=note)
        self.metadata.heartbeat_lake_table(info.name, self.owner, self.clock.now_ms(), self.config.lease_ms)
        self.hook.before_commit(info.name, table)
        try:
            result = commit_upsert(table, records, buckets, {OFFSETS_PROPERTY: encode_offsets(new_offsets)})
        except CommitFailedException as exc:
            # Another writer committed first: nothing of this run was applied. The next run reads from
            # the offsets the table now has.
            table.refresh()
            theirs, theirs_id = committed_offsets(table)
            log.info("state table %s: lost a commit race (%s); it is at %s", identifier, exc, theirs)
            return StateRun(identifier, LOST_RACE, buckets, theirs, theirs_id, error=note)
        self.hook.after_commit(info.name, table)
        snapshot = table.current_snapshot()
        return StateRun(
            identifier,
            COMMITTED,
            buckets,
            new_offsets,
            None if snapshot is None else snapshot.snapshot_id,
            result,
            note,
        )

    def load_or_create(self, info: TopicInfo, lake: LakeTopicConfig, identifier: str) -> Table:
        """The state table: loaded, or created with the topic's bucket count."""
        from pyiceberg.catalog import Catalog
        from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

        from pipeline.lake.upsert import BUCKET, create_state_table

        try:
            table = self.catalog.load_table(identifier)
        except NoSuchTableError:
            self.catalog.create_namespace_if_not_exists(Catalog.namespace_from(identifier))
            properties = {**new_table_properties(info), BUCKETS_PROPERTY: str(lake.upsert_buckets)}
            try:
                table = create_state_table(self.catalog, identifier, _value_columns(), properties)
            except TableAlreadyExistsError:  # another writer created it first
                table = self.catalog.load_table(identifier)
        check_topic(table, identifier, info)
        if table.spec().is_unpartitioned() and table.current_snapshot() is None:
            # Created, and its spec (a second commit) never added: a crash in between. Add it now.
            with table.update_spec() as update:
                update.add_identity(BUCKET)
        if BUCKETS_PROPERTY not in table.properties:
            raise StrataError(
                f"the Iceberg table {identifier} has no {BUCKETS_PROPERTY} property: it is not a state"
                " table Strata made; drop it, or set strata.iceberg.table to another name"
            )
        return ensure_no_retry(table)
