"""Read Strata topics as DataFrames with exactly the schema of Spark's Kafka source.

    df = read_topic(spark, metadata_url, bucket_url, subscribe="orders", startingOffsets="earliest")

Columns: key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int, and headers array<struct<key:string,value:binary>> with includeHeaders=true.

How: the driver takes a metadata snapshot (``pipeline.snapshot``) naming exactly the live files and the
chunks to decode; Spark reads those files through the Hadoop filesystem (``binaryFile``: s3a for s3://
buckets, the local filesystem for file://); executors decode them with ``mapInArrow``, honouring chunk
byte ranges, relative batch offsets and compaction holes. Offsets outside the requested ranges are
dropped on the executors, so a read is exactly [startingOffsets, endingOffsets) per partition.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pipeline.decode import decode_file
from pipeline.options import parse_options
from pipeline.snapshot import ChunkTask, Snapshot, take_snapshot
from storage.errors import SettingsError
from storage.keys import key_of
from storage.metadata import open_metadata_store
from storage.objectstore import parse_store_url

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int"
)
HEADERS_SCHEMA = "headers array<struct<key:string,value:binary>>"


def spark_schema(include_headers: bool) -> str:
    return f"{_SCHEMA}, {HEADERS_SCHEMA}" if include_headers else _SCHEMA


def object_url(bucket_url: str, key: str) -> str:
    """Where Spark reads an object: s3a:// for an s3:// bucket, file:// for a local one."""
    location = parse_store_url(bucket_url)
    if location.scheme == "s3":
        prefix = f"{location.prefix}/" if location.prefix else ""
        return f"s3a://{location.bucket}/{prefix}{key}"
    if location.path is None:
        raise SettingsError(f"cannot read {bucket_url} from Spark")
    # Not Path.as_uri(): Hadoop's Path takes the path part verbatim and quotes it itself, so a
    # percent-encoded address ("my%20checkout") names a directory that does not exist. Spark's loader
    # then treats the path as a glob, so glob metacharacters in the bucket's directory are escaped.
    path = (location.path.resolve() / key).as_posix()
    return "file://" + _GLOB_SPECIAL.sub(r"\\\g<0>", path)


_GLOB_SPECIAL = re.compile(r"[\\{}\[\]*?]")


def read_topic(spark: SparkSession, metadata_url: str, bucket_url: str, **options: object) -> DataFrame:
    """The topic(s) as a DataFrame. ``options`` are the Kafka source's: subscribe or assign, startingOffsets,
    endingOffsets, includeHeaders (also accepted as a dict via ``**{"startingOffsets": ...}``)."""
    opts = parse_options(options)
    metadata = open_metadata_store(metadata_url)
    try:
        snapshot = take_snapshot(metadata, opts)
    finally:
        metadata.close()
    return read_snapshot(spark, snapshot, bucket_url, opts.include_headers)


def read_snapshot(
    spark: SparkSession, snapshot: Snapshot, bucket_url: str, include_headers: bool
) -> DataFrame:
    schema = spark_schema(include_headers)
    if not snapshot.tasks:
        return spark.createDataFrame([], schema)
    tasks = spark.sparkContext.broadcast(dict(snapshot.tasks))
    paths = [object_url(bucket_url, key) for key in snapshot.object_keys]
    files = spark.read.format("binaryFile").load(paths)

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_key: Mapping[str, tuple[ChunkTask, ...]] = tasks.value
        for batch in batches:
            contents = batch.column("content")
            for i, path in enumerate(batch.column("path").to_pylist()):
                key = key_of(path)
                # The object's bytes as a view of the Arrow buffer: to_pylist() copied each one.
                content = memoryview(contents[i].as_buffer())
                yield decode_file(content, by_key[key], include_headers, object_key=key)

    return files.select("path", "content").mapInArrow(decode, schema)


def latest_per_key(df: DataFrame) -> DataFrame:
    """The current value of every live key per topic: the last record of each key, tombstones as deletes.

    What a consumer reading from offset 0 reconstructs. A key lives in one partition (Kafka's
    partitioner), so "last" is the highest offset; keyless records are not part of any table.
    """
    from pyspark.sql import functions as F

    keyed = df.where(F.col("key").isNotNull())
    last = keyed.groupBy("topic", "key").agg(
        F.max_by(
            F.struct(*[F.col(c) for c in ("value", "partition", "offset", "timestamp")]), "offset"
        ).alias("r")
    )
    return last.where(F.col("r.value").isNotNull()).select(
        "topic", "key", "r.value", "r.partition", "r.offset", "r.timestamp"
    )


def read_latest(spark: SparkSession, metadata_url: str, bucket_url: str, **options: Any) -> DataFrame:
    return latest_per_key(read_topic(spark, metadata_url, bucket_url, **options))
