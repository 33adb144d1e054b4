"""The metadata store: the source of truth for which bytes are live, and where offsets come from.

Object storage holds bytes; this store decides what they mean. Every state change that must be atomic is
one method here and one SQL transaction in the implementation:
- ``commit_flush``: assign offsets to every chunk of one uploaded file, index the chunks, and record the
  idempotency keys of the requests it carries. Before this commits, nothing in the file exists.
- ``commit_compaction``: replace input chunk rows with output chunk rows only if the job is still leased by
  the committer and every input is still live (compare-and-set), so a lost race is a typed
  ``CommitConflict`` and writes nothing.
- ``apply_retention``: advance a partition's log start and drop the chunk rows wholly below it.

Roles. Callers and fakes depend on the narrowest of these Protocols; one class (``SqlMetadataStore``)
implements them all, and ``MetadataStore`` is their union, for the composition root:
- ``TopicReader``: topics and partition states, read only. Every other role but ``FileCatalog`` includes it.
- ``LogStore``, the agents' log: ``commit_flush``, idempotency lookups and expiry, producer state expiry,
  ``find_chunks``.
- ``CompactionCatalog``, the planner's and worker's: partition stats, live files and their chunks, jobs
  (create, lease, heartbeat, finish, each finish with its attempt's report), ``commit_compaction``,
  ``apply_retention``, dirty-ratio samples.
- ``FileCatalog``, garbage collection's: which object keys have a files row, obsolete files, forgetting them.
- ``AdminStore``: topics created, reconfigured and deleted; consumer group offsets.
- ``ProducerStore``: idempotent producers' ids and epochs (InitProducerId).
- ``SecurityStore`` (``storage.metadata.security``): Kafka's ACLs and run-time SCRAM credentials.
- ``SchemaStore`` (``storage.metadata.schema_store``): the schema registry's schemas, subjects, versions,
  configs and modes. Its refusals are outcomes (``RegisterOutcome``, ``DeleteOutcome``), or exceptions the
  registry's own callables raise under the subject's lock; the registry turns them into its errors.
- ``LakeStore`` (``storage.metadata.lake_state``): the lake writers' leases and status, one row per
  lake-enabled topic.
- ``StatsReader``: what the HTTP API shows of compaction and sizes: jobs with their reports, partition
  details, topic summaries, dirty-ratio samples.

Lost races. A method that can lose a race to another process raises a ``storage.errors.Conflict``
subclass and writes nothing; no method answers a lost race with None or False:
- ``commit_flush``: ``IdempotencyConflict`` (a key was committed first; it carries the winner's offsets),
  ``ProducerConflict`` (producer batches that repeat or break their producer's sequence: the answers),
  or ``CommitConflict`` (a key expired while this commit ran: retry it);
- ``create_topic``: ``TopicExists``;
- ``create_job``: ``ClaimRefused`` (an input file is claimed by another active job, or no longer live);
- ``heartbeat_job``: ``LeaseLost`` (another worker leased the job, or it finished);
- ``finish_job`` and ``commit_compaction``: ``CommitConflict`` (the lease is not the caller's, or the
  inputs changed).
Infrastructure failures are ``storage.errors.Unavailable`` (retriable): a write that raised it may or may
not have committed, and the write methods are written so that repeating them is safe.

Compaction vocabulary (the planner and worker use the same names):
- a *spec* describes the work (which files, which partitions); it is opaque JSON to this store;
- a *job* is the durable decision to do it: a row, ``pending`` until a worker leases it, with a lease
  that the worker extends by heartbeats and that another worker may take once it has expired;
- a *claim* ties each input file to the one active job that may read it (``create_job``);
- the *cleaned offset* is Kafka's cleaner checkpoint: chunks ending below it were deduplicated already,
  the others are *dirty*.

Offsets: per partition, ``next_offset`` (the high watermark) only grows. A flush chunk of n records gets
base = next_offset and next_offset += n, under a row lock, so offsets are assigned once, densely, and
never reused, even with many agents committing concurrently.

Implementations: SQLite (embedded default, WAL mode) and PostgreSQL (several hosts), sharing one SQL
package (``storage.metadata.sql``) through a small dialect layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from storage.errors import DamagedRange

# Re-exported: callers import these from here too.
from storage.errors import IdempotencyConflict as IdempotencyConflict
from storage.errors import ProducerConflict as ProducerConflict
from storage.errors import UnknownJob as UnknownJob
from storage.metadata.coordination import AgentRegistry, GroupStore, ProducerStore, TransactionStore
from storage.metadata.lake_state import LakeStore
from storage.metadata.rows import (
    PRODUCER_ID_EXPIRATION_MS,
    ChunkRow,
    CleanedUpTo,
    CompactionOutput,
    DamageRow,
    DirtySample,
    FileChunk,
    FileRow,
    FileState,
    FlushResult,
    GroupOffset,
    GroupRow,
    IdempotencyEntry,
    Job,
    JobRemoval,
    JobReport,
    NewChunk,
    NewFile,
    PartitionDetail,
    PartitionState,
    PartitionStats,
    ProducerBatch,
    TopicInfo,
    TopicSummary,
)
from storage.metadata.schema_store import SchemaStore
from storage.metadata.security import SecurityStore
from storage.metadata.txn_state import AbortedTxn, TxnMarker

T = TypeVar("T")


class TopicReader(Protocol):
    """Topics and partition states, read only. All methods of every role are synchronous and thread-safe;
    async callers use a thread."""

    def get_topic(self, name: str) -> TopicInfo:
        """Raises UnknownTopic."""
        ...

    def list_topics(self) -> list[str]: ...

    def partition_states(self, topic: str) -> list[PartitionState]:
        """Raises UnknownTopic."""
        ...

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """Raises UnknownTopic or UnknownPartition."""
        ...


class LogStore(TopicReader, Protocol):
    """The log as the agents see it: the flush commit, idempotency, and the read path's chunk lookup."""

    def commit_flush(
        self,
        file: NewFile,
        chunks: Sequence[NewChunk],
        idempotency: Sequence[IdempotencyEntry],
        now_ms: int,
        producers: Sequence[ProducerBatch] = (),
        producer_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
        before_commit: Callable[[], None] | None = None,
    ) -> FlushResult:
        """One transaction: insert the file, give every chunk its base offset, record idempotency keys,
        check and record the idempotent producers' sequences.

        ``before_commit`` runs in the transaction after its last statement, just before COMMIT; if it
        raises, the transaction rolls back and nothing is written. The flusher passes a wait for the
        file's upload, so that a commit can do its work while the file is still being written and yet
        commit only once the file is durable (agents/flusher.py).

        Chunks of topics deleted meanwhile get base offset -1 and no row. Raises IdempotencyConflict
        (nothing written) when a key was committed first by another request, and CommitConflict (nothing
        written; retry) when such a key expired while this commit ran.

        Producer batches follow Kafka's rules per (producer id, topic, partition), against the state
        committed before and the earlier batches of this flush: a repeat of one of the last
        ``PRODUCER_BATCHES_RETAINED`` batches (same epoch and sequence range) is a duplicate; an epoch
        older than the partition's is rejected (InvalidProducerEpoch); in the current epoch the first
        sequence must follow the last one, and a newer epoch must start at sequence 0, else
        OutOfOrderSequence; a producer the partition does not know (never seen, or its state older than
        ``producer_expiration_ms``) is accepted at any sequence. Any duplicate or rejection raises
        ProducerConflict, writing nothing.
        """
        ...

    def lookup_idempotency(self, key: str, not_before_ms: int) -> list[tuple[int, int]] | None:
        """Offsets a committed request with this key got, if it was committed at or after not_before_ms."""
        ...

    def expire_idempotency(self, before_ms: int) -> int:
        """Delete idempotency rows older than before_ms; returns how many."""
        ...

    def expire_producers(self, before_ms: int) -> int:
        """Forget producer state (per partition) last appended to before ``before_ms``, and producer ids
        last initialised before it that no partition remembers; returns how many rows went."""
        ...

    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        """Live chunks of the partition whose last_offset >= offset, by base_offset, at most ``limit``."""
        ...

    def txn_markers(
        self, topic: str, partition: int, first: int, last: int, limit: int | None = None
    ) -> list[TxnMarker]:
        """The transaction markers at offsets ``first`` .. ``last`` of a partition, by offset (the first
        ``limit`` of them)."""
        ...

    def aborted_txns(self, topic: str, partition: int, first: int, last: int) -> list[AbortedTxn]:
        """The aborted transactions whose range (first offset .. marker) meets ``first`` .. ``last``."""
        ...


class DamageLog(Protocol):
    """Damaged ranges: stored bytes that fail their checks, as readers report them, and their quarantine."""

    def record_damage(self, damaged: Sequence[DamagedRange], detail: str, found_by: str, now_ms: int) -> None:
        """Record ranges found damaged (again: the first finding stays)."""
        ...

    def damaged_ranges(self, topic: str | None = None, quarantined: bool | None = None) -> list[DamageRow]:
        """Recorded ranges, by (topic, partition, first offset); ``quarantined`` filters on their state."""
        ...

    def quarantine(
        self, topic: str, partition: int, offset: int, principal: str, reason: str, now_ms: int
    ) -> DamageRow:
        """One transaction: drop the live chunk row holding ``offset`` (its offsets then read as a hole, as
        compaction's do), mark its file obsolete if no live chunk is left in it, and record the quarantine
        (who, when, why) on the range's row, made if no reader had reported it. ``OffsetOutOfRange`` if
        no live chunk holds the offset."""
        ...


class CompactionCatalog(TopicReader, DamageLog, Protocol):
    """What the planner, the worker and retention read and write: stats, files, chunks, jobs, the swap."""

    def aborted_txns(self, topic: str, partition: int, first: int, last: int) -> list[AbortedTxn]:
        """The aborted transactions whose range meets ``first`` .. ``last`` (a clean job drops them)."""
        ...

    def txn_markers(
        self, topic: str, partition: int, first: int, last: int, limit: int | None = None
    ) -> list[TxnMarker]:
        """The markers at offsets ``first`` .. ``last``, by offset, the first ``limit`` (a clean job
        gives them their delete horizon and drops them past it)."""
        ...

    # --- what the planner reads ------------------------------------------------------------------------
    def partition_stats(self, topic: str | None = None) -> list[PartitionStats]:
        """Stats of every partition of ``topic`` (UnknownTopic if it does not exist), or of all topics
        when None, ordered by (topic, partition)."""
        ...

    def live_files(self, level: int | None = None) -> list[FileRow]:
        """Live files (of one level, or all), ordered by (created_ms, file_id)."""
        ...

    def file_chunks(self, file_ids: Sequence[int]) -> list[FileChunk]:
        """The live chunks in these files, ordered by (file_id, position)."""
        ...

    def files_of_partitions(self, partitions: Sequence[tuple[str, int]]) -> list[FileRow]:
        """Live files holding at least one live chunk of any of these partitions, by (created_ms, file_id)."""
        ...

    def partition_chunks(self, topic: str, partition: int) -> list[FileChunk]:
        """Every live chunk of the partition in offset order (none for an unknown partition)."""
        ...

    def level_stats(self, topic: str) -> dict[int, tuple[int, int]]:
        """level -> (live files holding chunks of the topic, bytes of the topic's chunks at that level).

        Levels without chunks of the topic are absent. Raises UnknownTopic.
        """
        ...

    # --- jobs ---------------------------------------------------------------------------------------------
    def create_job(self, kind: str, spec: Mapping[str, object], file_ids: Sequence[int], now_ms: int) -> Job:
        """One transaction: a ``pending`` job that claims every file in ``file_ids``.

        Raises ClaimRefused, writing nothing, when any of the files is claimed by another active job or is
        not live. ``spec`` must be JSON-serialisable (ValueError otherwise).
        """
        ...

    def lease_job(self, owner: str, now_ms: int, lease_ms: int) -> Job | None:
        """Lease the oldest job that is pending, or leased with an expired lease (lease_expires_ms <
        now_ms), to ``owner`` until now_ms + lease_ms; attempts += 1. None when there is none.

        Two workers racing never get the same job. ``owner`` should be unique per worker process.
        """
        ...

    def heartbeat_job(self, job_id: int, owner: str, now_ms: int, lease_ms: int) -> None:
        """Extend the lease to now_ms + lease_ms (never shortening it) if ``owner`` still holds it.

        A lease that expired but was not taken by anyone else is still held. Raises LeaseLost when the
        lease is lost (another worker leased the job, it finished, or it does not exist): the worker must
        stop and not commit.
        """
        ...

    def finish_job(
        self, job_id: int, owner: str | None, state: str, now_ms: int, report: JobReport | None = None
    ) -> None:
        """Set the job to JOB_DONE or JOB_FAILED and release its file claims; store ``report`` with it
        (without one, the job keeps the stats it had).

        With an ``owner``, raises CommitConflict unless that owner holds the lease (finishing again
        with the same state is a no-op, for retries). ``owner=None`` forces it (admin, tests).
        Raises UnknownJob.
        """
        ...

    def record_attempt(self, job_id: int, owner: str, report: JobReport, now_ms: int) -> bool:
        """Store the stats of an attempt that ended without finishing its job (an interrupted one), if
        ``owner`` still holds the lease; False (nothing written) otherwise. Per-topic volumes are not kept:
        nothing was committed."""
        ...

    def active_jobs(self) -> list[Job]:
        """Pending and leased jobs, by job_id."""
        ...

    def get_job(self, job_id: int) -> Job:
        """Raises UnknownJob."""
        ...

    # --- the swap and retention -------------------------------------------------------------------------
    def commit_compaction(
        self,
        job_id: int,
        owner: str,
        input_chunk_ids: Sequence[int],
        outputs: Sequence[CompactionOutput],
        cleaned: Sequence[CleanedUpTo],
        now_ms: int,
        report: JobReport | None = None,
    ) -> None:
        """One compare-and-set transaction: swap the input chunk rows for the output chunk rows.

        Raises CommitConflict, writing nothing, unless the job is leased by ``owner`` and every input
        chunk row still exists. Then: the input rows are deleted; the output files are inserted (live, or
        obsolete at once when they have no chunk) with their chunk rows; each partition's cleaned_offset
        becomes max(current, given) and last_compaction_ms now_ms; input files left without live chunks
        become obsolete; the job becomes done, with ``report``, and its claims are released.

        Raises ValueError (nothing written) when the outputs are not a valid replacement: a chunk outside
        the span of its partition's input chunks, overlapping another output or a remaining chunk, or a
        record count that does not fit its span; or a cleaned offset beyond the high watermark.
        """
        ...

    def apply_retention(self, topic: str, partition: int, new_log_start: int, now_ms: int) -> int:
        """Set log_start_offset to min(max(current, new_log_start), high_watermark), delete the chunk
        rows ending below it, and mark files left without live chunks obsolete.

        Returns the number of chunk rows deleted. Raises UnknownTopic or UnknownPartition.
        """
        ...

    # --- dirty-ratio history ------------------------------------------------------------------------------
    def topic_summaries(self, names: Sequence[str]) -> list[TopicSummary]:
        """The summaries of the topics among ``names`` that exist, by name (binary order). One statement
        per 1,000 names: callers pass a page, or batches."""
        ...

    def record_dirty_samples(
        self, samples: Sequence[DirtySample], now_ms: int, min_interval_ms: int, keep_ms: int
    ) -> int:
        """Store each sample whose topic has no sample newer than ``now_ms - min_interval_ms``, and delete
        every sample older than ``now_ms - keep_ms``; returns how many were stored.

        Two processes sampling at the same moment on PostgreSQL may both store one (the check is not
        serialised there); a sample repeating a (topic, ts_ms) already stored is skipped.
        """
        ...


class StatsReader(TopicReader, Protocol):
    """What the HTTP API shows of compaction's work and the log's shape: jobs newest first, per-partition
    and per-topic figures, and the dirty-ratio samples the planner's rounds record."""

    def list_jobs(
        self, state: str | None = None, topic: str | None = None, before: int | None = None, limit: int = 50
    ) -> list[Job]:
        """Jobs with job_id < ``before`` (all when None), newest (highest job_id) first, at most ``limit``;
        only those in ``state`` and touching ``topic`` (its ``partitions``), when given. Index range scans
        only: the cost follows ``limit``, not the number of jobs."""
        ...

    def job_removals(self, topic: str, since_ms: int, limit: int) -> list[JobRemoval]:
        """Done jobs that finished at or after ``since_ms`` and removed records or bytes of ``topic``, by
        finish time, oldest first: the ``limit`` most recent."""
        ...

    def dirty_samples(self, topic: str, since_ms: int) -> list[DirtySample]:
        """The topic's samples at or after ``since_ms``, oldest first."""
        ...

    def partition_details(self, topic: str, after: int, limit: int) -> list[PartitionDetail]:
        """Partitions ``after + 1 .. after + limit`` of the topic (fewer at its end), by partition, read in
        one transaction. Raises UnknownTopic."""
        ...

    def topic_summaries(self, names: Sequence[str]) -> list[TopicSummary]: ...


class FileCatalog(Protocol):
    """The files rows, as garbage collection sees them."""

    def known_object_keys(self, keys: Sequence[str]) -> set[str]:
        """The subset of keys that have a files row (live or obsolete): anything else is an orphan."""
        ...

    def file_states(self, keys: Iterable[str]) -> dict[str, FileState]:
        """State of the files rows of ``keys``; keys without a row are absent."""
        ...

    def obsolete_files(self, before_ms: int, limit: int) -> list[FileRow]:
        """Obsolete files with obsolete_since_ms <= before_ms, oldest first, at most ``limit``.

        Files still claimed by an active job are left out: a worker may still be reading them.
        """
        ...

    def forget_files(self, file_ids: Sequence[int]) -> None:
        """Delete the files rows (after GC deleted the objects). Ids that are live, still have chunk rows,
        are claimed by an active job, or do not exist are skipped silently."""
        ...


class AdminStore(TopicReader, Protocol):
    """Topic administration and consumer group offsets."""

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str], now_ms: int) -> TopicInfo:
        """Raises TopicExists."""
        ...

    def update_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> TopicInfo:
        """Set (str) or reset to default (None) configs. Raises UnknownTopic."""
        ...

    def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow the topic to ``count`` partitions (new ones empty). Raises UnknownTopic, and
        InvalidPartitionCount unless ``count`` is more than today's."""
        ...

    def delete_topic(self, name: str, now_ms: int) -> None:
        """Drop the topic, its partitions and chunk rows; files left without live chunks become obsolete.

        Raises UnknownTopic.
        """
        ...

    def group_offsets(self, group: str) -> list[GroupOffset]: ...

    def list_groups_page(
        self, prefix: str, after: str | None, limit: int
    ) -> list[tuple[str, GroupRow | None]]:
        """One page of ``GroupStore.list_groups``: at most ``limit`` groups whose id starts with ``prefix``
        and sorts after ``after`` (code-point order, as Python sorts), by group id."""
        ...


class AgentMetadata(LogStore, GroupStore, TransactionStore, Protocol):
    """What an agent uses: the log, and the consumer groups and transactions it coordinates."""


class MetadataStore(
    AgentRegistry,
    LogStore,
    CompactionCatalog,
    StatsReader,
    FileCatalog,
    AdminStore,
    ProducerStore,
    TransactionStore,
    GroupStore,
    DamageLog,
    SecurityStore,
    SchemaStore,
    LakeStore,
    Protocol,
):
    """Every role at once: what the composition root opens and hands out by role."""

    url: str

    def close(self) -> None:
        """Release connections."""
        ...
