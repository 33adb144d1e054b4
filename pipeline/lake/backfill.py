"""Backfill of a lake table with Spark: the records already in a large topic written as Parquet files, which
the lake commits to the topic's raw table with pyiceberg's ``add_files`` together with the offsets they
cover, so the continuous writer goes on from there.

Why Spark for this part: a backfill reads the whole log once, which Spark's executors do in parallel over
the bucket (``read_topic``'s snapshot and decoders), while the continuous writer in the worker role is
sized for the commit interval's records. No Iceberg Spark runtime is needed: Spark writes plain Parquet, and
pyiceberg adds the files to the table (it maps columns by name, as ``schema.name-mapping.default`` says,
since Spark's files carry no Iceberg field ids).

The files' columns are exactly ``read_topic``'s with headers (the raw table's layout,
``pipeline/lake/table_layout.py``). Timestamps are written as INT64 microseconds
(``spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS``): Spark's default INT96 is not an Iceberg type.
The raw table's required columns (topic, partition, offset, timestamp, timestampType, headers and a header's
key) must be required in the files too, or ``add_files`` refuses them; Spark marks every column of a read
nullable, so the frame is projected with ``coalesce`` to a literal, which Spark knows is never null. The
decoders always fill those columns, so the literal is never used.

A partitioned table takes a file only if all of its rows fall in one partition of the table's spec
(``add_files`` infers the file's partition from its column bounds). So Spark writes the files split by the
spec's values (``split_by``): a helper column per term (the timestamp's year, month, day or hour in UTC,
Spark's session time zone, or the Kafka partition) given to ``partitionBy``, which keeps those columns out of
the files themselves. Bucket terms cannot be inferred from bounds at all (a hash does not keep order):
``split_columns`` refuses them, and such a table is filled by the continuous writer instead.

Exactly once: the snapshot taken here fixes, per partition, the [start, end) the files hold (read_committed,
so ``end`` is at most the last stable offset); the caller commits the files and those ranges in one Iceberg
snapshot, or not at all. Files of a backfill that is never committed are orphans under the table's
``data/`` and the lake's orphan cleanup removes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.options import parse_options
from pipeline.reader import Decoder, read_snapshot
from pipeline.snapshot import take_snapshot
from storage.errors import InvalidConfig
from storage.lake_config import PartitionTerm
from storage.metadata import open_metadata_store

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"
_HEADERS_TYPE = "array<struct<key:string,value:binary>>"


def _required(frame: DataFrame) -> DataFrame:
    """The frame with the raw table's required columns non-nullable in its schema (module doc says why)."""
    from pyspark.sql import functions as F

    def never_null(name: str, fallback: Column) -> Column:
        return F.coalesce(F.col(name), fallback).alias(name)

    def header(h: Column) -> Column:
        return F.struct(F.coalesce(h["key"], F.lit("")).alias("key"), h["value"].alias("value"))

    # The fallback goes through the same transform, so both sides have the same non-null element type.
    headers = F.coalesce(
        F.transform(F.col("headers"), header), F.transform(F.array().cast(_HEADERS_TYPE), header)
    )
    return frame.select(
        "key",
        "value",
        never_null("topic", F.lit("")),
        never_null("partition", F.lit(0)),
        never_null("offset", F.lit(0).cast("long")),
        never_null("timestamp", F.lit(0).cast("timestamp")),
        never_null("timestampType", F.lit(0)),
        headers.alias("headers"),
    )


def split_columns(terms: Sequence[PartitionTerm]) -> list[tuple[str, Column]]:
    """A helper column per partition term (module doc); InvalidConfig for a bucket term."""
    from pyspark.sql import functions as F

    ts = F.col("timestamp")
    columns: list[tuple[str, Column]] = []
    for i, term in enumerate(terms):
        if term.transform == "bucket":
            raise InvalidConfig(
                f"a table partitioned by bucket({term.buckets}, {term.column}) cannot take files written by"
                " Spark (Iceberg cannot tell a file's bucket from its bounds): let the continuous lake writer"
                " fill it, or backfill into a table with another strata.iceberg.partition.spec"
            )
        by_term = {
            "year": F.year(ts),
            "month": F.date_format(ts, "yyyy-MM"),
            "day": F.to_date(ts),
            "hour": F.date_trunc("hour", ts),
            "identity": F.col(term.column),
        }
        columns.append((f"__strata_split_{i}", by_term[term.transform]))
    return columns


@dataclass(frozen=True, slots=True)
class BackfillFiles:
    """Parquet files (as pyiceberg's FileIO names them: s3:// or file://) and, per partition, the offsets
    [start, end) they hold."""

    files: tuple[str, ...]
    ranges: Mapping[int, tuple[int, int]]


def spark_location(location: str) -> str:
    """Where Hadoop writes ``location``: s3a:// for s3:// (the s3a connector Strata's Spark reads with)."""
    return "s3a://" + location.removeprefix("s3://") if location.startswith("s3://") else location


def iceberg_location(location: str) -> str:
    return "s3://" + location.removeprefix("s3a://") if location.startswith("s3a://") else location


def write_backfill(
    spark: SparkSession,
    metadata_url: str,
    bucket_url: str,
    topic: str,
    directory: str,
    starting: Mapping[int, int] | None = None,
    *,
    decoder: Decoder = "jvm",
    split_by: Sequence[PartitionTerm] = (),
) -> BackfillFiles:
    """Writes ``topic`` from ``starting`` (per partition; the log start for partitions not named) up to each
    partition's last stable offset into ``directory`` (a new directory, s3:// or file://), each file within
    one partition of ``split_by`` (the table's partition spec)."""
    split = split_columns(split_by)  # refuses a bucket spec before any work
    options = {"subscribe": topic, "includeHeaders": "true"}
    if starting:
        options["startingOffsets"] = json.dumps({topic: {str(p): o for p, o in starting.items()}})
    metadata = open_metadata_store(metadata_url)
    try:
        snapshot = take_snapshot(metadata, parse_options(options))
    finally:
        metadata.close()
    ranges = {partition: span for (_, partition), span in snapshot.ranges.items()}
    if not snapshot.tasks:
        return BackfillFiles((), ranges)
    frame = _required(read_snapshot(spark, snapshot, bucket_url, True, decoder))
    previous = spark.conf.get(_TIMESTAMP_TYPE, None)
    spark.conf.set(_TIMESTAMP_TYPE, "TIMESTAMP_MICROS")
    try:
        target = spark_location(directory)
        writer = frame.withColumns(dict(split)).write if split else frame.write
        if split:
            writer = writer.partitionBy(*(name for name, _ in split))
        writer.mode("errorifexists").parquet(target)
        written = spark.read.parquet(target).inputFiles()
    finally:
        if previous is None:
            spark.conf.unset(_TIMESTAMP_TYPE)
        else:
            spark.conf.set(_TIMESTAMP_TYPE, previous)
    return BackfillFiles(tuple(sorted(iceberg_location(f) for f in written)), ranges)
