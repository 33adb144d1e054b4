"""The Spark read benchmark's dataset and queries: Strata's ``read_topic`` against Spark's own
``binaryFile`` read of the same objects, in alternating order, each result checked.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from bench.harness import MiB, log
from bench.spark_cpu import CpuMeter
from bench.spark_profile import TOPIC, profile_strata
from storage import fileformat, records
from storage.clock import SystemClock
from storage.keys import new_object_key
from storage.metadata import LEVEL_INGEST, NewChunk, NewFile, open_metadata_store
from storage.objectstore import open_object_store

BUCKET = "strata-spark-bench"


def generate(args: argparse.Namespace, workdir: Path, endpoint: str | None) -> dict[str, Any]:
    """Write the files into the local bucket (and the S3 bucket) and commit them to one SQLite database."""
    clock = SystemClock()
    rng = random.Random(args.seed)
    meta = open_metadata_store(f"sqlite:///{workdir / 'metadata.db'}")
    stores = [open_object_store(f"file://{workdir / 'bucket'}", retry=None)]
    if endpoint is not None:
        stores.append(
            open_object_store(f"s3://{BUCKET}", endpoint_url=endpoint, region="us-east-1", retry=None)
        )
    meta.create_topic(TOPIC, args.partitions, {}, clock.now_ms())
    pool = bytes(rng.randrange(32, 127) for _ in range(1 << 16))
    vb = args.value_bytes
    record_bytes = vb + 12 + 12  # value, key, per-record framing (approximate, to size the chunks)
    per_chunk = max(args.batch_records, args.file_mib * MiB // args.partitions // record_bytes)
    per_chunk -= per_chunk % args.batch_records
    target = args.mib * MiB
    ts0 = clock.now_ms() - 3_600_000
    n = files = file_bytes = chunk_bytes = value_bytes = 0
    started = time.perf_counter()
    while chunk_bytes < target:
        builder = fileformat.FileBuilder()
        chunks: list[NewChunk] = []
        for p in range(args.partitions):
            buf = bytearray()
            count = 0
            first_ts = ts0 + n // 1000
            while count < per_chunk:
                recs = []
                for j in range(args.batch_records):
                    at = (n * 131) % (len(pool) - vb)
                    recs.append(
                        records.Record(
                            count + j, ts0 + n // 1000, b"key-%08d" % (n % 100_000), pool[at : at + vb]
                        )
                    )
                    n += 1
                buf += records.encode_batch(recs, count)
                count += len(recs)
                value_bytes += vb * len(recs)
            last_ts = ts0 + (n - 1) // 1000
            m = builder.add_chunk(
                TOPIC,
                p,
                buf,
                record_count=count,
                last_offset_delta=count - 1,
                min_timestamp=first_ts,
                max_timestamp=last_ts,
            )
            chunks.append(NewChunk(TOPIC, p, count, m.position, m.length, first_ts, last_ts, m.crc))
            chunk_bytes += len(buf)
        data = builder.finish()
        key = new_object_key(LEVEL_INGEST, clock, rng)
        for store in stores:
            store.put(key, data)
        meta.commit_flush(NewFile(key, len(data), LEVEL_INGEST, clock.now_ms()), chunks, [], clock.now_ms())
        files += 1
        file_bytes += len(data)
    for store in stores:
        store.close()
    meta.close()
    return {
        "files": files,
        "file_bytes": file_bytes,
        "chunk_bytes": chunk_bytes,
        "records": n,
        "value_bytes": value_bytes,
        "records_per_chunk": per_chunk,
        "batch_records": args.batch_records,
        "partitions": args.partitions,
        "generate_s": round(time.perf_counter() - started, 1),
    }


def make_queries(
    spark: Any, metadata_url: str, bucket_url: str, floor: bool, decoder: Literal["jvm", "python"] = "jvm"
) -> dict[str, Callable[[], tuple[int, int]]]:
    from pyspark.sql import functions as F

    from pipeline.options import parse_options
    from pipeline.reader import object_url, read_topic
    from pipeline.snapshot import take_snapshot

    meta = open_metadata_store(metadata_url)
    try:
        keys = take_snapshot(meta, parse_options({"subscribe": TOPIC})).object_keys
    finally:
        meta.close()
    paths = [object_url(bucket_url, key) for key in keys]

    def raw() -> tuple[int, int]:
        df = spark.read.format("binaryFile").load(paths)
        row = df.select(F.count("*"), F.sum(F.length("content"))).collect()[0]
        return int(row[0]), int(row[1])

    def strata() -> tuple[int, int]:
        df = read_topic(spark, metadata_url, bucket_url, decoder=decoder, subscribe=TOPIC)
        row = df.select(F.count("*"), F.sum(F.length("value"))).collect()[0]
        return int(row[0]), int(row[1])

    def content_lengths(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        for batch in batches:
            total = pc.sum(pc.binary_length(batch.column("content"))).as_py() or 0
            yield pa.RecordBatch.from_pydict({"n": pa.array([total], pa.int64())})

    def transfer_floor() -> tuple[int, int]:
        df = spark.read.format("binaryFile").load(paths).select("path", "content")
        row = df.mapInArrow(content_lengths, "n long").select(F.count("*"), F.sum("n")).collect()[0]
        return -1, int(row[1])  # one row per Arrow batch: only the bytes are checked

    queries = {"raw": raw, "strata": strata}
    if floor:
        queries["floor"] = transfer_floor
    return queries


def scan_tasks(spark: Any, metadata_url: str, bucket_url: str) -> int:
    """How many tasks (input partitions) Spark makes of the binaryFile scan of the snapshot's objects."""
    from pipeline.options import parse_options
    from pipeline.reader import object_url
    from pipeline.snapshot import take_snapshot

    meta = open_metadata_store(metadata_url)
    try:
        keys = take_snapshot(meta, parse_options({"subscribe": TOPIC})).object_keys
    finally:
        meta.close()
    paths = [object_url(bucket_url, key) for key in keys]
    return int(spark.read.format("binaryFile").load(paths).rdd.getNumPartitions())


def run_backend(
    args: argparse.Namespace,
    spark: Any,
    backend: str,
    bucket_url: str,
    metadata_url: str,
    dataset: dict[str, Any],
    meter: CpuMeter,
    stamp: str,
) -> dict[str, Any]:
    queries = make_queries(spark, metadata_url, bucket_url, args.floor, args.decoder)
    expected = {
        "raw": (dataset["files"], dataset["file_bytes"]),
        "strata": (dataset["records"], dataset["value_bytes"]),
        "floor": (-1, dataset["file_bytes"]),
    }
    out: dict[str, Any] = {"bucket_url": bucket_url, "warmup": {}, "rounds": []}
    out["scan_tasks"] = scan_tasks(spark, metadata_url, bucket_url)
    for i in range(args.warmup):
        for name, query in queries.items():
            entry: dict[str, Any] = {}
            with meter.measure(entry):
                got = query()
            if got != expected[name]:
                raise RuntimeError(f"{backend} {name}: got {got}, expected {expected[name]}")
            out["warmup"][f"{name}-{i}"] = entry
            log(f"  [{backend}] warm-up {name}: {entry['wall_s']} s")
    mib = dataset["file_bytes"] / MiB
    for rnd in range(args.repeat):
        order = [name for name in queries if name != "floor"]
        order = order if rnd % 2 == 0 else order[::-1]
        if "floor" in queries:
            order.insert(1, "floor")
        result: dict[str, Any] = {"round": rnd, "order": order}
        for name in order:
            entry = {}
            with meter.measure(entry):
                got = queries[name]()
            if got != expected[name]:
                raise RuntimeError(f"{backend} {name}: got {got}, expected {expected[name]}")
            entry["mib_s"] = round(mib / entry["wall_s"], 1)
            entry["rows_s"] = round(got[0] / entry["wall_s"])
            result[name] = entry
        result["ratio"] = round(result["strata"]["mib_s"] / result["raw"]["mib_s"], 3)
        if "floor" in result:
            result["floor_ratio"] = round(result["floor"]["mib_s"] / result["raw"]["mib_s"], 3)
        out["rounds"].append(result)
        log(
            f"  [{backend}] round {rnd}: raw {result['raw']['mib_s']} MiB/s ({result['raw']['wall_s']} s), "
            f"strata {result['strata']['mib_s']} MiB/s ({result['strata']['wall_s']} s, "
            f"{result['strata']['rows_s']:,} rows/s): {result['ratio']:.0%}; "
            f"cpu raw {result['raw']['cpu_s']} strata {result['strata']['cpu_s']}"
        )
    ratios = sorted(r["ratio"] for r in out["rounds"])
    out["ratio_median"] = ratios[len(ratios) // 2]
    for name in queries:
        walls = sorted(r[name]["wall_s"] for r in out["rounds"])
        med = walls[len(walls) // 2]
        out[f"{name}_wall_median_s"] = med
        out[f"{name}_mib_s_median"] = round(mib / med, 1)
        out[f"{name}_mib_s_range"] = [round(mib / walls[-1], 1), round(mib / walls[0], 1)]
        cpu = [r[name]["cpu_s"] for r in out["rounds"]]
        out[f"{name}_cpu_s_mean"] = {k: round(sum(c[k] for c in cpu) / len(cpu), 2) for k in cpu[0]}
    out["strata_rows_s_median"] = round(dataset["records"] / out["strata_wall_median_s"])
    if "floor" in queries:
        floors = sorted(r["floor_ratio"] for r in out["rounds"])
        out["floor_ratio_median"] = floors[len(floors) // 2]
    if args.profile:
        out["profile"] = profile_strata(spark, queries["strata"], backend, stamp)
    return out
