"""Read Strata topics as DataFrames with exactly the schema of Spark's Kafka source.

    df = read_topic(spark, metadata_url, bucket_url, subscribe="orders", startingOffsets="earliest")

Columns: key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int, and headers array<struct<key:string,value:binary>> with includeHeaders=true.

How: the driver takes a metadata snapshot (``pipeline.snapshot``) naming exactly the live files and the
chunks to decode. Two decoders read it, with the same rows:

- ``decoder="jvm"`` (the default): a DataSource V2 in Java (``pipeline/jvm``, the jar of
  ``pipeline.jars.decoder_jar``) gets the snapshot as a task list (``pipeline.tasklist``), one input
  partition per file or group of small files. Executors read the chunks' byte ranges through Hadoop's
  FileSystem (s3a for s3:// buckets, the local filesystem for file://) and decode them into rows in the JVM.
- ``decoder="python"``: Spark reads whole files with ``binaryFile`` and the executors' Python workers decode
  them with ``mapInArrow`` (``pipeline.decode``): the reference the JVM decoder is held to.

Both honour chunk byte ranges, relative batch offsets and compaction holes, and drop offsets outside the
requested ranges on the executors, so a read is exactly [startingOffsets, endingOffsets) per partition.
By default (``kafka.isolation.level=read_committed``, unlike Spark's Kafka source) that range ends at the
last stable offset and both drop the batches of aborted transactions, which the snapshot names per chunk;
``read_uncommitted`` reads every stored record up to the high watermark.
A corrupt chunk fails the job with the Python error's code and wording (``CodecError 50002: chunk in <key>
fails its CRC-32C check ...``), or, with ``failOnDataLoss=false`` (Spark's Kafka source option), is skipped
and logged with its range while the read goes on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from pipeline.decode import decode_file
from pipeline.jars import SparkSetupError
from pipeline.options import InvalidReadOption, parse_options
from pipeline.snapshot import ChunkTask, Snapshot, take_snapshot
from pipeline.tasklist import encode_tasks
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

Decoder = Literal["jvm", "python"]
DECODERS: tuple[Decoder, ...] = get_args(Decoder)
# The Java source's class (pipeline/jvm/src/main/java/strata/spark/StrataSource.java).
JVM_SOURCE = "strata.spark.StrataSource"


def spark_schema(include_headers: bool) -> str:
    return f"{_SCHEMA}, {HEADERS_SCHEMA}" if include_headers else _SCHEMA


def object_location(bucket_url: str, key: str) -> str:
    """Where Hadoop opens an object: s3a:// for an s3:// bucket, file:// for a local one.

    Not Path.as_uri(): Hadoop's Path takes the path part verbatim and quotes it itself, so a
    percent-encoded address ("my%20checkout") names a directory that does not exist.
    """
    location = parse_store_url(bucket_url)
    if location.scheme == "s3":
        prefix = f"{location.prefix}/" if location.prefix else ""
        return f"s3a://{location.bucket}/{prefix}{key}"
    if location.path is None:
        raise SettingsError(f"cannot read {bucket_url} from Spark")
    return "file://" + (location.path.resolve() / key).as_posix()


def object_url(bucket_url: str, key: str) -> str:
    """Where ``spark.read.load`` reads an object (``binaryFile``): ``object_location``, but Spark's loader
    treats a path as a glob, so glob metacharacters in a local bucket's directory are escaped."""
    location = object_location(bucket_url, key)
    if not location.startswith("file://"):
        return location
    return "file://" + _GLOB_SPECIAL.sub(r"\\\g<0>", location.removeprefix("file://"))


_GLOB_SPECIAL = re.compile(r"[\\{}\[\]*?]")


def read_topic(
    spark: SparkSession, metadata_url: str, bucket_url: str, *, decoder: Decoder = "jvm", **options: object
) -> DataFrame:
    """The topic(s) as a DataFrame. ``options`` are the Kafka source's: subscribe or assign, startingOffsets,
    endingOffsets, includeHeaders, failOnDataLoss, and ``kafka.isolation.level`` (read_committed by default,
    ``pipeline.options`` says why), also accepted as a dict via ``**{"kafka.isolation.level": ...}``.

    ``decoder`` picks where records are decoded: "jvm" (the Java source, the default) or "python" (the
    executors' Python workers); both give the same rows."""
    if decoder not in DECODERS:
        raise InvalidReadOption(f"decoder must be one of {', '.join(DECODERS)}, not {decoder!r}")
    opts = parse_options(options)
    metadata = open_metadata_store(metadata_url)
    try:
        snapshot = take_snapshot(metadata, opts)
    finally:
        metadata.close()
    return read_snapshot(
        spark, snapshot, bucket_url, opts.include_headers, decoder, fail_on_data_loss=opts.fail_on_data_loss
    )


def read_snapshot(
    spark: SparkSession,
    snapshot: Snapshot,
    bucket_url: str,
    include_headers: bool,
    decoder: Decoder = "jvm",
    *,
    fail_on_data_loss: bool = True,
) -> DataFrame:
    if not snapshot.tasks:
        return spark.createDataFrame([], spark_schema(include_headers))
    if decoder == "jvm":
        return _read_in_jvm(spark, snapshot, bucket_url, include_headers, fail_on_data_loss)
    return _read_in_python(spark, snapshot, bucket_url, include_headers, fail_on_data_loss)


def _read_in_jvm(
    spark: SparkSession, snapshot: Snapshot, bucket_url: str, include_headers: bool, fail_on_data_loss: bool
) -> DataFrame:
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
    from pyspark.errors.exceptions.captured import CapturedException

    tasks = encode_tasks(snapshot.tasks, lambda key: object_location(bucket_url, key))
    reader = (
        spark.read.format(JVM_SOURCE)
        .option("tasks", tasks)
        .option("includeHeaders", "true" if include_headers else "false")
        .option("failOnDataLoss", "true" if fail_on_data_loss else "false")
    )
    try:
        return reader.load()
    except (CapturedException, Py4JJavaError) as exc:
        # pyspark 4.3 hands Spark's SparkClassNotFoundException over unconverted (a Py4JJavaError).
        if isinstance(exc, CapturedException):
            condition = exc.getCondition()
        else:
            java = exc.java_exception
            not_found = java.getClass().getName() == "org.apache.spark.SparkClassNotFoundException"
            condition = java.getCondition() if not_found else None
        if condition != "DATA_SOURCE_NOT_FOUND":
            raise
        raise SparkSetupError(
            f"the Strata decoder jar is not on this Spark session's classpath ({JVM_SOURCE} not found): "
            "start the session with pipeline.spark_session, which adds it, or add the jar that "
            "`python -m pipeline.jars --decoder DIR` builds to spark.jars (spark-submit --jars)"
        ) from None


def _read_in_python(
    spark: SparkSession, snapshot: Snapshot, bucket_url: str, include_headers: bool, fail_on_data_loss: bool
) -> DataFrame:
    schema = spark_schema(include_headers)
    tasks = spark.sparkContext.broadcast(dict(snapshot.tasks))
    paths = [object_url(bucket_url, key) for key in snapshot.object_keys]
    files = spark.read.format("binaryFile").load(paths)

    # Batches typed as Iterable: pyspark's stubs say Iterable in 4.1 and Iterator later, and a function taking
    # an Iterable fits both.
    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_key: Mapping[str, tuple[ChunkTask, ...]] = tasks.value
        for batch in batches:
            contents = batch.column("content")
            for i, path in enumerate(batch.column("path").to_pylist()):
                key = key_of(path)
                # The object's bytes as a view of the Arrow buffer: to_pylist() copied each one.
                content = memoryview(contents[i].as_buffer())
                yield decode_file(
                    content, by_key[key], include_headers, object_key=key, fail_on_data_loss=fail_on_data_loss
                )

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
