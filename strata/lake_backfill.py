"""``strata lake backfill --topic T``: the records already in a topic written to its Iceberg table by Spark
and committed with ``add_files`` (``pipeline/lake/backfill_run.py``), from the table's committed offsets (or
the log start) to the last stable offset, under the lake writer's lease; the continuous writer goes on from
there. Safe while servers and workers run: a writer that commits first makes the backfill's commit fail,
and its files are then left as orphans, never appended twice.

Kept apart from ``strata/lake_commands.py`` (which registers it) because it is the one lake command that
starts Spark.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from typing import Any

from strata.settings import SETTINGS, load_settings

# The server settings ``strata lake backfill`` takes: where the data is, and the lake writer's lease.
_BACKFILL_SETTINGS = frozenset({"data_dir", "bucket", "s3_endpoint", "s3_region", "metadata", "job_lease_ms"})


def cmd_lake_backfill(args: argparse.Namespace) -> int:
    from pipeline.lake.backfill_run import run_backfill
    from pipeline.lake.runs import COMMITTED, UP_TO_DATE, LakeWriterConfig
    from pipeline.session import spark_session
    from storage.clock import SystemClock
    from storage.errors import StrataError
    from storage.lake_catalog import open_catalog
    from storage.metadata import open_metadata_store
    from storage.objectstore import open_object_store

    settings = load_settings({s.name: getattr(args, s.name, None) for s in SETTINGS})
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    metadata = open_metadata_store(settings.metadata_url)
    store = open_object_store(
        settings.bucket_url, endpoint_url=settings.s3_endpoint, region=settings.s3_region
    )
    catalog = open_catalog(
        settings.metadata_url,
        settings.bucket_url,
        s3_endpoint=settings.s3_endpoint,
        s3_region=settings.s3_region,
    )
    try:
        spark = spark_session(
            master=args.spark_master or None,
            app_name="strata-lake-backfill",
            s3_endpoint=settings.s3_endpoint,
            s3_region=settings.s3_region,
        )
        run = run_backfill(
            spark,
            metadata,
            store,
            catalog,
            SystemClock(),
            f"{socket.gethostname()}:{os.getpid()}:lake-backfill",
            LakeWriterConfig(lease_ms=settings.job_lease_ms),
            settings.metadata_url,
            settings.bucket_url,
            args.topic,
        )
    except StrataError as exc:
        print(f"{args.topic}: {exc.message}")
        return 1
    finally:
        engine = getattr(catalog, "engine", None)
        if engine is not None:
            engine.dispose()
        store.close()
        metadata.close()
    ranges = ",".join(f"{p}:{a}-{b}" for p, (a, b) in sorted(run.ranges.items()))
    offsets = ",".join(f"{p}:{o}" for p, o in sorted(run.offsets.items()))
    error = f" error: {run.error}" if run.error else ""
    print(f"{run.topic}: {run.outcome}, {run.files} files, ranges {ranges or '-'},", end=" ")
    print(f"offsets {offsets or '-'}{error}")
    return 0 if run.outcome in (COMMITTED, UP_TO_DATE) else 1


def add_backfill_command(commands: Any) -> None:
    backfill = commands.add_parser(
        "backfill",
        help="write a topic's records to its Iceberg table with Spark, then commit them",
        description=__doc__,
    )
    backfill.add_argument("--topic", required=True, help="the topic whose table to fill")
    backfill.add_argument(
        "--spark-master",
        default=os.environ.get("STRATA_SPARK_MASTER", "local[2]"),
        help="Spark master (env STRATA_SPARK_MASTER; default local[2]; empty: as spark-submit or"
        " spark-defaults.conf set it)",
    )
    for setting in SETTINGS:
        if setting.name in _BACKFILL_SETTINGS:
            backfill.add_argument(
                setting.flag,
                dest=setting.name,
                default=None,
                type=int if setting.type is int else str,
                help=f"{setting.help} [env {setting.env}]",
            )
    backfill.set_defaults(func=cmd_lake_backfill)
