"""The state table of a compacted topic (pipeline/lake/upsert.py): commits of updates and tombstones, in
any order within a commit, leave one row per live key with its latest value, as a replay of the log does;
a commit rewrites only the buckets its keys fall in. Real pyiceberg tables (SQL catalog on a temporary
SQLite file), read back through DuckDB."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from pipeline.lake.upsert import commit_upsert, create_state_table, latest_changes
from tests.fixtures.duck import connect

pytestmark = pytest.mark.integration

VALUES = pa.schema([pa.field("value", pa.binary())])
BUCKETS = 8


def _records(rows: list[tuple[bytes | None, bytes | None, int]]) -> pa.Table:
    return pa.table(
        {
            "key": pa.array([k for k, _, _ in rows], pa.binary()),
            "partition": pa.array([0] * len(rows), pa.int32()),
            "offset": pa.array([o for _, _, o in rows], pa.int64()),
            "timestamp": pa.array(
                [datetime.fromtimestamp(o, UTC) for _, _, o in rows], pa.timestamp("us", tz="UTC")
            ),
            "value": pa.array([v for _, v, _ in rows], pa.binary()),
            "deleted": pa.array([v is None for _, v, _ in rows], pa.bool_()),
        }
    )


def _files_by_bucket(table: Any) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for task in table.scan().plan_files():
        out.setdefault(task.file.partition[0], set()).add(task.file.file_path)
    return out


def test_latest_change_per_key_whatever_the_order() -> None:
    changes = latest_changes(
        _records([(b"a", b"2", 5), (b"a", b"1", 3), (None, b"x", 4), (b"b", None, 6)]), 4
    )
    assert sorted(zip(changes["key"].to_pylist(), changes["offset"].to_pylist(), strict=True)) == [
        (b"a", 5),
        (b"b", 6),
    ]


def test_commits_keep_one_row_per_live_key_and_rewrite_only_touched_buckets(tmp_path: Path) -> None:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=(tmp_path / "lake").as_uri())
    catalog.create_namespace("ns")
    table = create_state_table(catalog, "ns.orders_state", VALUES)
    rng = random.Random(7)
    expected: dict[bytes, tuple[bytes, int]] = {}
    offset = 0
    for commit in range(6):
        batch = []
        for _ in range(rng.randrange(1, 60)):
            key = b"k%d" % rng.randrange(40)
            value = None if rng.random() < 0.2 else b"v%d" % offset
            batch.append((key, value, offset))
            if value is None:
                expected.pop(key, None)
            else:
                expected[key] = (value, offset)
            offset += 1
        rng.shuffle(batch)
        before = _files_by_bucket(table)
        result = commit_upsert(table, _records(batch), BUCKETS, {"strata.offsets": f'{{"0": {offset}}}'})
        table = catalog.load_table("ns.orders_state")
        after = _files_by_bucket(table)
        touched = {b for b in before if before[b] != after.get(b)} | (set(after) - set(before))
        assert len(touched) == result.buckets_rewritten + result.buckets_emptied, commit
        rows = (
            connect()
            .execute(f"SELECT key, value, \"offset\" FROM iceberg_scan('{table.metadata_location}')")
            .fetchall()
        )
        assert sorted(rows) == sorted((k, v, o) for k, (v, o) in expected.items()), commit
    assert table.current_snapshot().summary["strata.offsets"] == f'{{"0": {offset}}}'
    # A small commit leaves most buckets' files as they were.
    before = _files_by_bucket(table)
    result = commit_upsert(table, _records([(b"k1", b"new", offset)]), BUCKETS, {})
    after = _files_by_bucket(catalog.load_table("ns.orders_state"))
    assert result.buckets_rewritten == 1
    assert sum(before[b] == after.get(b) for b in before) == len(before) - 1
