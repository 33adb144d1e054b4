"""The planner: decides which files to rewrite, and records each decision as a leased job.

Two kinds of work (see ``planner/jobs.py``):
- **Merges** keep the number of files, metadata rows and GETs per fetch bounded: when level L holds
  ``merge_files[L]`` files, or ``merge_bytes[L]`` bytes, or its oldest file is ``merge_age_ms[L]`` old, its
  oldest files (up to ``max_job_bytes``) become one job writing level L+1.
- **Cleans** bound a compacted topic by its live keys: a partition of a ``cleanup.policy=compact`` topic is
  due when its dirty ratio (bytes at or after ``cleaned_offset`` / live bytes) reaches
  ``min.cleanable.dirty.ratio``, or its oldest dirty record is older than ``max.compaction.lag.ms``.
  Due partitions go dirtiest first; each job takes every file holding the partition, so the whole log of
  that partition is deduplicated in one pass.

Many planners may run at once: ``create_job`` claims the input files atomically and refuses a job that
would share a file with an active one, so a lost race just means the other planner's job runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from planner.jobs import JOB_CLEAN, JOB_MERGE, MAX_LEVEL, InputFile, JobSpec
from storage.clock import Clock
from storage.errors import ClaimRefused, UnknownTopic
from storage.metadata.base import CompactionCatalog, FileRow, Job, PartitionStats
from storage.topic_config import TopicConfig

log = logging.getLogger("strata.planner")

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    # Per source level (0 and 1): how many files, bytes or how old before a merge is due.
    merge_files: tuple[int, int] = (8, 8)
    merge_bytes: tuple[int, int] = (64 * MiB, 512 * MiB)
    merge_age_ms: tuple[int, int] = (20_000, 600_000)
    max_job_bytes: int = 1024 * MiB
    max_jobs_per_round: int = 8


@dataclass(frozen=True, slots=True)
class DirtyPartition:
    topic: str
    partition: int
    dirty_ratio: float
    reason: str


class Planner:
    def __init__(
        self, metadata: CompactionCatalog, clock: Clock, config: PlannerConfig = PlannerConfig()
    ) -> None:
        self.metadata = metadata
        self.clock = clock
        self.config = config

    def plan(self, topic: str | None = None, force: bool = False) -> list[Job]:
        """One planning round. ``topic``/``force``: clean that topic's compacted partitions now (admin)."""
        jobs: list[Job] = []
        for dirty in self.dirty_partitions(topic, force):
            if len(jobs) >= self.config.max_jobs_per_round:
                return jobs
            job = self._clean(dirty)
            if job is not None:
                jobs.append(job)
        if topic is None:
            for level in (0, 1):
                if len(jobs) >= self.config.max_jobs_per_round:
                    break
                job = self._merge(level)
                if job is not None:
                    jobs.append(job)
        return jobs

    # --- cleaning ----------------------------------------------------------------------------------------
    def dirty_partitions(self, topic: str | None = None, force: bool = False) -> list[DirtyPartition]:
        now = self.clock.now_ms()
        configs: dict[str, TopicConfig] = {}
        due: list[DirtyPartition] = []
        for stats in self.metadata.partition_stats(topic):
            config = configs.get(stats.topic)
            if config is None:
                try:
                    config = TopicConfig.from_overrides(self.metadata.get_topic(stats.topic).configs)
                except UnknownTopic:
                    continue
                configs[stats.topic] = config
            if not config.compacted:
                continue
            reason = _due(stats, config, now, force)
            if reason is not None:
                due.append(DirtyPartition(stats.topic, stats.partition, _ratio(stats), reason))
        due.sort(key=lambda d: d.dirty_ratio, reverse=True)
        return due

    def _clean(self, dirty: DirtyPartition) -> Job | None:
        files = self.metadata.files_of_partitions([(dirty.topic, dirty.partition)])
        if not files:
            return None
        # Cleaned output is at least L1: flush files (L0) are small and many, cleaned data is neither.
        level = min(max(1, *(f.level for f in files)), MAX_LEVEL)
        reason = f"{dirty.topic}/{dirty.partition}: {dirty.reason}"
        return self._create(JOB_CLEAN, level, files, reason)

    # --- merging -----------------------------------------------------------------------------------------
    def _merge(self, level: int) -> Job | None:
        files = self.metadata.live_files(level)
        if not files:
            return None
        now = self.clock.now_ms()
        total = sum(f.size for f in files)
        reason = None
        if len(files) >= self.config.merge_files[level]:
            reason = f"L{level} holds {len(files)} files"
        elif total >= self.config.merge_bytes[level]:
            reason = f"L{level} holds {total / MiB:.1f} MiB"
        elif len(files) > 1 and now - files[0].created_ms >= self.config.merge_age_ms[level]:
            reason = f"L{level}'s oldest file is {(now - files[0].created_ms) / 1000:.0f} s old"
        if reason is None:
            return None
        chosen: list[FileRow] = []
        size = 0
        for f in files:  # oldest first, so merges follow the order data arrived in
            if chosen and size + f.size > self.config.max_job_bytes:
                break
            chosen.append(f)
            size += f.size
        return self._create(JOB_MERGE, level + 1, chosen, reason)

    def _create(self, kind: str, level: int, files: Sequence[FileRow], reason: str) -> Job | None:
        inputs = tuple(InputFile(f.file_id, f.object_key, f.size, f.level) for f in files)
        spec = JobSpec(kind, level, inputs, reason)
        try:
            job = self.metadata.create_job(kind, spec.to_json(), spec.file_ids, self.clock.now_ms())
        except ClaimRefused:
            return None  # another planner's job holds one of the files: it runs instead
        log.info("planned job %d (%s, %d file(s) -> L%d): %s", job.job_id, kind, len(files), level, reason)
        return job


def _ratio(stats: PartitionStats) -> float:
    return stats.dirty_bytes / stats.live_bytes if stats.live_bytes else 0.0


def _due(stats: PartitionStats, config: TopicConfig, now: int, force: bool) -> str | None:
    oldest = stats.oldest_dirty_timestamp
    if stats.dirty_bytes == 0 or oldest is None:
        return None
    if now - oldest < config.min_compaction_lag_ms:
        return None  # no dirty chunk is old enough to clean yet: a job now would change nothing
    if force:
        return "requested"
    ratio = _ratio(stats)
    if ratio >= config.min_cleanable_dirty_ratio:
        return f"dirty ratio {ratio:.2f} >= {config.min_cleanable_dirty_ratio}"
    if now - oldest > config.max_compaction_lag_ms:
        return f"dirty data older than max.compaction.lag.ms ({config.max_compaction_lag_ms} ms)"
    return None
