"""A topic's lake status as operators see it (``GET /v1/topics/{topic}/lake``, ``strata lake``, the console's
Lake tab, the ``strata_lake_lag_*`` gauges): the writer's last recorded run (``lake_tables``, written by
``pipeline/lake/writer.py``) against the topic's partitions now.

Read from the metadata store only: the HTTP door does not import the lake writer (or pyiceberg), and a
status must not cost a read of the table's metadata files. The committed offsets are the ones the writer's
last successful run read from the table's current snapshot (``strata.offsets``), so they lag the table
only while a run is in flight.

Lag, per partition, with ``start`` the offset the table has reached (its committed offset; for a partition
the table does not hold yet, the log start, or the last stable offset under ``strata.iceberg.backfill=
from_now``):
- ``lag_records`` = max(0, LSO - start): the offsets below the topic's last stable offset that the table
  does not hold. Offsets, not records: aborted transactions, their markers and compacted holes count too,
  as in Kafka's consumer lag.
- ``lag_seconds`` = 0 when ``lag_records`` is 0; otherwise the age of the oldest record the table lacks,
  ``now - t``, where ``t`` is the smallest record timestamp of the chunk (one partition's records of one
  flushed or compacted file) holding offset ``start``, or the first live chunk past it. Chunk granularity
  makes it an upper bound when timestamps follow offsets; it follows the producers' clocks under CreateTime
  and is never negative. When no chunk or timestamp answers (a partition emptied by retention), it is the
  time since the table's last commit (0 if it never committed).
A topic's lag is the sum of its partitions' ``lag_records`` and the largest of their ``lag_seconds``.

What the lake costs (the requests its round sent for the topic's tables, what they hold) is the row's too:
the workers record it (``LakeStore.record_lake_usage``), so any agent shows the whole cluster's figures.

The error is the last run's, or, for a topic whose table another topic's row names (the writer refuses to
lease it, so the topic never gets a row or a run), that refusal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from storage.lake_config import BACKFILL_FROM_NOW, MODE_DISABLED, LakeTopicConfig
from storage.metadata.lake_state import LakeFootprint, LakeTableRow
from storage.metadata.rows import ChunkRow, PartitionState, TopicInfo


class LakeStatusReader(Protocol):
    """What a status reads: the topic, its partitions, the chunk at an offset and the lake's rows."""

    def get_topic(self, name: str) -> TopicInfo: ...

    def partition_states(self, topic: str) -> list[PartitionState]: ...

    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]: ...

    def lake_topics(self) -> list[TopicInfo]: ...

    def lake_tables(self) -> list[LakeTableRow]: ...


@dataclass(frozen=True, slots=True)
class PartitionLag:
    partition: int
    committed_offset: int | None  # the table holds every offset below it; None: none of this partition
    last_stable_offset: int
    lag_records: int
    lag_seconds: float


@dataclass(frozen=True, slots=True)
class LakeStatus:
    topic: str
    mode: str
    table: str | None  # None when the lake is disabled
    commit_interval_ms: int | None = None
    partitions: list[PartitionLag] = field(default_factory=list)
    lag_records: int = 0
    lag_seconds: float = 0.0
    # The writer's last recorded run (None before its first one).
    last_commit_ms: int | None = None
    last_snapshot_id: int | None = None
    last_run_ms: int | None = None
    last_run_lag_records: int | None = None
    error: str | None = None
    commit_requested: bool = False
    # The writer holding the table's lease now (a run in flight), and until when.
    lease_owner: str | None = None
    lease_expires_ms: int | None = None
    # What the lake round sent for the topic's tables, by request kind, and what they hold (None: not
    # measured yet), as recorded in the row (pipeline/lake/meter.py, LakeStore.record_lake_usage).
    requests: Mapping[str, int] = field(default_factory=dict)
    stored: LakeFootprint | None = None

    @property
    def enabled(self) -> bool:
        return self.mode != MODE_DISABLED


def lake_status(meta: LakeStatusReader, topic: str, now_ms: int) -> LakeStatus:
    """The status of ``topic``; raises UnknownTopic. A topic whose lake is disabled has mode ``disabled``
    and nothing else."""
    info = meta.get_topic(topic)
    return status_of(meta, info, {r.topic: r for r in meta.lake_tables()}, now_ms)


def lake_statuses(
    meta: LakeStatusReader, now_ms: int, topics: Sequence[TopicInfo] | None = None
) -> list[LakeStatus]:
    """The status of each of ``topics`` (default: every lake-enabled topic), in their order."""
    rows = {r.topic: r for r in meta.lake_tables()}
    chosen = meta.lake_topics() if topics is None else topics
    return [status_of(meta, info, rows, now_ms) for info in chosen]


def status_of(
    meta: LakeStatusReader, info: TopicInfo, rows: Mapping[str, LakeTableRow], now_ms: int
) -> LakeStatus:
    """The status of ``info`` given every ``lake_tables`` row, by topic."""
    lake = LakeTopicConfig.from_overrides(info.name, info.configs)
    if lake.mode == MODE_DISABLED:
        return LakeStatus(info.name, lake.mode, None)
    row = rows.get(info.name)
    if row is not None and row.topic_created_ms != info.created_ms:
        row = None  # the row of an earlier topic of this name, which the next round forgets
    # A table another topic's row names: the writer refuses to lease it, so this topic gets no row of its
    # own, and this is where its refusal shows.
    claimed = next(
        (r.topic for r in rows.values() if r.table_identifier == lake.table and r.topic != info.name), None
    )
    error = row.error if row is not None else None
    if claimed is not None:
        error = _claim_refused(lake.table, claimed, info.name)
    committed: Mapping[int, int] = row.committed_offsets if row is not None else {}
    last_commit = row.last_commit_ms if row is not None else None
    partitions = []
    for state in meta.partition_states(info.name):
        p, stable = state.partition, state.last_stable_offset
        done = committed.get(p)
        if done is not None:
            start = done
        elif lake.backfill == BACKFILL_FROM_NOW:
            start = stable
        else:
            start = state.log_start_offset
        lag = max(0, stable - start)
        seconds = (
            _age(meta, info.name, p, max(start, state.log_start_offset), last_commit, now_ms) if lag else 0.0
        )
        partitions.append(PartitionLag(p, done, stable, lag, seconds))
    return LakeStatus(
        info.name,
        lake.mode,
        lake.table,
        lake.commit_interval_ms,
        partitions,
        sum(p.lag_records for p in partitions),
        max((p.lag_seconds for p in partitions), default=0.0),
        last_commit,
        None if row is None else row.last_snapshot_id,
        None if row is None else row.last_run_ms,
        None if row is None else row.lag_records,
        error,
        row is not None and row.commit_requested,
        None if row is None else row.lease_owner,
        None if row is None else row.lease_expires_ms,
        {} if row is None else row.requests,
        None if row is None else row.stored,
    )


def _claim_refused(table: str, other: str, topic: str) -> str:
    # The words of the writer's ClaimRefused (storage/metadata/sql/lake.py), which a status cannot read.
    return (
        f"the Iceberg table {table} is the table of topic {other!r}; set strata.iceberg.table of {topic!r}"
        " to another name"
    )


def _age(
    meta: LakeStatusReader, topic: str, partition: int, offset: int, last_commit_ms: int | None, now_ms: int
) -> float:
    """Seconds since the oldest record at or past ``offset`` was stamped (see the module's doc)."""
    chunks = meta.find_chunks(topic, partition, offset, 1)
    if chunks and chunks[0].min_timestamp >= 0:
        since = chunks[0].min_timestamp
    elif last_commit_ms is not None:
        since = last_commit_ms
    else:
        return 0.0
    return max(0, now_ms - since) / 1000
