"""Migration 14 and what the lake costs (storage/metadata/sql/lake_usage.py), on SQLite and PostgreSQL: a
topic's requests add up in its row and in the totals, a listing replaces the stored figures, writes move
them, a delete makes them unknown, the totals outlive a forgotten row, and a row that moves to another table
forgets the old table's stored figures."""

from __future__ import annotations

import threading

import pytest

from storage.metadata import MetadataStore
from storage.metadata.lake_state import LakeClaim, LakeFootprint, LakeUsage
from storage.objectstore.base import DELETE, GET, HEAD, LIST, PUT

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000
CREATED = NOW - 1000


def claim(topic: str, table: str | None = None) -> LakeClaim:
    return LakeClaim(topic, table or f"strata.{topic}", "raw", True, CREATED)


def test_usage_adds_up_per_topic_and_in_total(metadata_store: MetadataStore) -> None:
    store = metadata_store
    empty = store.lake_usage_totals()
    assert dict(empty.requests) == {PUT: 0, GET: 0, HEAD: 0, LIST: 0, DELETE: 0}
    assert (empty.stored_bytes, empty.stored_objects, empty.tables, empty.unmeasured) == (0, 0, 0, 0)
    assert store.lease_lake_table(claim("orders"), "w1", NOW, 30_000) is not None
    (row,) = store.lake_tables()
    assert (row.stored, dict(row.requests)) == (None, {PUT: 0, GET: 0, HEAD: 0, LIST: 0, DELETE: 0})

    # A first commit: written objects do not make an unknown figure known.
    first = LakeUsage({PUT: 12, HEAD: 4, GET: 1, LIST: 1}, objects_written=4, bytes_written=4000)
    assert store.record_lake_usage("orders", CREATED, NOW, first) is None
    # A listing replaces the figures; the next writes add to them.
    listed = LakeUsage({HEAD: 1, GET: 1}, footprint=LakeFootprint(5, 4600, NOW + 1))
    assert store.record_lake_usage("orders", CREATED, NOW + 1, listed) == LakeFootprint(5, 4600, NOW + 1)
    second = LakeUsage({PUT: 12, HEAD: 5, GET: 2, LIST: 1}, objects_written=4, bytes_written=3000)
    assert store.record_lake_usage("orders", CREATED, NOW + 2, second) == LakeFootprint(9, 7600, NOW + 1)
    (row,) = store.lake_tables()
    assert dict(row.requests) == {PUT: 24, GET: 4, HEAD: 10, LIST: 2, DELETE: 0}
    assert row.stored == LakeFootprint(9, 7600, NOW + 1)
    totals = store.lake_usage_totals()
    assert dict(totals.requests) == dict(row.requests)
    assert (totals.stored_objects, totals.stored_bytes, totals.tables, totals.unmeasured) == (9, 7600, 1, 0)

    # A delete of unknown size makes the figure unknown until the next listing.
    gone = LakeUsage({HEAD: 1, DELETE: 1, PUT: 1}, deletes=1)
    assert store.record_lake_usage("orders", CREATED, NOW + 3, gone) is None
    assert store.lake_usage_totals().unmeasured == 1

    # Requests of a topic whose row is gone (or of another incarnation) still count in the totals.
    store.forget_lake_table("orders", CREATED)
    assert store.record_lake_usage("orders", CREATED, NOW + 4, LakeUsage({GET: 3})) is None
    after = store.lake_usage_totals()
    assert dict(after.requests) == {PUT: 25, GET: 7, HEAD: 11, LIST: 2, DELETE: 1}
    assert (after.tables, after.stored_bytes) == (0, 0)


def test_another_table_forgets_the_stored_figures(metadata_store: MetadataStore) -> None:
    store = metadata_store
    assert store.lease_lake_table(claim("orders"), "w1", NOW, 30_000) is not None
    store.record_lake_usage("orders", CREATED, NOW, LakeUsage({PUT: 3}, footprint=LakeFootprint(1, 10, NOW)))
    # The same table again keeps them; the topic moved to another table loses them, not its requests.
    assert store.lease_lake_table(claim("orders"), "w1", NOW + 1, 30_000) is not None
    assert store.lake_tables()[0].stored == LakeFootprint(1, 10, NOW)
    moved = store.lease_lake_table(claim("orders", "strata.orders_v2"), "w1", NOW + 2, 30_000)
    assert moved is not None
    assert (moved.stored, moved.requests[PUT]) == (None, 3)


def test_concurrent_records_lose_no_count(metadata_store: MetadataStore) -> None:
    store = metadata_store
    assert store.lease_lake_table(claim("orders"), "w1", NOW, 30_000) is not None
    store.record_lake_usage("orders", CREATED, NOW, LakeUsage(footprint=LakeFootprint(0, 0, NOW)))
    one = LakeUsage({PUT: 3, GET: 1}, objects_written=1, bytes_written=7)

    def record() -> None:
        for _ in range(20):
            store.record_lake_usage("orders", CREATED, NOW, one)

    threads = [threading.Thread(target=record) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (row,) = store.lake_tables()
    assert (row.requests[PUT], row.requests[GET]) == (240, 80)
    assert row.stored == LakeFootprint(80, 560, NOW)
    assert store.lake_usage_totals().requests[PUT] == 240
