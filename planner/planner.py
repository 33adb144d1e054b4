"""The planner: decides which files to rewrite, and records each decision as a leased job.

Two kinds of work (see ``planner/jobs.py``):
- **Merges** keep the number of files, metadata rows and GETs per fetch bounded: when level L holds
  ``merge_files[L]`` files, or ``merge_bytes[L]`` bytes, or its oldest file is ``merge_age_ms[L]`` old, its
  oldest files (up to ``max_job_bytes``) become one job writing level L+1.
- **Cleans** bound a compacted topic by its live keys, as Kafka's log cleaner does: a job takes every file
  holding the partition, so its whole log (every level, the cleaned part and the dirty part) is
  deduplicated in one pass, from the log start. A partition of a ``cleanup.policy=compact`` topic is due
  - when its dirty ratio reaches ``min.cleanable.dirty.ratio``. The dirty bytes are those *written* since
    the last clean (Kafka's measure): merges deduplicate the dirty part as they go, so the bytes it still
    holds are scaled by offsets written / records left. Without that, merges would keep the ratio low
    forever and records overwritten across merge jobs (in different L2 files, or one in the cleaned part)
    would never go;
  - or when its oldest dirty record (the smallest ``min_timestamp`` of the dirty chunks) is older than
    ``max.compaction.lag.ms``: Kafka's bound on how long a record stays ineligible for compaction.
  Partitions past ``max.compaction.lag.ms`` go first (most overdue first), then the dirtiest. Due
  partitions that share a file are cleaned by one job (a file can only be in one active job; separate
  jobs would be refused and each would rewrite the shared files again), and partitions whose files an
  active job holds wait for the next round, so one busy file cannot hold up the other groups.

Damaged files wait: a file holding a damaged range that is not quarantined yet (the damage log,
``storage/metadata/sql/damage.py``) is left out of merges, and a partition whose log holds one is not
cleaned, so the rest of the log keeps compacting while an operator decides (``strata quarantine``); once
the range is quarantined the file is planned again without it.

Many planners may run at once: ``create_job`` claims the input files atomically and refuses a job that
would share a file with an active one, so a lost race just means the other planner's job runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from planner.jobs import JOB_CLEAN, JOB_MERGE, MAX_LEVEL, InputFile, JobSpec
from storage.clock import Clock
from storage.errors import ClaimRefused, UnknownTopic
from storage.metadata.base import CompactionCatalog
from storage.metadata.rows import FileRow, Job, PartitionStats
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
    overdue_ms: int = 0  # how long its oldest dirty record has been past max.compaction.lag.ms


@dataclass
class _CleanGroup:
    """Due partitions that share files, and the files holding any of them: one clean job."""

    partitions: list[DirtyPartition] = field(default_factory=list)
    files: dict[int, FileRow] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        first = self.partitions[0]
        more = len(self.partitions) - 1
        extra = f" (and {more} more partition(s) sharing its files)" if more else ""
        return f"{first.topic}/{first.partition}: {first.reason}{extra}"


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
        damaged = frozenset(row.object_key for row in self.metadata.damaged_ranges(quarantined=False))
        for group in self._clean_groups(self.dirty_partitions(topic, force), damaged):
            if len(jobs) >= self.config.max_jobs_per_round:
                return jobs
            job = self._clean(group)
            if job is not None:
                jobs.append(job)
        if topic is None:
            for level in (0, 1):
                if len(jobs) >= self.config.max_jobs_per_round:
                    break
                job = self._merge(level, damaged)
                if job is not None:
                    jobs.append(job)
        return jobs

    # --- cleaning ----------------------------------------------------------------------------------------
    def dirty_partitions(self, topic: str | None = None, force: bool = False) -> list[DirtyPartition]:
        """Due partitions, most urgent first: the most overdue (max.compaction.lag.ms), then the dirtiest."""
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
                overdue = _overdue_ms(stats, config, now)
                due.append(DirtyPartition(stats.topic, stats.partition, _ratio(stats), reason, overdue))
        due.sort(key=lambda d: (-d.overdue_ms, -d.dirty_ratio))
        return due

    def _clean_groups(
        self, due: Sequence[DirtyPartition], damaged: frozenset[str] = frozenset()
    ) -> list[_CleanGroup]:
        """Due partitions grouped by shared files, in the order of their most urgent partition; those whose
        log holds a damaged file are left out (a clean reads the whole log)."""
        if not due:
            return []
        claimed = {
            file_id for job in self.metadata.active_jobs() for file_id in JobSpec.from_json(job.spec).file_ids
        }
        groups: list[_CleanGroup | None] = []
        group_of: dict[int, int] = {}  # file_id -> index in groups
        for dirty in due:
            files = self.metadata.files_of_partitions([(dirty.topic, dirty.partition)])
            if not files:
                continue
            if any(f.object_key in damaged for f in files):
                log.warning(
                    "%s/%d is due but holds a damaged range: not cleaned until it is quarantined",
                    dirty.topic,
                    dirty.partition,
                )
                continue
            if any(f.file_id in claimed for f in files):
                # An active job holds part of its log: a clean now would be refused. It stays due, and
                # being due it goes first once that job is done.
                log.debug("%s/%d is due but an active job holds its files", dirty.topic, dirty.partition)
                continue
            touching = sorted({group_of[f.file_id] for f in files if f.file_id in group_of})
            if touching:
                index = touching[0]
                group = groups[index]
                assert group is not None
                for other_index in touching[1:]:  # this partition joins groups that were apart so far
                    other = groups[other_index]
                    assert other is not None
                    group.partitions.extend(other.partitions)
                    group.files.update(other.files)
                    for file_id in other.files:
                        group_of[file_id] = index
                    groups[other_index] = None
            else:
                index = len(groups)
                group = _CleanGroup()
                groups.append(group)
            group.partitions.append(dirty)
            for f in files:
                group.files[f.file_id] = f
                group_of[f.file_id] = index
        return [g for g in groups if g is not None]

    def _clean(self, group: _CleanGroup) -> Job | None:
        files = sorted(group.files.values(), key=lambda f: (f.created_ms, f.file_id))
        # Cleaned output is at least L1: flush files (L0) are small and many, cleaned data is neither.
        level = min(max(1, *(f.level for f in files)), MAX_LEVEL)
        return self._create(JOB_CLEAN, level, files, group.reason)

    # --- merging -----------------------------------------------------------------------------------------
    def _merge(self, level: int, damaged: frozenset[str] = frozenset()) -> Job | None:
        files = [f for f in self.metadata.live_files(level) if f.object_key not in damaged]
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


def _dirty_bytes_written(stats: PartitionStats) -> float:
    """Bytes written to the partition since its last clean, as Kafka counts dirty bytes.

    Merges deduplicate dirty data as early as the first merge, so the dirty chunks may hold far fewer
    records than the ``high_watermark - cleaned_offset`` offsets written since; their bytes are scaled up
    by that factor (the average size of a surviving dirty record, times the records written).
    """
    written = stats.high_watermark - max(stats.cleaned_offset, stats.log_start_offset)
    if stats.dirty_records <= 0 or written <= stats.dirty_records:
        return float(stats.dirty_bytes)
    return stats.dirty_bytes * written / stats.dirty_records


def _ratio(stats: PartitionStats) -> float:
    """Kafka's cleanable ratio: dirty bytes written since the last clean / (clean bytes + those)."""
    if stats.dirty_bytes == 0:
        return 0.0
    dirty = _dirty_bytes_written(stats)
    return dirty / (stats.live_bytes - stats.dirty_bytes + dirty)


def _overdue_ms(stats: PartitionStats, config: TopicConfig, now: int) -> int:
    """How long the oldest dirty record has been past max.compaction.lag.ms (0: it is not).

    Measured from the smallest ``min_timestamp`` of the dirty chunks, as Kafka measures from the earliest
    first-batch timestamp of its dirty segments: a chunk's ``max_timestamp`` moves on whenever a merge
    joins it with newer records, so measuring from it could postpone the bound by a merge age.
    """
    if stats.dirty_bytes == 0:
        return 0
    earliest = stats.earliest_dirty_timestamp
    if earliest is None:
        earliest = stats.oldest_dirty_timestamp  # a store that does not know it: the chunk-level bound
    if earliest is None:
        return 0
    return max(0, now - earliest - config.max_compaction_lag_ms)


def _due(stats: PartitionStats, config: TopicConfig, now: int, force: bool) -> str | None:
    oldest = stats.oldest_dirty_timestamp
    if stats.dirty_bytes == 0 or oldest is None:
        return None
    if config.min_compaction_lag_ms > 0 and now - oldest < config.min_compaction_lag_ms:
        return None  # no dirty chunk is old enough to clean yet: a job now would change nothing
    if force:
        return "requested"
    ratio = _ratio(stats)
    if ratio >= config.min_cleanable_dirty_ratio:
        return f"dirty ratio {ratio:.2f} >= {config.min_cleanable_dirty_ratio}"
    if _overdue_ms(stats, config, now) > 0:
        return f"dirty data older than max.compaction.lag.ms ({config.max_compaction_lag_ms} ms)"
    return None
