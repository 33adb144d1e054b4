"""Compaction on Spark executors: the planner's jobs run as Spark tasks, one job per task.

The driver runs retention and planning exactly as a worker round does, then starts one task per pending
job. Each task is an ordinary worker (``planner.worker.Worker``): it leases one job from the metadata
store, reads each input file with its two streaming GETs, uploads the outputs and commits through the
metadata store with the same compare-and-set as the local worker. So Spark adds parallelism, not a new
code path: a task that dies leaves a lease that expires, and any worker (Spark or not) re-runs the job.
The driver finishes with GC.

spark-submit entry point: ``spark-submit pipeline/compaction.py [strata compact options]``.
"""

from __future__ import annotations

import os
import random
import socket
import sys
from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING

from api.runtime import compactor_config
from api.settings import Settings
from planner.service import Compactor
from storage.clock import SystemClock
from storage.metadata import open_metadata_store
from storage.metadata.base import JOB_PENDING
from storage.objectstore import open_object_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _compactor(settings: Settings, owner: str) -> Compactor:
    store = open_object_store(
        settings.bucket_url, endpoint_url=settings.s3_endpoint, region=settings.s3_region
    )
    metadata = open_metadata_store(settings.metadata_url)
    return Compactor(store, metadata, SystemClock(), random.SystemRandom(), owner, compactor_config(settings))


def run_one_job(settings: Settings, task: int) -> Iterator[dict[str, object]]:
    """One Spark task: lease one job, run it, report its statistics (none if another task took it)."""
    owner = f"spark:{socket.gethostname()}:{os.getpid()}:{task}"
    compactor = _compactor(settings, owner)
    try:
        for job, stats in compactor.run_jobs(limit=1):
            yield {"job_id": job.job_id, "kind": job.kind, "owner": owner, **asdict(stats)}
    finally:
        compactor.store.close()
        compactor.metadata.close()


def compact_on_spark(
    spark: SparkSession, settings: Settings, *, topic: str | None = None, force: bool = False
) -> list[dict[str, object]]:
    """One round with the jobs on Spark executors; returns one statistics dict per job run."""
    driver = _compactor(settings, f"spark-driver:{socket.gethostname()}:{os.getpid()}")
    try:
        driver.retention.run_once()
        driver.planner.plan(topic, force)
        pending = [job for job in driver.metadata.active_jobs() if job.state == JOB_PENDING]
        results: list[dict[str, object]] = []
        if pending:
            tasks = spark.sparkContext.parallelize(range(len(pending)), len(pending))
            results = tasks.mapPartitionsWithIndex(lambda index, _: run_one_job(settings, index)).collect()
        driver.obsolete.run_once()
        return results
    finally:
        driver.store.close()
        driver.metadata.close()


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point: the same options as ``strata compact``."""
    from api.cli import main as cli_main

    # An empty --spark-master keeps the master spark-submit was given (a later --spark-master wins).
    return cli_main(["compact", "--spark", "--spark-master", "", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
