"""Typed tables' schema evolution (registry/columns/evolve.py): Iceberg's allowed changes are merged,
anything else is Incompatible with the column named, and merged columns take both schemas' rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from registry.columns.evolve import Incompatible, merge

TABLE = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("price", pa.decimal128(9, 2)),
        pa.field("ratio", pa.float32()),
        pa.field("line", pa.struct([pa.field("qty", pa.int32(), nullable=False)])),
        pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
        pa.field("stock", pa.map_(pa.string(), pa.int32())),
    ]
)


def test_the_same_schema_changes_nothing() -> None:
    assert merge(TABLE, TABLE) is TABLE


def test_allowed_changes_widen_add_and_relax() -> None:
    incoming = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("price", pa.decimal128(12, 2)),
            pa.field("ratio", pa.float64()),
            pa.field("line", pa.struct([pa.field("sku", pa.string(), nullable=False)])),
            pa.field("tags", pa.list_(pa.field("element", pa.string()))),
            pa.field("stock", pa.map_(pa.string(), pa.int64())),
            pa.field("note", pa.string(), nullable=False),
        ]
    )
    merged = merge(TABLE, incoming)
    assert merged.field("id").type == pa.int64()
    assert not merged.field("id").nullable
    assert merged.field("price").type == pa.decimal128(12, 2)
    assert merged.field("ratio").type == pa.float64()
    assert merged.field("line").type == pa.struct([pa.field("qty", pa.int32()), pa.field("sku", pa.string())])
    assert merged.field("tags").type == pa.list_(pa.string())
    assert merged.field("stock").type == pa.map_(pa.string(), pa.int64())
    assert merged.field("note").nullable  # added columns are nullable: earlier rows have none
    old = pa.Table.from_pylist([{"id": 1, "line": {"qty": 2}, "tags": ["a"]}], TABLE)
    new = pa.Table.from_pylist([{"id": 2**40, "line": {"sku": "x"}, "note": "n"}], merged)
    # Rows written under the table's columns read under the merged ones, as Iceberg reads old files.
    both = pa.concat_tables([pa.Table.from_pylist(old.to_pylist(), merged), new])
    assert both.column("id").to_pylist() == [1, 2**40]


def test_a_missing_required_column_becomes_nullable() -> None:
    merged = merge(TABLE, pa.schema([pa.field("ratio", pa.float32())]))
    assert merged.field("id").nullable
    assert merged.names == TABLE.names


def test_narrower_values_fit_the_wider_column() -> None:
    wide = pa.schema([pa.field("id", pa.int64())])
    assert merge(wide, pa.schema([pa.field("id", pa.int32())])) is wide


@pytest.mark.parametrize(
    ("field", "column"),
    [
        (pa.field("id", pa.string()), "id"),
        (pa.field("price", pa.decimal128(12, 3)), "price"),
        (pa.field("line", pa.list_(pa.int32())), "line"),
        (pa.field("line", pa.struct([pa.field("qty", pa.string())])), "line.qty"),
        (pa.field("stock", pa.map_(pa.int32(), pa.int32())), "stock"),
        (pa.field("tags", pa.list_(pa.int64())), "tags[]"),
    ],
)
def test_other_changes_are_incompatible(field: pa.Field, column: str) -> None:
    with pytest.raises(Incompatible) as raised:
        merge(TABLE, pa.schema([field]))
    assert str(raised.value).startswith(f"{column}: ")


@pytest.mark.integration  # a real table in a temporary directory: IO, so not in test-fast
def test_pyiceberg_evolves_a_table_to_the_merged_columns_in_one_commit(tmp_path: Path) -> None:
    """The writer's step: ``union_by_name`` to the merged columns and the append in one transaction; the
    rows of both schemas then read through DuckDB."""
    from pyiceberg.catalog.sql import SqlCatalog

    from tests.fixtures.duck import connect

    incoming = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("line", pa.struct([pa.field("sku", pa.string(), nullable=False)])),
            pa.field("note", pa.string(), nullable=False),
        ]
    )
    merged = merge(TABLE, incoming)
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "lake").as_uri())
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", schema=TABLE)
    table.append(pa.Table.from_pylist([{"id": 1, "line": {"qty": 2}, "tags": ["a"]}], TABLE))
    snapshots = len(table.snapshots())
    with table.transaction() as tx:
        with tx.update_schema() as update:
            update.union_by_name(merged)
        tx.append(pa.Table.from_pylist([{"id": 2**40, "line": {"sku": "x"}, "note": "n"}], merged))
    table = catalog.load_table("ns.t")
    assert len(table.snapshots()) == snapshots + 1
    rows = (
        connect()
        .execute(f"SELECT id, line, note, tags FROM iceberg_scan('{table.metadata_location}') ORDER BY id")
        .fetchall()
    )
    assert rows == [(1, {"qty": 2, "sku": None}, None, ["a"]), (2**40, {"qty": None, "sku": "x"}, "n", None)]
