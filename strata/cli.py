"""The ``strata`` command line: run the server, manage topics, produce and consume.

``strata serve``, ``compact`` and ``demo`` run in this process (this module), and so do ``scan``,
``damaged`` and ``quarantine`` (strata/damage_commands.py) and ``lake`` (strata/lake_commands.py; its
``backfill``, which starts Spark, in strata/lake_backfill.py).
Every other command is an HTTP client of a running server (strata/client_commands.py, and
strata/schema_commands.py for ``schemas``, strata/lake_status_commands.py for ``lake list``, ``show`` and
``commit-now``; --url, or STRATA_URL; default http://127.0.0.1:8080).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storage.errors import SettingsError
from strata.client_commands import ClientError, add_client_commands, stderr_console
from strata.damage_commands import add_damage_commands
from strata.lake_commands import add_lake_commands
from strata.schema_commands import add_schema_commands
from strata.settings import SETTINGS, Settings, load_settings, parse_bool

if TYPE_CHECKING:  # the client commands should not pay for importing the planner, nor the server for rich
    from rich.console import Console
    from rich.progress import Progress

    from planner.round import RoundResult
    from planner.stats import JobStats
    from storage.metadata.rows import Job

# The server settings that `strata compact` takes too: where the data is, and how compaction runs.
_COMPACT_SETTINGS = frozenset(
    {
        "data_dir",
        "bucket",
        "s3_endpoint",
        "s3_region",
        "metadata",
        "gc_grace_ms",
        "orphan_grace_ms",
        "worker_interval_ms",
        "compaction_map_bytes",
        "compaction_file_bytes",
        "compaction_max_read_bytes_per_second",
        "job_lease_ms",
        "l0_merge_files",
        "l0_merge_age_ms",
    }
)


# --- serve ----------------------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    settings = load_settings({s.name: getattr(args, s.name) for s in SETTINGS})
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    from strata.server import serve

    return serve(settings)


# --- compact ------------------------------------------------------------------------------------------
class _ProgressBar:
    """Draws a compaction round (``planner.round.RoundProgress``) as a bar of jobs."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("planning", total=None)

    def planned(self, jobs: list[Job]) -> None:
        self.progress.update(self.task, description=f"{len(jobs)} planned job(s)", total=len(jobs))

    def job_done(self, job: Job, stats: JobStats) -> None:
        self.progress.advance(self.task)


def cmd_compact(args: argparse.Namespace) -> int:
    settings = load_settings({s.name: getattr(args, s.name, None) for s in SETTINGS})
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from strata.runtime import build_runtime

    if args.spark:
        return _compact_on_spark(args, settings)
    from rich.console import Console

    runtime = build_runtime(settings)
    compaction_round = runtime.compaction_round(retention_now=True)
    console = Console()
    try:
        while True:
            with _progress(args) as progress:
                result = compaction_round.run_once(args.topic, args.force, progress=_ProgressBar(progress))
            if not args.quiet:
                _print_round(console, result)
            if not args.loop:
                return 0
            time.sleep(settings.worker_interval_ms / 1000)
    finally:
        runtime.store.close()
        runtime.metadata.close()


def _progress(args: argparse.Namespace) -> Progress:
    from rich.progress import BarColumn, Progress, TextColumn

    return Progress(
        TextColumn("[bold]compacting[/bold] {task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} jobs"),
        console=stderr_console(),
        disable=args.quiet,
    )


def _compact_on_spark(args: argparse.Namespace, settings: Settings) -> int:
    from rich.console import Console

    from pipeline.compaction import compact_on_spark
    from pipeline.session import spark_session
    from strata.component_configs import spark_compaction_config

    spark = spark_session(
        master=args.spark_master, app_name="strata-compact", s3_endpoint=settings.s3_endpoint
    )
    config = spark_compaction_config(settings)
    console = Console()
    while True:
        with _progress(args) as progress:
            result = compact_on_spark(
                spark, config, topic=args.topic, force=args.force, progress=_ProgressBar(progress)
            )
        if not args.quiet:
            _print_round(console, result)
            console.print(f"{len(result.jobs)} job(s) ran on Spark ({spark.sparkContext.master})")
        if not args.loop:
            return 0
        time.sleep(settings.worker_interval_ms / 1000)


def _print_round(console: Console, result: RoundResult) -> None:
    from rich.table import Table

    table = Table(
        "job", "kind", "outcome", "MiB in", "MiB out", "records in", "records out", "removed", box=None
    )
    for job, stats in result.jobs:
        table.add_row(
            str(job.job_id),
            job.kind,
            stats.outcome + (f" ({stats.reason})" if stats.reason else ""),
            f"{stats.bytes_read / 2**20:.2f}",
            f"{stats.bytes_written / 2**20:.2f}",
            str(stats.records_in),
            str(stats.records_out),
            f"{stats.dedup_ratio:.1%}",
        )
    if result.jobs:
        console.print(table)
    console.print(
        f"{len(result.jobs)} job(s); retention dropped {result.retention.chunks_dropped} chunk(s); "
        f"GC deleted {result.obsolete_deleted} obsolete file(s) and {result.orphans_deleted} orphan(s)"
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from strata.demo import run_demo

    logging.basicConfig(level=logging.WARNING)
    return run_demo(Path(args.data_dir) if args.data_dir else None, args.keys, args.updates)


def _add_serve(sub: Any) -> None:
    """`strata serve`: one flag per setting in strata/settings.py."""
    serve = sub.add_parser(
        "serve",
        help="run a Strata server",
        description="Run a Strata server. With no options: the embedded default, a local directory as the "
        "bucket and SQLite metadata under ./data, on http://127.0.0.1:8080. Every option can also be "
        "set by the STRATA_* environment variable shown.",
    )
    for setting in SETTINGS:
        kwargs: dict[str, Any] = {
            "dest": setting.name,
            "default": None,
            "help": f"{setting.help} [env {setting.env}; default {setting.default}]",
        }
        if setting.choices:
            kwargs["choices"] = setting.choices
        if setting.type is int:
            kwargs["type"] = int
        if setting.type is parse_bool:
            kwargs["action"] = argparse.BooleanOptionalAction
            kwargs.pop("default")
            kwargs["default"] = None
        serve.add_argument(setting.flag, **kwargs)
    serve.set_defaults(func=cmd_serve)


def _add_compact(sub: Any) -> None:
    """`strata compact`: one background round in this process."""
    compact = sub.add_parser(
        "compact",
        help="run retention, compaction and GC now",
        description="Run one round of background work in this process, against the bucket and metadata "
        "that `strata serve` would use: retention, planning, every job that can be leased (with a progress "
        "bar), and GC. --loop repeats it every --worker-interval-ms. Safe while servers and other workers "
        "run: jobs are leased and commits are compare-and-set.",
    )
    compact.add_argument("--topic", default=None, help="only plan cleaning of this topic's partitions")
    compact.add_argument(
        "--force", action="store_true", help="clean compacted partitions whatever their dirty ratio"
    )
    compact.add_argument("--loop", action="store_true", help="run rounds until interrupted")
    compact.add_argument(
        "--spark", action="store_true", help="run the jobs as Spark tasks (one job per task) instead"
    )
    compact.add_argument(
        "--spark-master",
        default=os.environ.get("STRATA_SPARK_MASTER", "local[2]"),
        help="Spark master for --spark (env STRATA_SPARK_MASTER; default local[2]; empty: as spark-submit "
        "or spark-defaults.conf set it)",
    )
    compact.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    for setting in SETTINGS:
        if setting.name in _COMPACT_SETTINGS:
            compact.add_argument(
                setting.flag,
                dest=setting.name,
                default=None,
                type=int if setting.type is int else str,
                help=f"{setting.help} [env {setting.env}]",
            )
    compact.set_defaults(func=cmd_compact)


def _add_demo(sub: Any) -> None:
    """`strata demo`."""
    demo = sub.add_parser(
        "demo",
        help="produce keyed updates, compact them, print the latest value per key via Spark",
        description="A self-contained tour: keyed updates (and a few deletes) go into a compacted topic on "
        "the embedded default, a compaction round keeps the latest value per key, and Spark reads the "
        "topic back as a latest-per-key table. Uses a temporary directory unless --data-dir is given.",
    )
    demo.add_argument("--data-dir", default=None, help="keep the demo's data here")
    demo.add_argument("--keys", type=int, default=20, help="number of keys")
    demo.add_argument("--updates", type=int, default=5, help="updates per key")
    demo.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strata",
        description="Strata: a Kafka-style log service whose only durable data store is object storage.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve(sub)
    _add_compact(sub)
    _add_demo(sub)
    add_damage_commands(sub)
    add_lake_commands(sub)
    add_client_commands(sub)
    add_schema_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ClientError, SettingsError, OSError) as exc:
        from rich.text import Text

        # One unwrapped line, not markup: a path in the message stays whole, and its brackets print as is.
        stderr_console().print(Text(str(exc), style="red"), soft_wrap=True)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Settings", "build_parser", "main"]
