"""The metadata store: the source of truth for which bytes are live, and where offsets come from.

Object storage holds bytes; this store decides what they mean. Every state change that must be atomic is
one method here and one SQL transaction in the implementation:
- ``commit_flush``: assign offsets to every chunk of one uploaded file, index the chunks, and record the
  idempotency keys of the requests it carries. Before this commits, nothing in the file exists.
- compaction swaps (added with the compaction planner) replace input chunk rows with output rows only if
  the inputs are still live (compare-and-set), so a lost race is a typed ``CommitConflict``.

Offsets: per partition, ``next_offset`` (the high watermark) only grows. A flush chunk of n records gets
base = next_offset and next_offset += n, under a row lock, so offsets are assigned once, densely, and
never reused, even with many agents committing concurrently.

Implementations: SQLite (embedded default, WAL mode) and PostgreSQL (several hosts), sharing one SQL
module through a small dialect layer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# File levels: L0 files come from agent flushes; compaction merges them into L1, L1 into L2.
LEVEL_INGEST = 0

FILE_LIVE = "live"
FILE_OBSOLETE = "obsolete"


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
class FlushResult:
    base_offsets: list[int]  # aligned with the commit's chunks
    request_offsets: dict[str, list[tuple[int, int]]]  # idempotency key -> [(partition, offset)]


@dataclass(frozen=True, slots=True)
class GroupOffset:
    topic: str
    partition: int
    offset: int
    committed_ms: int


class IdempotencyConflict(Exception):
    """Raised by ``commit_flush`` when some idempotency keys were committed by someone else first.

    Nothing was written. ``existing`` maps each such key to the offsets it already has; the caller
    answers those requests with them and commits the rest without their records.
    """

    def __init__(self, existing: dict[str, list[tuple[int, int]]]) -> None:
        super().__init__(f"{len(existing)} idempotency key(s) already committed")
        self.existing = existing


class MetadataStore(ABC):
    """All methods are synchronous and thread-safe; async callers use a thread."""

    url: str

    # --- topics -----------------------------------------------------------------------------------------
    @abstractmethod
    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str], now_ms: int) -> TopicInfo:
        """Raises TopicExists."""

    @abstractmethod
    def get_topic(self, name: str) -> TopicInfo:
        """Raises UnknownTopic."""

    @abstractmethod
    def list_topics(self) -> list[str]: ...

    @abstractmethod
    def update_topic_configs(self, name: str, changes: Mapping[str, str | None]) -> TopicInfo:
        """Set (str) or reset to default (None) configs. Raises UnknownTopic."""

    @abstractmethod
    def delete_topic(self, name: str, now_ms: int) -> None:
        """Drop the topic, its partitions and chunk rows; files left without live chunks become obsolete."""

    # --- partitions ---------------------------------------------------------------------------------------
    @abstractmethod
    def partition_states(self, topic: str) -> list[PartitionState]:
        """Raises UnknownTopic."""

    @abstractmethod
    def partition_state(self, topic: str, partition: int) -> PartitionState:
        """Raises UnknownTopic or UnknownPartition."""

    # --- the write path -----------------------------------------------------------------------------------
    @abstractmethod
    def commit_flush(
        self,
        file: NewFile,
        chunks: Sequence[NewChunk],
        idempotency: Sequence[IdempotencyEntry],
        now_ms: int,
    ) -> FlushResult:
        """One transaction: insert the file, give every chunk its base offset, record idempotency keys.

        Chunks of topics deleted meanwhile get base offset -1 and no row. Raises IdempotencyConflict
        (nothing written) when a key was committed first by another request.
        """

    @abstractmethod
    def lookup_idempotency(self, key: str, not_before_ms: int) -> list[tuple[int, int]] | None:
        """Offsets a committed request with this key got, if it was committed at or after not_before_ms."""

    @abstractmethod
    def expire_idempotency(self, before_ms: int) -> int:
        """Delete idempotency rows older than before_ms; returns how many."""

    # --- the read path ------------------------------------------------------------------------------------
    @abstractmethod
    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        """Live chunks of the partition whose last_offset >= offset, by base_offset, at most ``limit``."""

    # --- consumer groups ----------------------------------------------------------------------------------
    @abstractmethod
    def commit_group_offsets(self, group: str, offsets: Sequence[tuple[str, int, int]], now_ms: int) -> None:
        """Upsert (topic, partition, offset) for the group. Raises UnknownTopic/UnknownPartition."""

    @abstractmethod
    def group_offsets(self, group: str) -> list[GroupOffset]: ...

    # --- files (GC) -------------------------------------------------------------------------------------
    @abstractmethod
    def known_object_keys(self, keys: Sequence[str]) -> set[str]:
        """The subset of keys that have a files row (live or obsolete): anything else is an orphan."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
