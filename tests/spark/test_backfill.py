"""The lake's Spark backfill (pipeline/lake/backfill.py): Spark writes a topic's records as Parquet,
pyiceberg's ``add_files`` commits them to a raw table with the offsets they cover, and the table then equals
``read_topic`` over those offsets; a second backfill from those offsets adds exactly the newer records, and
Spark reads the table by name through the agent's Iceberg REST catalog (Iceberg's runtime, which maps the
files' columns by the name mapping ``add_files`` set) with the same rows. On both backends: file:// with
SQLite, and moto S3 (s3a for Spark's writes, Iceberg's S3FileIO for its reads) with PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

import pytest
from confluent_kafka import Producer

from pipeline.lake.backfill import write_backfill
from pipeline.lake.spark_catalog import with_lake_catalog
from pipeline.lake.table_layout import raw_schema
from pipeline.reader import read_topic
from storage.lake_catalog import open_catalog, warehouse_location
from tests.fixtures.server import RunningServer

pytestmark = pytest.mark.integration

TOPIC = "backfilled"


def _produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 5})
    for i in range(start, start + count):
        key = None if i % 5 == 0 else b"k%d" % (i % 7)
        value = None if i % 6 == 0 else b"v%d" % i
        producer.produce(TOPIC, key=key, value=value, partition=i % 3, headers=[("n", b"%d" % i)])
    assert producer.flush(30) == 0


def _rows(table: Any) -> list[tuple[Any, ...]]:
    columns = ["partition", "offset", "key", "value", "timestamp", "headers"]
    frame = table.scan().to_arrow().select(columns).to_pylist()
    return sorted(
        tuple(r[c] if c != "headers" else [tuple(h.values()) for h in r[c]] for c in columns) for r in frame
    )


def _spark_rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        # Spark gives naive datetimes in its session time zone, UTC (pipeline/session.py).
        (
            r.partition,
            r.offset,
            r.key,
            r.value,
            r.timestamp.replace(tzinfo=UTC),
            [(h.key, h.value) for h in r.headers],
        )
        for r in df.collect()
    )


def _topic_rows(spark: Any, srv: RunningServer) -> list[tuple[Any, ...]]:
    settings = srv.runtime.settings
    df = read_topic(spark, settings.metadata_url, settings.bucket_url, subscribe=TOPIC, includeHeaders="true")
    return _spark_rows(df)


def test_a_backfill_commits_the_topic_and_a_second_one_goes_on(spark: Any, server: RunningServer) -> None:
    srv = server
    settings = srv.runtime.settings
    srv.create_topic(TOPIC, partitions=3)
    _produce(srv.kafka_bootstrap, 0, 60)
    catalog = open_catalog(
        settings.metadata_url, settings.bucket_url, s3_endpoint=settings.s3_endpoint, s3_region="us-east-1"
    )
    catalog.create_namespace_if_not_exists("strata")
    table = catalog.create_table("strata.backfilled", schema=raw_schema())
    base = f"{warehouse_location(settings.bucket_url)}/strata/backfilled/data"

    first = write_backfill(spark, settings.metadata_url, settings.bucket_url, TOPIC, f"{base}/backfill-1")
    assert first.ranges == {0: (0, 20), 1: (0, 20), 2: (0, 20)}
    table.add_files(list(first.files), snapshot_properties={"strata.offsets": json.dumps(first.ranges)})
    assert _rows(catalog.load_table("strata.backfilled")) == _topic_rows(spark, srv)

    _produce(srv.kafka_bootstrap, 60, 30)
    ends = {p: end for p, (_, end) in first.ranges.items()}
    second = write_backfill(
        spark, settings.metadata_url, settings.bucket_url, TOPIC, f"{base}/backfill-2", ends
    )
    assert second.ranges == {0: (20, 30), 1: (20, 30), 2: (20, 30)}
    table = catalog.load_table("strata.backfilled")
    table.add_files(list(second.files))
    rows = _rows(catalog.load_table("strata.backfilled"))
    assert len(rows) == len({(p, o) for p, o, *_ in rows}) == 90
    assert rows == _topic_rows(spark, srv)
    catalog.engine.dispose()

    # Spark, through the agent's catalog: the table's columns are read_topic's, and so are its rows.
    lake = with_lake_catalog(spark, f"{srv.url}/iceberg")
    table_df = lake.table("lake.strata.backfilled")
    topic_df = read_topic(
        spark, settings.metadata_url, settings.bucket_url, subscribe=TOPIC, includeHeaders="true"
    )
    assert [f.name for f in table_df.schema.fields] == [f.name for f in topic_df.schema.fields]
    assert _spark_rows(table_df) == rows
