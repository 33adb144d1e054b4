"""The job runner: runs leased compaction jobs one at a time (``JobRunner``), each as one attempt
(``JobRun``, planner/job_run.py, which gives the two passes), reusing one offset map.

A runner killed at any point leaves the metadata untouched until the attempt's commit, so readers are
unaffected; once its lease expires the job runs again from its spec.

Errors (``JobRunner.run``): a lost race (``CommitConflict``, ``LeaseLost``) abandons the job and corrupt input
fails it; both mark the job failed so a later plan can retry the work. A retriable error (object store or
metadata unavailable) ends only this attempt: the job is not touched, so it stays leased until the lease
expires and is then re-run by any runner, up to the round's ``max_job_attempts``. The round goes on with
its other jobs and GC. Any other error is a bug and propagates.
"""

from __future__ import annotations

import logging
import random

from planner.config import RunnerConfig
from planner.job_run import JobContext, JobRun
from planner.jobs import JobSpec
from planner.offset_map import OffsetMap, SkimpyOffsetMap
from planner.phases import PhaseHook, no_phase_hook
from planner.stats import JobOutcome, JobStats
from planner.throttle import ReadThrottle
from storage.clock import Clock
from storage.errors import Conflict, CorruptObject, DamagedRange, StrataError
from storage.metadata.base import CompactionCatalog
from storage.metadata.rows import JOB_FAILED, Job
from storage.objectstore.base import ObjectStore

log = logging.getLogger("strata.job")


class JobRunner:
    """Runs leased jobs one at a time, reusing one offset map."""

    def __init__(
        self,
        store: ObjectStore,
        metadata: CompactionCatalog,
        clock: Clock,
        rng: random.Random,
        owner: str,
        config: RunnerConfig = RunnerConfig(),
        offset_map: OffsetMap | None = None,
        on_phase: PhaseHook = no_phase_hook,
    ) -> None:
        self.store = store
        self.metadata = metadata
        self.clock = clock
        self.config = config
        self.context = JobContext(
            owner,
            config.lease_ms,
            config.max_output_file_bytes,
            rng,
            ReadThrottle(config.max_read_bytes_per_second, clock),
        )
        # Allocated once per runner and reused: memory stays at the configured bound across jobs.
        self.offset_map = offset_map if offset_map is not None else SkimpyOffsetMap(config.map_bytes)
        self.on_phase = on_phase

    @property
    def owner(self) -> str:
        return self.context.owner

    def run(self, job: Job) -> JobStats:
        """Run one leased job to its commit (or its end, see the module docstring). Returns its statistics."""
        spec = JobSpec.from_json(job.spec)
        attempt = JobRun(
            self.context, self.store, self.metadata, self.clock, self.offset_map, job, spec, self.on_phase
        )
        # The job's row is written after the streams are closed, so its report has the final counters.
        failed = False
        try:
            attempt.execute()
        except Conflict as exc:  # lost a race (CommitConflict, LeaseLost): another run owns the job now
            attempt.end(JobOutcome.ABANDONED, exc)
            failed = True
        except CorruptObject as exc:  # CodecError included
            attempt.end(JobOutcome.FAILED, exc)
            log.error("job %d read corrupt data: %s", job.job_id, exc.message)
            self._report_damage(job, attempt, exc)
            failed = True
        except StrataError as exc:
            if not exc.retriable:
                raise
            # Left leased on purpose: the lease expiry and the attempt cap decide when and whether it runs
            # again. Its report is kept on the row if the metadata store still answers (the object store
            # is the usual culprit), so the job list shows why it has not finished.
            attempt.end(JobOutcome.INTERRUPTED, exc)
            log.warning("job %d interrupted by a retriable error: %s", job.job_id, exc.message)
        finally:
            attempt.close()
        if failed:
            self._finish(job, JOB_FAILED, attempt.stats)
        elif attempt.stats.outcome is JobOutcome.INTERRUPTED:
            self._record(job, attempt.stats)
        log.info(attempt.stats.summary(job.job_id, spec.kind))
        return attempt.stats

    def _report_damage(self, job: Job, attempt: JobRun, exc: CorruptObject) -> None:
        """Record the damaged range in the damage log, so that the planner leaves its file out and an
        operator sees it (``strata damaged``); the job still fails, and the round carries on."""
        damaged = exc.damaged
        chunk = attempt.reading
        if damaged is None and chunk is not None:
            damaged = DamagedRange(
                chunk.topic, chunk.partition, chunk.base_offset, chunk.last_offset, chunk.object_key
            )
        if damaged is None:
            return
        try:
            self.metadata.record_damage(
                [damaged], exc.message, f"compaction job {job.job_id}", self.clock.now_ms()
            )
        except StrataError as error:  # best effort: the next attempt finds it again
            log.warning("could not record the damaged range of job %d: %s", job.job_id, error.message)

    def _finish(self, job: Job, state: str, stats: JobStats) -> None:
        try:
            self.metadata.finish_job(job.job_id, self.owner, state, self.clock.now_ms(), stats.report())
        except StrataError as exc:  # the lease may be gone already; the row then belongs to another run
            log.warning("could not mark job %d %s: %s", job.job_id, state, exc.message)

    def _record(self, job: Job, stats: JobStats) -> None:
        try:
            self.metadata.record_attempt(job.job_id, self.owner, stats.report(), self.clock.now_ms())
        except StrataError as exc:  # best effort: the metadata store may be what interrupted the job
            log.warning("could not record the interrupted attempt at job %d: %s", job.job_id, exc.message)
