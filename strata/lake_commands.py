"""``strata lake run``: one lake round in this process (``pipeline/lake/round.py``), against the bucket and
metadata that ``strata serve`` would use: every lake-enabled topic that is due (or every one, ``--force``)
gets its Iceberg commit, and the tables of deleted topics are dropped. Safe while servers and workers run:
tables are leased and each commit is a compare-and-set. One line per table.

``strata lake list``, ``show`` and ``commit-now`` are HTTP clients of a running server instead
(strata/lake_status_commands.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import time
from typing import Any

from strata.lake_backfill import add_backfill_command
from strata.lake_status_commands import add_lake_status_commands
from strata.settings import SETTINGS, load_settings

# The server settings ``strata lake run`` takes too: where the data is, and how the lake writes.
_LAKE_SETTINGS = frozenset(
    {
        "data_dir",
        "bucket",
        "s3_endpoint",
        "s3_region",
        "metadata",
        "job_lease_ms",
        "lake_max_bytes_per_commit",
        "lake_maintenance_interval_ms",
        "lake_orphan_grace_ms",
        "worker_interval_ms",
    }
)


def cmd_lake_run(args: argparse.Namespace) -> int:
    from pipeline.lake.maintenance import MaintenanceConfig
    from pipeline.lake.round import LakeRound
    from pipeline.lake.runs import LakeWriterConfig
    from storage.clock import SystemClock
    from storage.lake_catalog import open_catalog
    from storage.metadata import open_metadata_store
    from storage.objectstore import open_object_store

    settings = load_settings({s.name: getattr(args, s.name, None) for s in SETTINGS})
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    metadata = open_metadata_store(settings.metadata_url)
    store = open_object_store(
        settings.bucket_url, endpoint_url=settings.s3_endpoint, region=settings.s3_region
    )
    lake = LakeRound(
        metadata,
        store,
        lambda: open_catalog(
            settings.metadata_url,
            settings.bucket_url,
            s3_endpoint=settings.s3_endpoint,
            s3_region=settings.s3_region,
        ),
        SystemClock(),
        owner=f"{socket.gethostname()}:{os.getpid()}:lake-run",
        config=LakeWriterConfig(settings.lake_max_bytes_per_commit, settings.job_lease_ms),
        maintenance=MaintenanceConfig(settings.lake_maintenance_interval_ms, settings.lake_orphan_grace_ms),
    )
    try:
        while True:
            result = lake.run_once(args.topic, args.force)
            if not args.quiet:
                for run in result.runs:
                    offsets = ",".join(f"{p}:{o}" for p, o in sorted(run.offsets.items()))
                    error = f" error: {run.error}" if run.error else ""
                    print(f"{run.topic}: {run.outcome}, {run.rows} rows, offsets {offsets or '-'}{error}")
                    if run.state is not None:
                        print(f"{run.topic}: {run.state.describe()}")
                for topic, outcome in result.removed:
                    print(f"{topic}: {outcome}")
            if not args.loop:
                return 1 if any(run.error for run in result.runs) else 0
            time.sleep(settings.worker_interval_ms / 1000)
    finally:
        lake.close()
        store.close()
        metadata.close()


def add_lake_commands(sub: Any) -> None:
    lake = sub.add_parser("lake", help="topics as Iceberg tables (docs/lake.md)")
    commands = lake.add_subparsers(dest="lake_command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="commit lake-enabled topics to their Iceberg tables now",
        description=__doc__,
    )
    run.add_argument("--topic", default=None, help="only this topic")
    run.add_argument("--force", action="store_true", help="commit whatever the commit interval")
    run.add_argument("--loop", action="store_true", help="run rounds until interrupted")
    run.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    for setting in SETTINGS:
        if setting.name in _LAKE_SETTINGS:
            run.add_argument(
                setting.flag,
                dest=setting.name,
                default=None,
                type=int if setting.type is int else str,
                help=f"{setting.help} [env {setting.env}]",
            )
    run.set_defaults(func=cmd_lake_run)
    add_lake_status_commands(commands)  # list, show, commit-now: over HTTP, against a running server
    add_backfill_command(commands)
