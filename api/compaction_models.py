"""Response bodies of the compaction and size endpoints (``api/routes/compaction.py``) and of the topic
listing (``GET /v1/topics``), and their conversions from the metadata store's types.

Dirty ratios here are dirty / live chunk bytes (the chunks at or after their partition's cleaned offset,
over all live chunks), as ``GET /v1/topics/{topic}`` shows them per partition; they are null for topics
that are not compacted, where nothing is ever cleaned. (The planner's trigger scales the dirty bytes by the
offsets written since the last clean, Kafka's measure, so it can be higher: see planner/planner.py.)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from planner.stats import JobStats
from storage.metadata.rows import (
    JOB_DONE,
    JOB_FAILED,
    JOB_LEASED,
    JOB_PENDING,
    DirtySample,
    Job,
    JobRemoval,
    PartitionDetail,
    TopicSummary,
)
from storage.topic_config import TopicConfig, effective_configs

JobState = Literal["pending", "running", "done", "failed"]
# The API's name for each stored job state: a leased job is one a worker is running.
STATE_NAMES: dict[str, JobState] = {
    JOB_PENDING: "pending",
    JOB_LEASED: "running",
    JOB_DONE: "done",
    JOB_FAILED: "failed",
}
STORED_STATES: dict[JobState, str] = {name: stored for stored, name in STATE_NAMES.items()}


# --- jobs -------------------------------------------------------------------------------------------------
class JobPartitionOut(BaseModel):
    topic: str
    partition: int


class JobErrorOut(BaseModel):
    code: int = Field(description="the Strata error code that ended the attempt (storage/errors/)")
    message: str


class JobStatsOut(BaseModel):
    """What the job's last attempt reported (planner/stats.py, stored with the job): when it finished (done
    or failed), or when it was interrupted by a retriable error and left leased for another attempt."""

    outcome: str = Field(description="committed, abandoned (lost a race), failed or interrupted")
    error: JobErrorOut | None = Field(default=None, description="why the attempt ended without a commit")
    records_in: int = 0
    records_out: int = 0
    offsets_removed: int = Field(default=0, description="records_in - records_out: offsets that became holes")
    bytes_in: int = Field(default=0, description="bytes of the input chunks")
    bytes_out: int = Field(default=0, description="bytes of the output chunks")
    bytes_read: int = Field(default=0, description="bytes the object-store GETs returned (both passes)")
    bytes_written: int = Field(default=0, description="bytes of the output files PUT")
    duration_ms: int = 0
    input_files: int = 0
    output_files: int = 0
    partitions: int = 0
    partitions_deduplicated: int = 0
    partial_partitions: int = Field(
        default=0, description="partitions where the offset map filled before their dirty part ended"
    )
    tombstones_removed: int = 0
    map_utilization: float = 0.0
    gets: int = 0
    puts: int = 0
    owner: str = Field(default="", description="the worker that made the attempt")


class JobOut(BaseModel):
    job_id: int
    kind: str = Field(description="merge (a level into the next) or clean (dedup of compacted partitions)")
    state: JobState
    topics: list[str]
    partitions: list[JobPartitionOut] = Field(
        description="the partitions with chunks in the job's files when it was planned (empty for jobs"
        " planned before Strata recorded them)"
    )
    input_files: int
    attempts: int
    owner: str | None = Field(description="the worker that leased it last")
    created_ms: int
    updated_ms: int
    stats: JobStatsOut | None
    stats_line: str | None = Field(description="the stats as one line, as the worker logs it")


class JobListOut(BaseModel):
    jobs: list[JobOut]
    next_before: int | None = Field(
        description="pass as ``before`` for the next page; null when there is none. A page may hold fewer"
        " jobs than ``limit`` (jobs of topics the caller may not describe are left out) and still have one"
    )


def job_out(job: Job) -> JobOut:
    inputs = job.spec.get("inputs")
    stats = line = None
    if job.stats is not None:
        stats = JobStatsOut.model_validate(job.stats)  # as JobStats.to_doc wrote it
        line = JobStats.from_doc(job.stats).summary(job.job_id, job.kind)
    return JobOut(
        job_id=job.job_id,
        kind=job.kind,
        state=STATE_NAMES.get(job.state, "failed"),
        topics=job.topics,
        partitions=[JobPartitionOut(topic=t, partition=p) for t, p in job.partitions or ()],
        input_files=len(inputs) if isinstance(inputs, list) else 0,
        attempts=job.attempts,
        owner=job.lease_owner,
        created_ms=job.created_ms,
        updated_ms=job.updated_ms,
        stats=stats,
        stats_line=line,
    )


# --- partitions -----------------------------------------------------------------------------------------
class LevelBytesOut(BaseModel):
    level: int
    files: int = Field(description="live files holding chunks of the partition at this level")
    bytes: int = Field(description="bytes of the partition's chunks at this level")


class PartitionDetailOut(BaseModel):
    partition: int
    log_start_offset: int
    high_watermark: int
    cleaned_offset: int
    records: int = Field(
        description="live records the partition holds (fewer than the offsets once compacted)"
    )
    bytes: int = Field(description="bytes of its live chunks")
    bytes_by_level: list[LevelBytesOut]
    dirty_ratio: float | None
    last_compaction_ms: int | None


class PartitionListOut(BaseModel):
    topic: str
    partitions: list[PartitionDetailOut]
    next_after: int | None = Field(description="pass as ``after`` for the next page; null at the last")


def partition_out(detail: PartitionDetail, compacted: bool) -> PartitionDetailOut:
    s = detail.stats
    return PartitionDetailOut(
        partition=s.partition,
        log_start_offset=s.log_start_offset,
        high_watermark=s.high_watermark,
        cleaned_offset=s.cleaned_offset,
        records=detail.records,
        bytes=s.live_bytes,
        bytes_by_level=[
            LevelBytesOut(level=level, files=files, bytes=nbytes)
            for level, (files, nbytes) in sorted(detail.levels.items())
        ],
        dirty_ratio=shown_ratio(s.dirty_bytes, s.live_bytes) if compacted else None,
        last_compaction_ms=s.last_compaction_ms,
    )


# --- a topic's compaction ---------------------------------------------------------------------------------
class DirtySampleOut(BaseModel):
    ts_ms: int
    dirty_ratio: float
    dirty_bytes: int
    live_bytes: int


class RemovalOut(BaseModel):
    ts_ms: int = Field(description="when the job committed")
    job_id: int
    bytes_removed: int = Field(description="chunk bytes in minus out, for this topic")
    records_removed: int


class TopicCompactionOut(BaseModel):
    topic: str
    cleanup_policy: str
    dirty_ratio: float | None = Field(description="now; null unless the topic is compacted")
    history: list[DirtySampleOut] = Field(
        description="samples the compaction rounds recorded (at most one a minute, kept 24 h), oldest first"
    )
    removed: list[RemovalOut] = Field(description="done jobs that removed records of the topic, oldest first")


def sample_out(sample: DirtySample) -> DirtySampleOut:
    return DirtySampleOut(
        ts_ms=sample.ts_ms,
        dirty_ratio=shown_ratio(sample.dirty_bytes, sample.live_bytes),
        dirty_bytes=sample.dirty_bytes,
        live_bytes=sample.live_bytes,
    )


def removal_out(removal: JobRemoval) -> RemovalOut:
    return RemovalOut(
        ts_ms=removal.finished_ms,
        job_id=removal.job_id,
        bytes_removed=removal.bytes_removed,
        records_removed=removal.records_removed,
    )


# --- topics ------------------------------------------------------------------------------------------------
class TopicSummaryOut(BaseModel):
    name: str
    partitions: int
    records: int = Field(description="live records held")
    bytes: int = Field(description="bytes of the live chunks")
    cleanup_policy: str
    dirty_ratio: float | None = Field(description="null unless the topic is compacted")


class TopicListOut(BaseModel):
    """Without paging parameters, only ``topics``: every topic name the caller may describe."""

    topics: list[str]
    summaries: list[TopicSummaryOut] | None = Field(
        default=None, description="with detail=true: one per name of the page, in the same order"
    )
    next_after: str | None = Field(
        default=None,
        description="when paging (limit or detail): pass as ``after`` for the next page; null at the last",
    )


def summary_out(summary: TopicSummary) -> TopicSummaryOut:
    compacted = TopicConfig.from_overrides(summary.configs).compacted
    return TopicSummaryOut(
        name=summary.name,
        partitions=summary.partitions,
        records=summary.records,
        bytes=summary.live_bytes,
        cleanup_policy=effective_configs(summary.configs)["cleanup.policy"],
        dirty_ratio=shown_ratio(summary.dirty_bytes, summary.live_bytes) if compacted else None,
    )


def shown_ratio(dirty: int, live: int) -> float:
    """The dirty ratio the API shows (dirty / live bytes, 4 decimals; 0 for an empty partition)."""
    return round(dirty / live, 4) if live else 0.0
