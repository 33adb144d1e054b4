"""A compacted topic's state table: one row per live key with its latest value, kept by copy-on-write of the
key buckets a commit touches.

Why not pyiceberg's ``upsert``: it matches every incoming key against the whole table and rewrites through
row deletes, which is slow at scale (a million keys took minutes in a reported case). Why not equality
deletes: pyiceberg cannot write them, and every reader pays for them. Instead the table is partitioned by
``identity(key_bucket)``, where ``key_bucket`` is Kafka's partitioner over the key (murmur2, positive,
modulo the bucket count: ``storage/partitioner.py``), and a commit:

1. reduces its records to one change per key: the record with the highest offset (a key lives in one
   partition under Kafka's partitioner, so that is the last one; ``latest_per_key`` of the Spark pipeline
   takes the same one), keyless records left out;
2. reads the current rows of the buckets those keys fall in (a scan filtered on ``key_bucket``);
3. replaces each changed key's row by its change, or drops it when the change is a tombstone;
4. overwrites exactly those buckets (``dynamic_partition_overwrite``) and deletes the buckets left empty,
   in one transaction with the snapshot properties (the offsets the state covers).

The cost of a commit is the rows of the buckets it touches, so the bucket count bounds it; the writer reports
the bytes rewritten. Untouched buckets' files are never rewritten.

Columns: ``key`` (binary, required), ``key_bucket`` (int), ``partition``, ``offset``, ``timestamp``, then
the value columns (``value`` for raw tables, a schema's columns for typed ones). A change table has the same
columns plus ``deleted`` (bool): true for a tombstone.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from storage.partitioner import partition_for_key

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

KEY, BUCKET, DELETED = "key", "key_bucket", "deleted"
_ROW = "__row"


def create_state_table(
    catalog: Catalog,
    identifier: str,
    value_columns: pa.Schema,
    properties: Mapping[str, str] | None = None,
) -> Table:
    """The state table, partitioned by ``identity(key_bucket)`` (a bucket is the unit a commit rewrites),
    with the table ``properties`` given."""
    table = catalog.create_table(
        identifier, schema=state_columns(value_columns), properties=dict(properties or {})
    )
    with table.update_spec() as update:
        update.add_identity(BUCKET)
    return table


def state_columns(value_columns: pa.Schema) -> pa.Schema:
    """The state table's columns for values of ``value_columns``."""
    head = [
        pa.field(KEY, pa.binary(), nullable=False),
        pa.field(BUCKET, pa.int32(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    ]
    return pa.schema([*head, *value_columns])


def buckets_of(keys: pa.Array, buckets: int) -> pa.Array:
    return pa.array([partition_for_key(k, buckets) for k in keys.to_pylist()], pa.int32())


def reduce_changes(records: pa.Table) -> pa.Table:
    """One record per key, the one with its highest offset; keyless records dropped. Applied again to the
    union of its results and more records, it gives what it gives on all of them at once (the highest
    offset per key is the highest of the highests), which is how a commit read in pieces keeps only the
    changes, not the records (``state_writer.StateChanges``)."""
    keyed = records.filter(pc.is_valid(records[KEY]))
    if keyed.num_rows == 0:
        return keyed
    ordered = keyed.take(pc.sort_indices(keyed, [(KEY, "ascending"), ("offset", "descending")]))
    ordered = ordered.append_column(_ROW, pa.array(range(ordered.num_rows), pa.int64()))
    firsts = ordered.group_by(KEY).aggregate([(_ROW, "min")])[f"{_ROW}_min"]
    return ordered.take(firsts).drop_columns([_ROW])


def latest_changes(records: pa.Table, buckets: int) -> pa.Table:
    """One change per key (``reduce_changes``), with its bucket. ``records`` has the state's columns but
    ``key_bucket``, and ``deleted``."""
    winners = reduce_changes(records)
    return winners.append_column(BUCKET, buckets_of(winners[KEY], buckets))


def merge_buckets(current: pa.Table, changes: pa.Table, schema: pa.Schema) -> tuple[pa.Table, set[int]]:
    """The new rows of the buckets ``changes`` touch, given their ``current`` rows; and the touched
    buckets left empty."""
    kept = current.filter(pc.invert(pc.is_in(current[KEY], value_set=changes[KEY])))
    live = changes.filter(pc.invert(changes[DELETED])).drop_columns([DELETED])
    rows = pa.concat_tables([kept.select(schema.names).cast(schema), live.select(schema.names).cast(schema)])
    # Emptied: buckets that held rows and hold none now (a tombstone of a key never seen empties nothing).
    return rows, set(current[BUCKET].to_pylist()) - set(rows[BUCKET].to_pylist())


def _in_buckets(buckets: list[int]) -> str:
    """A row filter in pyiceberg's expression syntax (the buckets are ints: nothing to quote)."""
    return f"{BUCKET} IN ({', '.join(str(int(b)) for b in buckets)})"


@dataclass(frozen=True, slots=True)
class UpsertResult:
    keys_changed: int
    buckets_rewritten: int
    buckets_emptied: int
    rows_written: int
    bytes_written: int


def commit_upsert(
    table: Table, records: pa.Table, buckets: int, properties: Mapping[str, str]
) -> UpsertResult:
    """Applies ``records`` (in any order) to the state ``table`` in one Iceberg transaction carrying
    ``properties`` in its snapshot summary. Raises pyiceberg's CommitFailedException when another commit won
    the race; nothing is then changed, and the caller starts over from the table it reloads."""
    schema = table.schema().as_arrow()
    changes = latest_changes(records, buckets)
    if changes.num_rows == 0:
        # No key changed (keyless records only, or none): the rows stay, but a snapshot still carries the
        # ``properties`` (the offsets the state now covers) when there are any, so they stay exact.
        if properties:
            with table.transaction() as tx:
                tx.append(schema.empty_table(), snapshot_properties=dict(properties))
        return UpsertResult(0, 0, 0, 0, 0)
    touched = sorted(set(changes[BUCKET].to_pylist()))
    current = table.scan(row_filter=_in_buckets(touched)).to_arrow()
    rows, emptied = merge_buckets(current, changes, schema)
    with table.transaction() as tx:
        if rows.num_rows:
            with warnings.catch_warnings():
                # pyiceberg deletes each written bucket's old files first and warns when a bucket is new
                # (nothing to delete): expected here, not a problem.
                warnings.filterwarnings("ignore", "Delete operation did not match any records", UserWarning)
                tx.dynamic_partition_overwrite(rows, snapshot_properties=dict(properties))
        if emptied:
            tx.delete(_in_buckets(sorted(emptied)), snapshot_properties=dict(properties))
    return UpsertResult(
        keys_changed=changes.num_rows,
        buckets_rewritten=len(set(rows[BUCKET].to_pylist())),
        buckets_emptied=len(emptied),
        rows_written=rows.num_rows,
        bytes_written=rows.nbytes,
    )
