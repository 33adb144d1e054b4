"""A typed table's commit: one read of the topic turned into appends of typed rows, with the schema evolution
they need, in the writer's one transaction; and the records that have no typed row, for the dead-letter table.

Modes (``strata.iceberg.mode``, ``storage/lake_config.py``): ``value_schema_id_prefix`` decodes each value
with the schema its Confluent framing names; ``value_schema_latest`` decodes every value as a bare payload of
the latest schema of the mode's subject (``<topic>-value`` by default), looked up once per commit. The
conversion is ``layouts.typed_batches`` (``registry/columns``); schemas come through a ``SchemaLookup``,
which the process gives over its schema registry (``registry_schemas``), so this module does no registry
IO of its own and tests may hand it any lookup.

The table. A typed table is created with only the ``strata`` metadata struct (partition, offset,
timestamp, key, headers, schema id); the value columns arrive by evolution, so a table whose first commit has
no typed row (only dead letters, or only offsets) exists and carries its offsets. The value columns are
therefore nullable (evolution adds nullable columns), whichever schema comes first. Its partition spec is the
topic's, over the struct's fields (``strata.timestamp``, ``strata.key``, ``strata.partition``).

Evolution. The rows of each schema (each group of ``typed_batches``, in the order they first appear) are
merged progressively into the table's columns (``registry/columns/evolve.merge``). A change Iceberg allows
is applied as ``update_schema().union_by_name(merged)`` in the same transaction, just before that group's
append; a group whose columns cannot join (``evolve.Incompatible``) is refused whole, its records becoming
dead letters with the reason, and the table keeps advancing past them: nothing a producer writes can wedge
the writer. The table's columns are read from its Iceberg schema through Arrow (large types made plain,
field ids dropped, so ``merge`` matches by name as ``union_by_name`` does).

Pieces. A commit is read in pieces (``source.py``) to bound the writer's memory: each piece is planned
on its own (``plan_piece``) onto the columns the pieces before it left, with the decoding looked up once
for the whole commit (``decoding_for``), and its steps applied before the next piece is read.

Exactly once. Each group's rows become data files of their own as the group comes (``append.FileAppend``:
pyiceberg projects each onto the table's columns, nulls where the group's schema lacks one, where one
concatenated write would need Arrow to cast nested structs onto merged ones), written against the schema
the transaction has evolved to by then. All of a commit's files are then appended in one snapshot that
carries ``strata.offsets``, after the schema updates, in the one transaction that the catalog's
compare-and-set commits whole or not at all, so the writer's argument (``writer.py``) holds as in raw mode.
Tombstones have no row in an append table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from pipeline.lake.layouts import DEAD_LETTER, dead_letter_rows, typed_batches
from pipeline.lake.table_layout import partition_spec
from registry.columns import RESERVED_COLUMN
from registry.columns.evolve import Incompatible, merge
from registry.columns.typed import Fixed, TypedRows
from registry.errors import InvalidSubject, SubjectNotFound, VersionNotFound
from storage.lake_config import MODE_LATEST, LakeMode, PartitionTerm

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table, Transaction

    from pipeline.lake.append import FileAppend
    from registry.formats.base import ParsedSchema
    from registry.service import SchemaRegistry
    from storage.metadata.schema_store import SchemaStore


class SchemaLookup(Protocol):
    """The registry as a typed table needs it: a schema by id, and a subject's latest schema id."""

    def parsed(self, schema_id: int) -> ParsedSchema:
        """Raises SchemaNotFound, InvalidSchema (records then go to the dead-letter table), StoreError."""
        ...

    def latest_id(self, subject: str) -> int:
        """Raises SubjectNotFound (no live version), InvalidSubject, StoreError."""
        ...


class RegistrySchemas:
    """A ``SchemaLookup`` over the schema registry's service (and so its parse cache)."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self._registry = registry

    def parsed(self, schema_id: int) -> ParsedSchema:
        return self._registry.parsed(schema_id)

    def latest_id(self, subject: str) -> int:
        return self._registry.version(subject, "latest").schema_id


def registry_schemas(store: SchemaStore) -> RegistrySchemas:
    """The lookup of the registry kept in ``store`` (the metadata store), as the agents serve it."""
    from registry.service import SchemaRegistry, default_formats

    return RegistrySchemas(SchemaRegistry(store, default_formats()))


def typed_schema(terms: tuple[PartitionTerm, ...]) -> tuple[Schema, PartitionSpec]:
    """A new typed table's Iceberg schema, the ``strata`` struct alone (``layouts.METADATA``, with fixed
    field ids as the raw table has), and the topic's partition spec over the struct's fields."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    header = StructType(
        NestedField(9, "key", StringType(), required=False),
        NestedField(10, "value", BinaryType(), required=False),
    )
    metadata = StructType(
        NestedField(2, "partition", IntegerType(), required=True),
        NestedField(3, "offset", LongType(), required=True),
        NestedField(4, "timestamp", TimestamptzType(), required=False),
        NestedField(5, "timestamp_type", IntegerType(), required=False),
        NestedField(6, "key", BinaryType(), required=False),
        NestedField(7, "headers", ListType(8, header, element_required=False), required=False),
        NestedField(11, "schema_id", IntegerType(), required=True),
    )
    schema = Schema(NestedField(1, RESERVED_COLUMN, metadata, required=True))
    return schema, partition_spec(schema, terms, prefix=f"{RESERVED_COLUMN}.")


def table_columns(table: Table) -> pa.Schema:
    """The table's columns as ``merge`` compares them: plain Arrow types, no field ids."""
    return pa.schema([_plain_field(f) for f in table.schema().as_arrow()])


@dataclass
class TypedPlan:
    """One piece of a typed commit: each step evolves the columns (when ``evolve_to`` is set) then appends
    ``rows``; ``dead_letters`` (in ``layouts.DEAD_LETTER``) are the records without a typed row."""

    columns: pa.Schema  # the table's columns after the last step
    steps: list[tuple[pa.Schema | None, pa.Table]] = field(default_factory=list)
    dead_letters: pa.Table = field(default_factory=DEAD_LETTER.empty_table)
    tombstones: int = 0

    @property
    def rows(self) -> int:
        return sum(rows.num_rows for _, rows in self.steps)

    def apply(self, transaction: Transaction, files: FileAppend) -> None:
        """The steps into ``transaction``: each evolution as a schema update, each step's rows as data
        files (``files``, which the commit appends in its one snapshot)."""
        for evolve_to, rows in self.steps:
            if evolve_to is not None:
                with transaction.update_schema() as update:
                    update.union_by_name(evolve_to)
            files.write(rows)


# How a commit decodes values: with the schema each value's framing names (None), with one schema (Fixed),
# or not at all (the reason its values are refused: the subject has no schema).
Decoding = Fixed | str | None


def decoding_for(lookup: SchemaLookup, mode: LakeMode, topic: str) -> Decoding:
    """The commit's decoding, looked up once per commit (every piece of it decodes alike)."""
    if mode.name != MODE_LATEST:
        return None
    subject = mode.value_subject(topic)
    try:
        return Fixed(lookup.latest_id(subject), mode.protobuf_name)
    except (SubjectNotFound, VersionNotFound, InvalidSubject) as exc:
        return f"the subject {subject!r} has no schema to decode the value with: {exc.message}"


def plan_typed(
    columns: pa.Schema, raw: pa.Table, lookup: SchemaLookup, mode: LakeMode, topic: str
) -> TypedPlan:
    """``raw`` (``layouts.RAW``, in offset order) as the steps of one commit onto a table of ``columns``."""
    return plan_piece(columns, raw, lookup, decoding_for(lookup, mode, topic))


def plan_piece(columns: pa.Schema, raw: pa.Table, lookup: SchemaLookup, decoding: Decoding) -> TypedPlan:
    """``raw`` (one piece of a commit, in offset order) as steps onto a table of ``columns``."""
    plan = TypedPlan(columns)
    if isinstance(decoding, str):
        values = raw.column("value")
        refused = [(i, decoding) for i, v in enumerate(values.is_null().to_pylist()) if not v]
        plan.dead_letters = dead_letter_rows(raw, refused)
        plan.tombstones = raw.num_rows - len(refused)
        return plan
    converted = typed_batches(raw, TypedRows(lookup.parsed), decoding)
    plan.tombstones = converted.tombstones
    incompatible: list[tuple[int, str]] = []
    for batch in converted.batches:
        try:
            merged = merge(plan.columns, batch.rows.schema)
        except Incompatible as exc:
            reason = f"schema id {batch.schema_id} cannot evolve the table: {exc}"
            incompatible.extend((p, reason) for p in batch.positions)
            continue
        evolve_to = None if merged is plan.columns else merged
        plan.columns = merged
        plan.steps.append((evolve_to, batch.rows))
    dead = converted.dead_letters
    if incompatible:
        dead = pa.concat_tables([dead, dead_letter_rows(raw, incompatible)])
        dead = dead.sort_by([("partition", "ascending"), ("offset", "ascending")])
    plan.dead_letters = dead
    return plan


def _plain_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, _plain(f.type), nullable=f.nullable)


def _plain(t: pa.DataType) -> pa.DataType:
    """Iceberg's Arrow types as ``registry/columns`` builds them: large strings, binaries and lists plain."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_plain_field(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(_plain_field(t.key_field), _plain_field(t.item_field))
    if pa.types.is_struct(t):
        return pa.struct([_plain_field(t.field(i)) for i in range(t.num_fields)])
    return t
