"""The metadata store's rows: what its methods take and return, and the constants of its states.

Plain frozen values with no behaviour beyond derived properties; the roles that read and write them are the
Protocols in ``storage/metadata/base.py``, whose docstring gives the vocabulary (spec, job, claim, cleaned
offset) and the lost-race rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# File levels: L0 files come from agent flushes; compaction merges them into L1, L1 into L2.
LEVEL_INGEST = 0

FILE_LIVE = "live"
FILE_OBSOLETE = "obsolete"

# Job states. pending -> leased (-> leased again by another worker once the lease expired) -> done | failed.
JOB_PENDING = "pending"
JOB_LEASED = "leased"
JOB_DONE = "done"
JOB_FAILED = "failed"
JOB_ACTIVE_STATES = (JOB_PENDING, JOB_LEASED)  # a job in these states holds its file claims
JOB_FINAL_STATES = (JOB_DONE, JOB_FAILED)

# Kafka's "no producer" values in a RecordBatch header: such a batch skips every producer check.
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka's producer.id.expiration.ms default (1 day): a producer's state for a partition is forgotten
# this long after its last append there, and its id this long after its last InitProducerId once no
# partition remembers it.
PRODUCER_ID_EXPIRATION_MS = 86_400_000
# Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: how many of a producer's last batches per partition
# are remembered, so that a retry of any of them is answered with its original offset.
PRODUCER_BATCHES_RETAINED = 5


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int
    configs: Mapping[str, str]  # only the explicitly set configs; defaults are applied by TopicConfig
    created_ms: int


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int  # = next offset to assign
    # The first offset of the partition's oldest open transaction (None: no transaction is open), and the
    # offset of its newest transaction marker (-1: none): read with the rest, in one snapshot.
    open_txn_offset: int | None = None
    last_marker_offset: int = -1

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: read_committed consumers read below it. Every offset below it is decided: its
        transaction (if any) has its marker, and an aborted one its ``aborted_txns`` row."""
        if self.open_txn_offset is None:
            return self.high_watermark
        # As Kafka's updateFirstUnstableOffset: never below the log start (DeleteRecords or retention may
        # have removed where an open transaction began).
        return max(self.open_txn_offset, self.log_start_offset)


@dataclass(frozen=True, slots=True)
class NewFile:
    object_key: str
    size: int
    level: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class NewChunk:
    """A chunk of a freshly flushed file, before it has offsets. Its records are relative 0..count-1."""

    topic: str
    partition: int
    record_count: int
    position: int  # byte offset of the chunk within the file
    length: int
    min_timestamp: int
    max_timestamp: int
    crc: int  # CRC-32C of the chunk bytes, as in the file footer


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A live chunk: absolute offsets [base_offset, last_offset], bytes at [position, position+length)."""

    chunk_id: int
    topic: str
    partition: int
    base_offset: int
    last_offset: int
    record_count: int
    object_key: str
    position: int
    length: int
    min_timestamp: int
    max_timestamp: int
    crc: int
    has_holes: bool
    # Size of the whole object holding the chunk: the read path may GET the whole file at once (0: unknown).
    file_size: int = 0


@dataclass(frozen=True, slots=True)
class IdempotencyEntry:
    """One produce request's idempotency key and where its records sit in the flushed file.

    ``placements`` lists, in request order, (index into the commit's chunk list, relative offset within
    that chunk). The commit turns them into absolute (partition, offset) pairs inside the transaction.
    """

    key: str
    topic: str
    placements: Sequence[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """An idempotent producer's RecordBatch in a flush: its header fields and where it sits.

    ``chunk`` indexes the commit's chunk list and ``relative`` is the relative offset of the batch's
    first record in that chunk; its records are ``relative .. relative + record_count - 1``. ``append``
    groups the batches that stand or fall together (one produce request's batches for one partition,
    Kafka's unit of append): if one of them is a duplicate or rejected, the whole append is.
    Within one chunk, batches are listed in chunk order.
    """

    append: int
    chunk: int
    relative: int
    record_count: int
    producer_id: int
    epoch: int
    first_seq: int
    # A transactional producer's batch: the commit refuses it unless its partition is in the producer's
    # open transaction (KIP-890 part 1), and records where the transaction begins there (the LSO).
    transactional: bool = False


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class FlushResult:
    base_offsets: list[int]  # aligned with the commit's chunks
    request_offsets: dict[str, list[tuple[int, int]]]  # idempotency key -> [(partition, offset)]
    # Each chunk's partition's log start offset as the commit saw it (-1 where the base is -1): Kafka's
    # Produce answer carries it, and its Java producer reads it after UNKNOWN_PRODUCER_ID.
    log_starts: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupOffset:
    topic: str
    partition: int
    offset: int
    committed_ms: int
    # Kafka's commit metadata string and the leader epoch the consumer saw (-1: none).
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class GroupRow:
    """A consumer group's coordinator state as stored: the phase and protocol type (for listing without
    decoding) and the whole state as one JSON document (``agents/group_state.py`` owns its meaning)."""

    phase: str
    protocol_type: str | None
    doc: str


@dataclass(frozen=True, slots=True)
class FileRow:
    file_id: int
    object_key: str
    size: int
    level: int
    state: str  # FILE_LIVE or FILE_OBSOLETE
    created_ms: int
    obsolete_since_ms: int | None  # set exactly when obsolete


@dataclass(frozen=True, slots=True)
class FileState:
    state: str  # FILE_LIVE or FILE_OBSOLETE
    obsolete_since_ms: int | None


@dataclass(frozen=True, slots=True)
class FileChunk:
    """A live chunk and the id of the file holding it (``ChunkRow`` carries only the object key)."""

    file_id: int
    chunk: ChunkRow


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """What the compaction and retention planners decide on, for one partition.

    Only live chunk rows count. Dirty chunks are those with ``last_offset >= cleaned_offset``;
    ``oldest_dirty_timestamp`` is the smallest ``max_timestamp`` among them (None when nothing is dirty):
    the first moment some dirty chunk is wholly older than ``min.compaction.lag.ms``.
    ``earliest_dirty_timestamp`` is their smallest ``min_timestamp``, the oldest dirty record, which is
    what Kafka's ``max.compaction.lag.ms`` is measured from (its earliest dirty batch timestamp): a merge
    that joins an old dirty record with newer ones moves the chunk's ``max_timestamp``, never this.
    ``dirty_records`` counts the records the dirty chunks still hold (merges may have removed some of the
    ``high_watermark - cleaned_offset`` offsets written since the last clean).
    """

    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    cleaned_offset: int
    last_compaction_ms: int | None
    live_bytes: int  # sum of the lengths of the partition's live chunks
    dirty_bytes: int  # the same, over the dirty chunks only
    chunk_count: int
    oldest_dirty_timestamp: int | None
    dirty_records: int = 0  # records held by the dirty chunks (0: unknown)
    earliest_dirty_timestamp: int | None = None  # the smallest min_timestamp of the dirty chunks


@dataclass(frozen=True, slots=True)
class Job:
    job_id: int
    kind: str
    spec: Mapping[str, object]  # as given to create_job, after a JSON round trip (tuples become lists)
    state: str  # JOB_PENDING, JOB_LEASED, JOB_DONE or JOB_FAILED
    lease_owner: str | None  # the last worker that leased it (kept after the job finished)
    lease_expires_ms: int | None
    attempts: int  # how many times it was leased
    created_ms: int
    updated_ms: int
    # The (topic, partition) pairs with chunks in the job's files when it was created, sorted: a superset of
    # what it rewrites (chunks only leave claimed files). None for jobs created before schema version 6.
    partitions: tuple[tuple[str, int], ...] | None = None
    # The report of its last attempt (``JobReport.stats``): set when it finished, or when an attempt was
    # interrupted while it stayed leased. None before any attempt reported.
    stats: Mapping[str, object] | None = None

    @property
    def topics(self) -> list[str]:
        """The topics of ``partitions``, sorted (none when unknown)."""
        return sorted({topic for topic, _ in self.partitions or ()})


@dataclass(frozen=True, slots=True)
class TopicVolume:
    """What one job attempt read and wrote of one topic: records and chunk bytes, in and out.

    In minus out is what compaction removed (offsets that became holes, and their bytes).
    """

    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass(frozen=True, slots=True)
class JobReport:
    """What an attempt leaves on its job's row: ``stats`` (a JSON object, opaque to this store: the planner's
    ``JobStats.to_doc`` owns its fields) and, for a commit, the volume per topic it rewrote."""

    stats: Mapping[str, object]
    topics: Mapping[str, TopicVolume] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobRemoval:
    """A done job that removed records or bytes of one topic (``TopicVolume`` in minus out)."""

    job_id: int
    finished_ms: int
    records_removed: int
    bytes_removed: int


@dataclass(frozen=True, slots=True)
class DirtySample:
    """One topic's dirty and live chunk bytes at ``ts_ms`` (``PartitionStats`` summed over the topic)."""

    topic: str
    ts_ms: int
    dirty_bytes: int
    live_bytes: int

    @property
    def dirty_ratio(self) -> float:
        return self.dirty_bytes / self.live_bytes if self.live_bytes else 0.0


@dataclass(frozen=True, slots=True)
class PartitionDetail:
    """A partition's ``PartitionStats``, the live records its chunk rows hold, and its chunk bytes by level:
    level -> (live files holding chunks of the partition, bytes of its chunks at that level)."""

    stats: PartitionStats
    records: int
    levels: Mapping[int, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """A topic's size: its live chunk rows summed over its partitions."""

    name: str
    partitions: int
    configs: Mapping[str, str]  # the explicitly set configs, as TopicInfo.configs
    created_ms: int
    records: int  # records the live chunks hold
    live_bytes: int  # bytes of the live chunks
    dirty_bytes: int  # the same, over the chunks at or after their partition's cleaned offset


@dataclass(frozen=True, slots=True)
class NewCompactedChunk:
    """A chunk of a compaction output file. Offsets are absolute: compaction never changes an offset.

    ``[base_offset, last_offset]`` is the span the chunk covers; with ``has_holes`` it holds fewer than
    ``last_offset - base_offset + 1`` records (the file footer's bitmap says which).
    """

    topic: str
    partition: int
    base_offset: int
    last_offset: int
    record_count: int
    position: int
    length: int
    min_timestamp: int
    max_timestamp: int
    crc: int
    has_holes: bool


@dataclass(frozen=True, slots=True)
class CompactionOutput:
    file: NewFile
    chunks: Sequence[NewCompactedChunk]  # may be empty: the file row is then recorded obsolete at once


@dataclass(frozen=True, slots=True)
class CleanedUpTo:
    """Advance the partition's cleaner checkpoint to ``cleaned_offset`` (never moves it backwards).

    ``marker_horizons``: markers (by offset) whose transaction the clean found without records left: they
    get the delete horizon ``horizon_ms`` unless they have one. ``dropped_markers``: markers past their
    horizon, deleted with their aborted range (planner/marker_sweep.py gives the rule)."""

    topic: str
    partition: int
    cleaned_offset: int
    marker_horizons: tuple[int, ...] = ()
    horizon_ms: int = 0
    dropped_markers: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LiveAgent:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class DamageRow:
    """A damaged range as recorded (``DamageLog``): where, why, who found it, and its quarantine if any."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    object_key: str
    detail: str
    found_by: str
    found_ms: int
    quarantined_ms: int | None = None
    quarantined_by: str | None = None
    reason: str | None = None
