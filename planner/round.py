"""One round of background work: the one place that sequences it.

A round: retention (at most every ``retention_check_interval_ms``), then planning, then running every job that
can be leased, then GC of obsolete files (after their grace) and, at most every ``orphan_gc_interval_ms``, of
orphan uploads, then a sample of each compacted topic's dirty ratio (``planner/samples.py``: at most one per
topic per minute, kept for a day); at most every ``offsets_check_interval_ms`` it also expires consumer-group
offsets (Kafka's offsets.retention.minutes). Every caller runs this order through
``CompactionRound.run_once``: the worker role's background loop (``strata/loop.py``), ``strata compact`` (with
a progress hook for its bar) and Spark compaction (``pipeline/compaction.py``, with a job runner that starts
one Spark task per job). Every step is safe with any number of other processes doing the same: planning claims
files, jobs are leased, commits are compare-and-set, and GC only deletes what no live chunk references.

Errors: a job's own errors end that job (``planner/runner.py`` says how); the round goes on with the other
jobs and GC. An error outside any job (the metadata store down while planning or leasing, say) ends the
round, and the next round starts over.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from planner.config import RunnerConfig
from planner.gc import ObsoleteCollector, OrphanCollector
from planner.planner import Planner, PlannerConfig
from planner.retention import Retention, RetentionResult
from planner.samples import SAMPLE_INTERVAL_MS, SAMPLE_KEEP_MS, DirtySampler
from planner.stats import JobOutcome, JobStats
from storage.clock import Clock
from storage.errors import JobGivenUp
from storage.metadata.base import MetadataStore
from storage.metadata.rows import JOB_FAILED, Job, JobReport
from storage.objectstore.base import ObjectStore

if TYPE_CHECKING:
    from planner.offset_map import OffsetMap

log = logging.getLogger("strata.round")

JobDone = Callable[[Job, JobStats], None]


@dataclass(frozen=True, slots=True)
class RoundConfig:
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    obsolete_grace_ms: int = 600_000
    orphan_grace_ms: int = 3_600_000
    orphan_gc_interval_ms: int = 300_000
    max_jobs_per_round: int = 32
    # A job that failed this often (crashes, lost leases, bugs) is given up, so its files can be planned
    # again; without a cap it would be re-leased forever and keep them claimed.
    max_job_attempts: int = 5
    sample_interval_ms: int = SAMPLE_INTERVAL_MS
    sample_keep_ms: int = SAMPLE_KEEP_MS
    # Retention runs at most this often, the first time this long after the round is made (Kafka's
    # log.retention.check.interval.ms, 5 minutes, and its scheduler's 30 s initial delay, which a process
    # sets from its settings): records a producer just stamped in the past stay readable until then, as
    # on a Kafka broker. 0 and 0 (this default): every round.
    retention_check_interval_ms: int = 0
    retention_initial_delay_ms: int = 0
    # Kafka's offsets.retention.minutes (7 days) and offsets.retention.check.interval.ms (10 minutes).
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    offsets_check_interval_ms: int = 600_000


@dataclass
class RoundResult:
    retention: RetentionResult
    planned: list[Job] = field(default_factory=list)
    jobs: list[tuple[Job, JobStats]] = field(default_factory=list)
    obsolete_deleted: int = 0
    orphans_deleted: int = 0
    offsets_expired: int = 0
    samples: int = 0  # dirty-ratio samples stored


class JobDispatcher(Protocol):
    """Runs the jobs of a round (the planned ones and any left pending) here or elsewhere (one Spark task
    per job), calling ``on_done`` after each. Not to be confused with ``JobRunner``, which runs one job."""

    def __call__(self, on_done: JobDone) -> list[tuple[Job, JobStats]]: ...


class RoundProgress(Protocol):
    """Told what a round does, as it does it (``strata compact`` draws its progress bar from this)."""

    def planned(self, jobs: list[Job]) -> None: ...

    def job_done(self, job: Job, stats: JobStats) -> None: ...


class CompactionRound:
    def __init__(
        self,
        store: ObjectStore,
        metadata: MetadataStore,
        clock: Clock,
        rng: random.Random,
        owner: str,
        config: RoundConfig = RoundConfig(),
        offset_map: OffsetMap | None = None,
        on_job: JobDone | None = None,
    ) -> None:
        self.store = store
        self.metadata = metadata
        self.clock = clock
        self.config = config
        self.owner = owner
        self.planner = Planner(metadata, clock, config.planner)
        self.retention = Retention(metadata, clock)
        # Imported here, not at the top: the runner brings numpy and the offset map, which a process that
        # only serves (an agent, which imports this module for its admin endpoints) never needs.
        from planner.runner import JobRunner

        self.runner = JobRunner(store, metadata, clock, rng, owner, config.runner, offset_map)
        self.obsolete = ObsoleteCollector(store, metadata, clock, config.obsolete_grace_ms)
        self.orphans = OrphanCollector(store, metadata, clock, config.orphan_grace_ms)
        self.sampler = DirtySampler(metadata, clock, config.sample_interval_ms, config.sample_keep_ms)
        self.on_job = on_job
        self._last_orphan_gc = -(2**62)
        self._last_offsets_check = -(2**62)
        self._next_retention = clock.now_ms() + config.retention_initial_delay_ms

    def run_once(
        self,
        topic: str | None = None,
        force: bool = False,
        *,
        run_jobs: JobDispatcher | None = None,
        progress: RoundProgress | None = None,
    ) -> RoundResult:
        """One round in its fixed order. ``run_jobs``: how jobs run (default: here, one at a time)."""
        started = self.clock.now_ms()
        if started >= self._next_retention:
            result = RoundResult(self.retention.run_once())
            self._next_retention = started + self.config.retention_check_interval_ms
        else:
            result = RoundResult(RetentionResult(0, 0))
        result.planned = self.planner.plan(topic, force)
        if progress is not None:
            progress.planned(result.planned)

        def done(job: Job, stats: JobStats) -> None:
            if self.on_job is not None:
                self.on_job(job, stats)
            if progress is not None:
                progress.job_done(job, stats)

        result.jobs = (run_jobs or self._run_jobs_here)(done)
        result.obsolete_deleted = self.obsolete.run_once()
        now = self.clock.now_ms()
        if now - self._last_orphan_gc >= self.config.orphan_gc_interval_ms:
            result.orphans_deleted = self.orphans.run_once().orphans_deleted
            self._last_orphan_gc = now
        if now - self._last_offsets_check >= self.config.offsets_check_interval_ms:
            result.offsets_expired = self.metadata.expire_group_offsets(now, self.config.offsets_retention_ms)
            self._last_offsets_check = now
        result.samples = self.sampler.run_once()
        return result

    def _run_jobs_here(self, on_done: JobDone) -> list[tuple[Job, JobStats]]:
        return self.run_jobs(on_done=on_done)

    def run_jobs(
        self, limit: int | None = None, on_done: JobDone | None = None
    ) -> list[tuple[Job, JobStats]]:
        """Lease and run jobs until none is left (at most ``limit``, default max_jobs_per_round).

        ``on_done`` defaults to the round's ``on_job`` (a Spark task calls this directly, outside a round).
        """
        report = on_done if on_done is not None else self.on_job
        done: list[tuple[Job, JobStats]] = []
        for _ in range(limit if limit is not None else self.config.max_jobs_per_round):
            job = self.metadata.lease_job(self.owner, self.clock.now_ms(), self.config.runner.lease_ms)
            if job is None:
                break
            if job.attempts > self.config.max_job_attempts:
                log.error("job %d failed %d times; giving it up", job.job_id, job.attempts - 1)
                self.metadata.finish_job(
                    job.job_id, self.owner, JOB_FAILED, self.clock.now_ms(), given_up(job)
                )
                continue
            stats = self.runner.run(job)
            done.append((job, stats))
            if report is not None:
                report(job, stats)
        return done


def given_up(job: Job) -> JobReport:
    """The report of a job given up after too many attempts: the last recorded attempt's figures (if one
    was recorded: interrupted attempts are, crashed ones are not), failed with ``JobGivenUp``, whose message
    names the last attempt's error."""
    stats = JobStats.from_doc(job.stats) if job.stats is not None else JobStats()
    last = f"; the last ended with {stats.error_code}: {stats.reason}" if stats.error_code is not None else ""
    error = JobGivenUp(f"given up after {job.attempts - 1} attempt(s){last}")
    stats.fail(JobOutcome.FAILED, error.code, error.message)
    return stats.report()
