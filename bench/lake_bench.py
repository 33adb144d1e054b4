"""Topics as Iceberg tables: what the lake writer keeps up with, what it costs per core, per format, per
state-table commit and in objects written, and whether its commits delay the agent's flushes.

    python -m bench.lake_bench [--phases raw,typed,upsert,flush] [--figures]
    python -m bench.lake_bench --quick                                    # smoke run: every phase, small

Every phase runs the writer through its entry points: the lake round (``pipeline/lake/round.py``) as
``strata lake run --loop`` in a process of its own, as ``strata serve --role all`` runs it in its
background loop, or in this process as ``strata lake run --force`` runs it. Every agent is on the embedded
default: a local directory and SQLite, which holds the lake's catalog too. Every topic commits every
``--interval-ms`` (``strata.iceberg.commit.interval.ms``; 10 s, the least it takes).

1. raw (``bench/lake_raw.py``): ``--raw-rate-mib`` MiB/s produced over Kafka to a raw table, at each of
   ``--raw-caps-mib`` as ``--lake-max-bytes-per-commit``, with ``--raw-buffer-mib`` as
   ``--lake-write-buffer-bytes``: the MiB/s committed against the MiB/s produced, the MiB committed per
   CPU second of the writer process, the lag (offsets and seconds) as the table's status computes it, the
   writer's peak RSS against the bound its write buffer sets.
2. typed (``bench/lake_typed.py``): a commit of ``--typed-records`` orders serialized by confluent-kafka's
   Avro, JSON Schema and Protobuf serializers against the agent's registry, and of the same Avro values
   to a raw table: records/s and records per CPU second; the objects one commit writes, by kind.
3. upsert (``bench/lake_upsert.py``): a compacted topic's state table of ``--upsert-keys`` keys at each of
   ``--upsert-buckets`` bucket counts, commits of each of ``--upsert-fractions`` of the keys: the Parquet
   bytes written per commit against the table's size, and the objects written.
4. flush (``bench/lake_flush.py``): the producers' ack latency and the agent's flush time at
   ``--flush-rate-mib`` MiB/s with the lake committing and without it, back to back, with the writer in
   the agent's process and in its own.

Objects written are counted as the files a commit creates under the local warehouse (``lake/`` in the
bucket directory). On S3 each costs three requests, since pyarrow uploads every file as a multipart
upload (create, part, complete: what the lake's request meter counts, pipeline/lake/counting_io.py).
Every process binds 127.0.0.1 and is stopped at the end. Results: a table on stdout,
JSON under bench/results/; with ``--figures``, the page's figures (the lake's area) under bench/figures/.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.lake_rows import flush_rows, raw_rows, typed_rows, upsert_rows
from bench.results import Rows, add_output_args, finish_run, markdown_table, page_figures, run_header
from bench.targets import LAKE_RATE_MIB_S
from pipeline.lake.runs import LakeWriterConfig
from storage.lake_config import MIN_COMMIT_INTERVAL_MS

PHASES = ("raw", "typed", "upsert", "flush")
# --quick: the smallest settings that run every phase; its figures mean nothing. The commit interval's
# minimum (10 s) bounds how short the raw and flush windows can be.
QUICK = {
    "raw_rate_mib": 5.0,
    "raw_warmup": 2.0,
    "raw_duration": 24.0,
    "raw_caps_mib": [256],
    "typed_records": 2000,
    "upsert_keys": 2000,
    "upsert_buckets": [1, 4],
    "upsert_fractions": [0.005, 0.05],
    "upsert_commits": 1,
    "flush_rate_mib": 2.0,
    "flush_warmup": 1.0,
    "flush_duration": 12.0,
    "partitions": 4,
    "producers": 1,
}


def _list(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    return lambda text: [kind(x) for x in text.split(",") if x]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--phases", type=_list(str), default=list(PHASES), help="comma-separated: " + ",".join(PHASES))
    add("--quick", action="store_true", help="a smoke run of every phase: small sizes, figures mean nothing")
    add("--interval-ms", type=int, default=MIN_COMMIT_INTERVAL_MS, help="strata.iceberg.commit.interval.ms")
    add("--partitions", type=int, default=12, help="partitions of the raw and flush topics")
    add("--producers", type=int, default=2, help="librdkafka producer processes (raw, flush)")
    add("--raw-rate-mib", type=float, default=LAKE_RATE_MIB_S, help="MiB/s offered to the raw table")
    add("--raw-warmup", type=float, default=5.0)
    add("--raw-duration", type=float, default=60.0, help="measured window, s")
    add("--raw-caps-mib", type=_list(int), default=[256, 1024], help="--lake-max-bytes-per-commit, MiB")
    add(
        "--raw-buffer-mib",
        type=int,
        default=LakeWriterConfig().write_buffer_bytes // 2**20,
        help="--lake-write-buffer-bytes, MiB",
    )
    add("--typed-records", type=int, default=200_000)
    add("--typed-partitions", type=int, default=4)
    add("--upsert-keys", type=int, default=1_000_000)
    add("--upsert-value-bytes", type=int, default=100)
    add("--upsert-partitions", type=int, default=4)
    add("--upsert-buckets", type=_list(int), default=[1, 4, 16, 64])
    add("--upsert-fractions", type=_list(float), default=[0.00001, 0.001], help="of the keys, per commit")
    add("--upsert-commits", type=int, default=3, help="commits per fraction")
    add("--flush-rate-mib", type=float, default=20.0)
    add("--flush-warmup", type=float, default=3.0)
    add("--flush-duration", type=float, default=20.0, help="each window, s")
    add("--flush-repeat", type=int, default=1, help="(off, on) window pairs per shape")
    add(
        "--flush-shapes",
        type=_list(str),
        default=["all", "thread", "split"],
        help="all (role all: worker process), thread (role all, worker thread), split (strata lake run)",
    )
    add_output_args(parser, "lake_bench")
    if "--quick" in argv:
        parser.set_defaults(**QUICK)
    args = parser.parse_args(argv)
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    # What bench.kafka_load's producers read from the command line of bench.kafka_bench.
    args.value_bytes, args.value_kind = 1024, "text"
    args.linger_ms, args.batch_bytes, args.queue_mib = 5.0, 1_000_000, 64
    return args


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = Rows()
    adders = {"raw": raw_rows, "typed": typed_rows, "upsert": upsert_rows, "flush": flush_rows}
    for phase, phase_results in results.items():
        adders[phase](rows, phase_results)
    return rows.rows


def run_phases(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from bench.lake_flush import flush_phase
    from bench.lake_raw import raw_phase
    from bench.lake_typed import typed_phase
    from bench.lake_upsert import upsert_phase

    runners = {"raw": raw_phase, "typed": typed_phase, "upsert": upsert_phase, "flush": flush_phase}
    return {phase: runners[phase](args, workdir) for phase in PHASES if phase in args.phases}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    report = run_header("lake_bench", argv, ("agents", "broker", "pipeline", "registry", "storage", "strata"))
    report["params"] = vars(args)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="strata-lake-bench-") as tmp:
        results = run_phases(args, Path(tmp))
    report.update(results=results, targets=evaluate(results))
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    finish_run(report, args, lambda r: print(markdown_table(r["targets"])), page_figures(report["targets"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
