"""Migration 13 and the lake writers' leases (storage/metadata/sql/lake.py), on SQLite and PostgreSQL: the
catalog tables are pyiceberg's own (pyiceberg opens them as they are), and one writer holds a table's lease
at a time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateTable

from storage.errors import ClaimRefused, LeaseLost
from storage.lake_catalog import open_catalog
from storage.metadata import MetadataStore
from storage.metadata.lake_state import LakeClaim, LakeRunResult
from storage.metadata.schema_lake import ICEBERG_NAMESPACE_PROPERTIES_DDL, ICEBERG_TABLES_DDL

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
LEASE = 30_000


def _blanks(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def test_the_catalog_ddl_is_pyiceberg_s_own() -> None:
    from pyiceberg.catalog.sql import IcebergNamespaceProperties, IcebergTables

    for dialect in (sqlite.dialect(), postgresql.dialect()):
        ours = (ICEBERG_TABLES_DDL, ICEBERG_NAMESPACE_PROPERTIES_DDL)
        theirs = (IcebergTables.__table__, IcebergNamespaceProperties.__table__)
        for mine, table in zip(ours, theirs, strict=True):
            assert _blanks(mine) == _blanks(str(CreateTable(table).compile(dialect=dialect)))


def test_pyiceberg_uses_the_migrated_tables(metadata_store: MetadataStore, tmp_path: Path) -> None:
    catalog = open_catalog(metadata_store.url, tmp_path.as_uri())
    try:
        assert catalog._schema_version == "v1"  # found iceberg_type: no table was created or altered
        catalog.create_namespace("strata")
        assert catalog.list_namespaces() == [("strata",)]
    finally:
        catalog.engine.dispose()


def claim(topic: str, table: str | None = None) -> LakeClaim:
    return LakeClaim(topic, table or f"strata.{topic}", "raw", True, NOW - 1000)


def test_one_writer_holds_a_table_lease(metadata_store: MetadataStore) -> None:
    store = metadata_store
    first = store.lease_lake_table(claim("orders"), "w1", NOW, LEASE)
    assert first is not None
    assert (first.lease_owner, first.committed_offsets) == ("w1", {})
    assert store.lease_lake_table(claim("orders"), "w2", NOW + 1, LEASE) is None
    store.heartbeat_lake_table("orders", "w1", NOW + 2, LEASE)
    with pytest.raises(LeaseLost):
        store.heartbeat_lake_table("orders", "w2", NOW + 2, LEASE)
    # Expired: another writer takes it, and the first can no longer record its run.
    taken = store.lease_lake_table(claim("orders"), "w2", NOW + 2 + LEASE + 1, LEASE)
    assert taken is not None
    assert taken.lease_owner == "w2"
    done = LakeRunResult({0: 10, 1: 4}, 77, NOW + 3, 5, None)
    with pytest.raises(LeaseLost):
        store.finish_lake_run("orders", "w1", NOW + 3, done)
    assert store.request_lake_commit("orders")
    store.finish_lake_run("orders", "w2", NOW + 3, done)
    (row,) = store.lake_tables()
    assert (row.committed_offsets, row.last_snapshot_id, row.last_commit_ms, row.lag_records) == (
        {0: 10, 1: 4},
        77,
        NOW + 3,
        5,
    )
    # The commit was asked for while w2's run was in flight: it stands (test_metadata_lake_requests.py).
    assert (row.lease_owner, row.commit_requested, row.error) == (None, True, None)
    # A failed run keeps the last known offsets and snapshot, and shows its error.
    again = store.lease_lake_table(claim("orders"), "w1", NOW + 4, LEASE)
    assert again is not None
    store.finish_lake_run("orders", "w1", NOW + 5, LakeRunResult(None, None, None, 5, "boom"))
    (row,) = store.lake_tables()
    assert (row.committed_offsets, row.last_snapshot_id, row.error) == ({0: 10, 1: 4}, 77, "boom")


def test_two_topics_cannot_share_a_table(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("a.b", 2, {"strata.iceberg.mode": "raw"}, NOW - 1000)
    store.create_topic("a-b", 1, {"strata.iceberg.mode": "disabled"}, NOW)
    store.create_topic("plain", 1, {}, NOW)
    assert [(t.name, t.partitions) for t in store.lake_topics()] == [("a.b", 2)]
    assert store.lease_lake_table(claim("a.b", "strata.a_b"), "w1", NOW, LEASE) is not None
    with pytest.raises(ClaimRefused, match=r"strata\.a_b"):
        store.lease_lake_table(claim("a-b", "strata.a_b"), "w1", NOW, LEASE)
    store.forget_lake_table("a.b", NOW - 1)  # another incarnation's row: kept
    assert [r.topic for r in store.lake_tables()] == ["a.b"]
    store.forget_lake_table("a.b", NOW - 1000)
    assert store.lake_tables() == []
    assert not store.request_lake_commit("a.b")


def test_a_row_leased_for_another_table_forgets_the_old_table_s_offsets(
    metadata_store: MetadataStore,
) -> None:
    """Retention's hold reads ``committed_offsets`` as a lower bound of the table's (planner/lake_hold.py):
    they must never speak for a table the topic no longer names."""
    store = metadata_store
    assert store.lease_lake_table(claim("moved"), "w1", NOW, LEASE) is not None
    store.finish_lake_run("moved", "w1", NOW + 1, LakeRunResult({0: 40}, 7, NOW + 1, 0, None))
    again = store.lease_lake_table(claim("moved"), "w1", NOW + 2, LEASE)
    assert again is not None
    assert again.committed_offsets == {0: 40}
    store.finish_lake_run("moved", "w1", NOW + 3, LakeRunResult(None, None, None, 0, "failed"))
    renamed = store.lease_lake_table(claim("moved", "lake.moved"), "w1", NOW + 4, LEASE)
    assert renamed is not None
    assert renamed.committed_offsets == {}
    (row,) = [r for r in store.lake_tables() if r.topic == "moved"]
    assert (row.table_identifier, row.committed_offsets) == ("lake.moved", {})
