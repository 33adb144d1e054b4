"""Spark reads the lake's Iceberg tables by name through an agent's REST catalog
(pipeline/lake/spark_catalog.py), with Apache Iceberg's Spark runtime: tables made with pyiceberg in the
lake's SQL catalog (two snapshots each) read as ``lake.strata.<table>`` with the rows pyiceberg appended,
their snapshots and their first snapshot by time travel, on file:// + SQLite and on moto S3 (Iceberg's
S3FileIO) + PostgreSQL; an append made after Spark loaded a table, read after a refresh; a write through the
catalog refused, the table's snapshots and files unchanged; a principal's bearer token reading what it is
granted and nothing else. The backfill's ``add_files`` table is read the same way in test_backfill.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import UnsupportedOperationException

from pipeline.lake.spark_catalog import with_lake_catalog
from tests.fixtures.lake_tables import lake_catalog, make_table
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration


def _committed(server: RunningServer, identifier: str) -> tuple[int, list[str]]:
    """The table's snapshots and the data files its current snapshot holds."""
    with lake_catalog(server) as catalog:
        table = catalog.load_table(identifier)
        return len(table.snapshots()), sorted(task.file.file_path for task in table.scan().plan_files())


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=lambda row: row[0])


def test_spark_reads_a_pyiceberg_table_by_name(spark: Any, server: RunningServer) -> None:
    expected = make_table(server, "strata.orders")
    make_table(server, "strata.payments")
    lake = with_lake_catalog(spark, f"{server.url}/iceberg")

    orders = lake.table("lake.strata.orders")
    assert [(f.name, f.dataType.simpleString()) for f in orders.schema.fields] == [
        ("id", "bigint"),
        ("name", "string"),
        ("amount", "double"),
    ]
    assert _rows(orders) == [tuple(row.values()) for row in expected.to_pylist()]
    tables = lake.sql("SHOW TABLES IN lake.strata").collect()
    assert sorted(row.tableName for row in tables) == ["orders", "payments"]
    assert [row.namespace for row in lake.sql("SHOW NAMESPACES IN lake").collect()] == ["strata"]

    # Iceberg's metadata tables and time travel, against the snapshots pyiceberg committed.
    with lake_catalog(server) as catalog:
        snapshots = [s.snapshot_id for s in catalog.load_table("strata.orders").snapshots()]
    seen = lake.sql("SELECT snapshot_id, operation FROM lake.strata.orders.snapshots ORDER BY committed_at")
    assert [(row.snapshot_id, row.operation) for row in seen.collect()] == [(s, "append") for s in snapshots]
    first = lake.sql(f"SELECT * FROM lake.strata.orders VERSION AS OF {snapshots[0]}")
    assert _rows(first) == [tuple(row.values()) for row in expected.to_pylist()[:3]]


def test_a_table_appended_after_spark_loaded_it_is_read_anew(spark: Any, server: RunningServer) -> None:
    """Spark's catalog caches a loaded table (``cache-enabled``); a refresh loads it again from the agent,
    which answers the current metadata file."""
    expected = make_table(server, "strata.orders")
    lake = with_lake_catalog(spark, f"{server.url}/iceberg")
    assert lake.table("lake.strata.orders").count() == expected.num_rows
    with lake_catalog(server) as catalog:
        catalog.load_table("strata.orders").append(expected.slice(0, 2))
    lake.sql("REFRESH TABLE lake.strata.orders")
    assert lake.table("lake.strata.orders").count() == expected.num_rows + 2


def test_a_write_through_the_catalog_is_refused_and_changes_nothing(
    spark: Any, server: RunningServer
) -> None:
    """Iceberg's client refuses the commit itself (the catalog's config lists no write endpoint). Spark has
    written its data file by then: it is left unreferenced in the bucket (docs/spark.md), the table is not
    changed."""
    expected = make_table(server, "strata.orders")
    before = _committed(server, "strata.orders")
    lake = with_lake_catalog(spark, f"{server.url}/iceberg")
    with pytest.raises(UnsupportedOperationException, match="does not support endpoint: POST"):
        lake.sql("INSERT INTO lake.strata.orders VALUES (6, 'f', 6.0)").collect()
    assert _committed(server, "strata.orders") == before
    assert before[0] == 2
    assert lake.table("lake.strata.orders").count() == expected.num_rows


PRINCIPALS = """
# Reads the orders table, with a token for its readers.
[principals.analyst]
password = "analyst-pw-7a2c"
tokens = ["analyst-token-5b9f"]
tables = { read = ["strata.orders"] }
"""


def test_spark_reads_with_a_principals_token_what_it_may_read(
    spark: Any, server_factory: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "principals.toml").write_text(PRINCIPALS)
    with server_factory(principals_file=str(tmp_path / "principals.toml"), kafka_port=-1) as srv:
        expected = make_table(srv, "strata.orders")
        make_table(srv, "strata.payments")
        uri = f"{srv.url}/iceberg"
        # Iceberg's REST exceptions reach Python as py4j's, with the Java class and message in the text.
        with pytest.raises(Py4JJavaError, match="NotAuthorizedException"):
            with_lake_catalog(spark, uri).table("lake.strata.orders")
        analyst = with_lake_catalog(spark, uri, token="analyst-token-5b9f")
        assert _rows(analyst.table("lake.strata.orders")) == [
            tuple(row.values()) for row in expected.to_pylist()
        ]
        assert [row.tableName for row in analyst.sql("SHOW TABLES IN lake.strata").collect()] == ["orders"]
        with pytest.raises(Py4JJavaError, match="ForbiddenException"):
            analyst.table("lake.strata.payments")
