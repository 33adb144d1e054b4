"""Spark read throughput: ``pipeline.reader.read_topic`` against a plain ``binaryFile`` read of the same data.

    python -m bench.spark_read_bench [--mib 256] [--value-bytes 1024] [--partitions 8] [--file-mib 8] \\
        [--batch-records 100] [--repeat 3] [--warmup 2] [--backends s3,local] [--decoder jvm|python] \\
        [--floor] [--profile] [--breakdown] [--figures]
    python -m bench.spark_read_bench --mib 8 --repeat 1 --warmup 1                       # smoke run

The jars come from .cache/jars unless STRATA_SPARK_JARS_DIR names another directory. The target: Spark
read throughput (MiB of log bytes turned into rows) >= 50 % of the raw binaryFile throughput over the same
objects, measured in the same run.

1. Dataset (no HTTP): ``--mib`` MiB of records with ``--value-bytes`` values and 12-byte keys, written the way
   the agent's flusher writes files (``records.encode_batch`` batches of ``--batch-records`` records with
   relative base offsets, one chunk per partition per file, ``fileformat.FileBuilder``, about ``--file-mib``
   MiB per file), over ``--partitions`` partitions of one topic, committed with ``commit_flush`` to one SQLite
   metadata database. Every file is PUT, byte for byte the same, into a moto S3 bucket (moto's
   ThreadedMotoServer in its own process on 127.0.0.1, bench/moto_server.py) and into a local directory
   bucket, so one metadata snapshot serves both.
2. One Spark session, ``pipeline.session.spark_session(master="local[2]", s3_endpoint=...)``. Per backend,
   ``--warmup`` reads of each kind (not measured: JIT, s3a and Python worker start-up), then ``--repeat``
   rounds of
   (a) raw:    spark.read.format("binaryFile").load(paths).select(count(*), sum(length(content))).collect()
   (b) strata: read_topic(spark, metadata, bucket, subscribe=topic).select(count(*), sum(length(value)))
               .collect()    (the driver's metadata snapshot is inside the timing; ``--decoder`` picks the
               JVM decoder, the default, or the Python one)
   in alternating order. Both read exactly the live objects of the snapshot. Each result is checked (file
   count and bytes; record count and value bytes).
3. Figures: MiB/s of log bytes (the objects' bytes, the same numerator for both, so the ratio is the
   inverse ratio of the times), rows/s, strata/raw ratio per round and its median; CPU seconds of the JVM
   (also per thread group: executor tasks, GC, JIT, the py4j thread that plans and compiles the query), of
   the Python workers (pyspark.daemon and its forks) and of moto during each query, from /proc.
4. ``--breakdown`` and ``--profile``: bench/spark_profile.py. ``--floor`` adds a third query to every
   round: the same binaryFile DataFrame through ``mapInArrow`` with a function that only sums the content
   lengths with pyarrow (no to_pylist, no decoding, one row out per Arrow batch): what any design that
   ships whole objects from the JVM to Python workers costs before decoding a single record.

Every process binds 127.0.0.1 only and is stopped at the end. Results: a table on stdout, JSON in
bench/results/ (ignored by git); with ``--figures``, the page's figures under bench/figures/.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import targets
from bench.harness import ROOT, MiB, Moto, fake_aws, log, start_moto
from bench.results import (
    BACKEND_LABELS,
    Rows,
    add_output_args,
    markdown_table,
    page_figures,
    run_header,
    write_figures,
    write_results,
)
from bench.spark_cpu import CpuMeter
from bench.spark_profile import breakdown
from bench.spark_queries import BUCKET, generate, run_backend


def prepare_env() -> None:
    """Before boto3, Spark (s3a_settings reads the key and secret from the environment) or moto start:
    fake AWS credentials, no console progress bar (it would interleave with the log lines), the jars."""
    fake_aws(os.environ)
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell")
    if "STRATA_SPARK_JARS_DIR" not in os.environ and (ROOT / ".cache" / "jars").is_dir():
        os.environ["STRATA_SPARK_JARS_DIR"] = str(ROOT / ".cache" / "jars")


def versions() -> dict[str, str]:
    import pyarrow
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
    return {
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "java": java.splitlines()[0] if java else "?",
    }


def evaluate(report: dict[str, Any], backend: str) -> list[dict[str, Any]]:
    r = report["backends"][backend]
    rows = Rows()
    ratio = 100 * r["ratio_median"]
    value = f"{ratio:.0f} % ({r['strata_mib_s_median']} against {r['raw_mib_s_median']} MiB/s)"
    rows.add(
        "strata / raw binaryFile (median of rounds)",
        value,
        "",
        targets.SPARK_RATIO,
        measured=ratio,
        area="spark",
    )
    rows.add("strata rows/s (median)", f"{r['strata_rows_s_median']:,}")
    rows.add("strata / raw per round", ", ".join(format(x["ratio"], ".0%") for x in r["rounds"]))
    if "floor_ratio_median" in r:
        rows.add(
            "transfer floor / raw (binaryFile -> mapInArrow, no decoding)",
            f"{100 * r['floor_ratio_median']:.0f} %",
        )
    for name in ("raw", "floor", "strata"):
        if f"{name}_cpu_s_mean" in r:
            c = r[f"{name}_cpu_s_mean"]
            value = f"{c['jvm']} / {c['python_workers']} / {c['moto']} / {c['other']}"
            value += f" (wall {r[f'{name}_wall_median_s']} s)"
            rows.add(f"{name}: mean CPU s per query, JVM / Python workers / moto / other", value)
            groups = ", ".join(f"{k[5:]} {v}" for k, v in c.items() if k.startswith("jvm: "))
            rows.add(f"{name}: mean JVM CPU s per query by thread group", groups)
    return rows.rows


def print_breakdown(b: dict[str, Any]) -> None:
    print(f"\nexecutor Python work, without Spark ({b['rows']:,} rows):")
    for k, v in b["ms_per_mib"].items():
        share = b["share_of_decode_file"].get(k)
        print(
            f"  {k}: {v} ms/MiB, {b['us_per_row'][k]} us/row"
            + (f", {share} % of decode_file" if share else "")
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--mib", type=int, default=256, help="MiB of chunk data to write")
    add("--value-bytes", type=int, default=1024)
    add("--partitions", type=int, default=8)
    add("--file-mib", type=int, default=8, help="about this many MiB per file")
    add("--batch-records", type=int, default=100, help="records per RecordBatch")
    add("--repeat", type=int, default=3)
    add("--warmup", type=int, default=2, help="unmeasured reads of each kind first (JIT)")
    add("--backends", default="s3,local")
    add("--seed", type=int, default=1)
    add("--profile", action="store_true", help="py-spy the Python workers in one more read")
    add("--breakdown", action="store_true", help="time decode_file's parts without Spark")
    add(
        "--floor",
        action="store_true",
        help="also time the transfer floor: binaryFile -> mapInArrow, no decoding",
    )
    add(
        "--decoder",
        choices=("jvm", "python"),
        default="jvm",
        help="read_topic's decoder: the Java source (default) or the Python workers (mapInArrow)",
    )
    add("--master", default="local[2]")
    add(
        "--conf",
        action="append",
        default=[],
        help="extra Spark setting key=value (an experiment, not default)",
    )
    add("--tag", default="")
    add("--keep", action="store_true", help="keep the scratch directory")
    add_output_args(parser, "spark_read_bench")
    args = parser.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    if not set(args.backends) <= {"s3", "local"}:
        parser.error("--backends takes s3 and/or local")
    return args


def start_spark(args: argparse.Namespace, moto: Moto | None, report: dict[str, Any]) -> Any:
    from pipeline.session import spark_session

    started = time.perf_counter()
    spark = spark_session(
        master=args.master,
        app_name="strata-spark-read-bench",
        s3_endpoint=moto.endpoint if moto else None,
        s3_region="us-east-1",
    )
    for setting in args.conf:
        k, _, v = setting.partition("=")
        spark.conf.set(k, v)
    spark.sparkContext.setLogLevel("ERROR")
    report["spark_start_s"] = round(time.perf_counter() - started, 1)
    keys = (
        "spark.sql.files.maxPartitionBytes",
        "spark.sql.files.openCostInBytes",
        "spark.sql.execution.arrow.maxRecordsPerBatch",
        "spark.default.parallelism",
    )
    report["spark_conf"] = {k: spark.conf.get(k) for k in keys if spark.conf.get(k, None) is not None}
    return spark


def run(args: argparse.Namespace, report: dict[str, Any], workdir: Path) -> None:
    moto: Moto | None = None
    spark = None
    try:
        if "s3" in args.backends:
            moto = start_moto([BUCKET], workdir)
            log(f"moto S3 at {moto.endpoint} (pid {moto.pid})")
        log(f"writing {args.mib} MiB of {args.value_bytes}-byte records")
        report["dataset"] = dataset = generate(args, workdir, moto.endpoint if moto else None)
        mib = dataset["file_bytes"] / MiB
        log(f"  {dataset['files']} files, {mib:.1f} MiB, {dataset['records']:,} records")
        if args.breakdown:
            log("breakdown of the executor's Python work (no Spark)")
            report["breakdown"] = breakdown(workdir, dataset)
        spark = start_spark(args, moto, report)
        meter = CpuMeter(moto.pid if moto else None)
        metadata_url = f"sqlite:///{workdir / 'metadata.db'}"
        for backend in args.backends:
            bucket_url = f"s3://{BUCKET}" if backend == "s3" else f"file://{workdir / 'bucket'}"
            log(f"[{backend}] {bucket_url}")
            report["backends"][backend] = run_backend(
                args, spark, backend, bucket_url, metadata_url, dataset, meter, report["run_id"]
            )
    finally:
        if spark is not None:
            spark.stop()
        if moto is not None:
            moto.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    prepare_env()
    report = run_header("spark_read_bench", argv, ("pipeline", "storage"), ROOT, **versions())
    report.update({"params": vars(args), "backends": {}})
    workdir = Path(tempfile.mkdtemp(prefix="strata-spark-bench-"))
    try:
        run(args, report, workdir)
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        report["loadavg_at_end"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        write_results(report, args.out, f"-{args.tag}" if args.tag else "")
    ds = report["dataset"]
    print(f"\ndataset: {ds['records']:,} records, {ds['file_bytes'] / MiB:.1f} MiB in {ds['files']} files\n")
    figures = []
    for backend in report["backends"]:
        rows = evaluate(report, backend)
        report["backends"][backend]["targets"] = rows
        print(f"### {backend}\n\n{markdown_table(rows)}\n")
        figures += page_figures(rows, BACKEND_LABELS[backend])
    if "breakdown" in report:
        print_breakdown(report["breakdown"])
    log(f"results: {write_results(report, args.out, f'-{args.tag}' if args.tag else '')}")
    if args.figures:
        log(f"figures: {write_figures(report, figures, args.note)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
