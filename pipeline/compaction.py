"""Compaction on Spark executors: the planner's jobs run as Spark tasks, one job per task.

The driver runs the ordinary round (``planner.round.CompactionRound.run_once``: retention, planning, jobs,
GC) with a job runner that starts one task per pending job. Each task is an ordinary job runner
(``planner.runner.JobRunner``): it leases one job from the metadata store, reads each input file with its
two streaming GETs, uploads the outputs and commits through the metadata store with the same
compare-and-set as a local runner. So Spark adds parallelism, not a new code path: a task that dies leaves
a lease that expires, and any runner (Spark or not) re-runs the job.

This module knows nothing of the front doors: the caller passes a ``SparkCompactionConfig``
(``strata.component_configs.spark_compaction_config`` builds it from settings). The spark-submit entry
point is ``scripts/spark_compact.py``.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from planner.round import CompactionRound, JobDone, RoundConfig, RoundProgress, RoundResult
from planner.stats import JobOutcome, JobStats
from storage.clock import SystemClock
from storage.metadata import open_metadata_store
from storage.metadata.rows import JOB_PENDING, Job, TopicVolume
from storage.objectstore import open_object_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class SparkCompactionConfig:
    """Where the data is and how compaction runs; shipped to every task, so it must pickle."""

    bucket_url: str
    metadata_url: str
    s3_endpoint: str | None = None
    s3_region: str | None = None
    round: RoundConfig = field(default_factory=RoundConfig)


def _round(config: SparkCompactionConfig, owner: str) -> CompactionRound:
    store = open_object_store(config.bucket_url, endpoint_url=config.s3_endpoint, region=config.s3_region)
    metadata = open_metadata_store(config.metadata_url)
    # SystemRandom: the key-hash secret must not be predictable from the process's state.
    return CompactionRound(store, metadata, SystemClock(), random.SystemRandom(), owner, config.round)


def run_one_job(config: SparkCompactionConfig, task: int) -> Iterator[dict[str, object]]:
    """One Spark task: lease one job, run it, report its statistics (none if another task took it)."""
    owner = f"spark:{socket.gethostname()}:{os.getpid()}:{task}"
    executor = _round(config, owner)
    try:
        for job, stats in executor.run_jobs(limit=1):
            yield {"job_id": job.job_id, **asdict(stats), "outcome": stats.outcome.value}
    finally:
        executor.store.close()
        executor.metadata.close()


def _stats_of(row: dict[str, object]) -> JobStats:
    fields = {k: v for k, v in row.items() if k != "job_id"}
    fields["outcome"] = JobOutcome(str(fields["outcome"]))
    # asdict turned the per-topic volumes into plain dicts on the executor.
    topics = fields.get("topics")
    if isinstance(topics, dict):
        fields["topics"] = {str(t): TopicVolume(**v) for t, v in topics.items()}
    return JobStats(**fields)  # type: ignore[arg-type]


def compact_on_spark(
    spark: SparkSession,
    config: SparkCompactionConfig,
    *,
    topic: str | None = None,
    force: bool = False,
    progress: RoundProgress | None = None,
) -> RoundResult:
    """One round with the jobs on Spark executors (GC on the driver, as in any round)."""
    driver = _round(config, f"spark-driver:{socket.gethostname()}:{os.getpid()}")

    def run_on_spark(on_done: JobDone) -> list[tuple[Job, JobStats]]:
        pending = {job.job_id: job for job in driver.metadata.active_jobs() if job.state == JOB_PENDING}
        if not pending:
            return []
        tasks = spark.sparkContext.parallelize(range(len(pending)), len(pending))
        rows = tasks.mapPartitionsWithIndex(lambda index, _: run_one_job(config, index)).collect()
        ran: list[tuple[Job, JobStats]] = []
        for row in rows:
            job_id = row["job_id"]
            assert isinstance(job_id, int)
            # A task may have leased a job whose lease expired after the driver looked: not in ``pending``.
            job = pending.get(job_id) or driver.metadata.get_job(job_id)
            ran.append((job, _stats_of(row)))
            on_done(*ran[-1])
        return ran

    try:
        return driver.run_once(topic, force, run_jobs=run_on_spark, progress=progress)
    finally:
        driver.store.close()
        driver.metadata.close()
