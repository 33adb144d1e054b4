"""One round of background work, as the worker role and ``strata compact`` run it.

A round: retention, then planning, then running every job this worker can lease, then GC of obsolete
files (after their grace) and, less often, of orphan uploads. Every step is safe with any number of other
processes doing the same: planning claims files, jobs are leased, commits are compare-and-set, and GC only
deletes what no live chunk references.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from planner.gc import ObsoleteCollector, OrphanCollector
from planner.offset_map import OffsetMap
from planner.planner import Planner, PlannerConfig
from planner.retention import Retention, RetentionResult
from planner.stats import JobStats
from planner.worker import Worker, WorkerConfig
from storage.clock import Clock
from storage.metadata.base import JOB_FAILED, Job, MetadataStore
from storage.objectstore.base import ObjectStore

log = logging.getLogger("strata.compactor")


@dataclass(frozen=True, slots=True)
class CompactorConfig:
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    obsolete_grace_ms: int = 600_000
    orphan_grace_ms: int = 3_600_000
    orphan_gc_interval_ms: int = 300_000
    max_jobs_per_round: int = 32
    # A job that failed this often (crashes, lost leases, bugs) is given up, so its files can be planned
    # again; without a cap it would be re-leased forever and keep them claimed.
    max_job_attempts: int = 5


@dataclass
class RoundResult:
    retention: RetentionResult
    planned: list[Job] = field(default_factory=list)
    jobs: list[tuple[Job, JobStats]] = field(default_factory=list)
    obsolete_deleted: int = 0
    orphans_deleted: int = 0


class Compactor:
    def __init__(
        self,
        store: ObjectStore,
        metadata: MetadataStore,
        clock: Clock,
        rng: random.Random,
        owner: str,
        config: CompactorConfig = CompactorConfig(),
        offset_map: OffsetMap | None = None,
        on_job: Callable[[Job, JobStats], None] | None = None,
    ) -> None:
        self.store = store
        self.metadata = metadata
        self.clock = clock
        self.config = config
        self.owner = owner
        self.planner = Planner(metadata, clock, config.planner)
        self.retention = Retention(metadata, clock)
        self.worker = Worker(store, metadata, clock, rng, owner, config.worker, offset_map)
        self.obsolete = ObsoleteCollector(store, metadata, clock, config.obsolete_grace_ms)
        self.orphans = OrphanCollector(store, metadata, clock, config.orphan_grace_ms)
        self.on_job = on_job
        self._last_orphan_gc = -(2**62)

    def run_once(self, topic: str | None = None, force: bool = False) -> RoundResult:
        result = RoundResult(self.retention.run_once())
        result.planned = self.planner.plan(topic, force)
        result.jobs = self.run_jobs()
        result.obsolete_deleted = self.obsolete.run_once()
        now = self.clock.now_ms()
        if now - self._last_orphan_gc >= self.config.orphan_gc_interval_ms:
            result.orphans_deleted = self.orphans.run_once().orphans_deleted
            self._last_orphan_gc = now
        return result

    def run_jobs(self, limit: int | None = None) -> list[tuple[Job, JobStats]]:
        """Lease and run jobs until none is left (at most ``limit``, default max_jobs_per_round)."""
        done: list[tuple[Job, JobStats]] = []
        for _ in range(limit if limit is not None else self.config.max_jobs_per_round):
            job = self.metadata.lease_job(self.owner, self.clock.now_ms(), self.config.worker.lease_ms)
            if job is None:
                break
            if job.attempts > self.config.max_job_attempts:
                log.error("job %d failed %d times; giving it up", job.job_id, job.attempts - 1)
                self.metadata.finish_job(job.job_id, self.owner, JOB_FAILED, self.clock.now_ms())
                continue
            stats = self.worker.run(job)
            done.append((job, stats))
            if self.on_job is not None:
                self.on_job(job, stats)
        return done
