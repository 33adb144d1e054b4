"""The lake's retention hold: time and size retention wait, up to ``strata.iceberg.max.retention.hold.ms``,
for a lake-enabled topic's Iceberg table to commit the records they would delete.

What the table has committed. The truth is the table's snapshot summary (``strata.offsets``), which the
planner cannot read (it may not import ``pipeline``, and a retention pass must not load pyiceberg). It reads
instead the ``committed_offsets`` of the topic's ``lake_tables`` row, which the lake writer writes in
``finish_lake_run`` after each run, from the snapshot it committed or read. That copy is a lower bound of the
table's offsets, which is all the hold needs:
- the writer records offsets only once the catalog has committed them (a run whose commit failed, or
  whose outcome is unknown, records none), so the row never names an offset the table does not have;
- a table's offsets only grow (each snapshot's are its parent's, each partition moved forward), so a value
  that was true once stays a lower bound however stale it gets;
- the row is reset when it is leased for another table (``strata.iceberg.table`` changed), and forgotten
  with its topic, so it never speaks for a table other than the one the topic's configs name.
A stale row only holds more than needed. The one case it does not cover is a table dropped by hand
outside Strata and created again by the writer: the row then speaks for the dropped table until the
writer's next run records the new one's offsets.

The rule, per partition: retention may delete a chunk the table has not wholly committed (its last offset at
or past the committed offset) only once ``hold_ms`` has passed since retention first wanted it gone. For
the time rule that moment is exact: its newest record's timestamp plus ``retention.ms``. For the size rule
it is not stored anywhere, so the chunk's newest timestamp stands in for it, the earliest moment the size
rule can have wanted it (so a size-retained chunk is held for at most ``hold_ms``, possibly less). Chunks go
in offset order, so the log start stops at the first chunk still held. Past the hold, retention wins: the
records are deleted, and the writer reports the missing range when it next commits (its status error and
``strata_lake_gap_records_total``). A partition the table has never had is held from offset 0 with
``strata.iceberg.backfill=from_log_start`` (the first commit starts at the log start) and not at all with
``from_now``. DeleteRecords is an explicit request and is never held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from storage.lake_config import BACKFILL_FROM_NOW, LakeTopicConfig
from storage.metadata.lake_state import LakeTableRow
from storage.metadata.rows import ChunkRow, TopicInfo


@dataclass(frozen=True, slots=True)
class LakeHold:
    """One partition's hold: the table has every record below ``committed`` (a lower bound)."""

    committed: int
    hold_ms: int


def partition_holds(info: TopicInfo, row: LakeTableRow | None) -> dict[int, LakeHold]:
    """Each partition's hold for the topic ``info``, given its ``lake_tables`` row (None: no run yet); empty
    when the topic's lake is disabled or its hold is 0."""
    lake = LakeTopicConfig.from_overrides(info.name, info.configs)
    if not lake.enabled or lake.max_retention_hold_ms <= 0:
        return {}
    offsets: Mapping[int, int] = {}
    # A row of an earlier incarnation of the topic, or of another table, says nothing about this table.
    if row is not None and row.topic_created_ms == info.created_ms and row.table_identifier == lake.table:
        offsets = row.committed_offsets
    holds = {}
    for partition in range(info.partitions):
        committed = offsets.get(partition)
        if committed is None:
            if lake.backfill == BACKFILL_FROM_NOW:
                continue  # the first commit starts at the end: nothing below it is wanted
            committed = 0
        holds[partition] = LakeHold(committed, lake.max_retention_hold_ms)
    return holds


def held_keep_from(
    chunks: Sequence[ChunkRow],
    time_expired: int,
    keep_from: int,
    retention_ms: int,
    hold: LakeHold,
    now_ms: int,
) -> int:
    """How many of the oldest ``chunks`` retention may drop under ``hold``: ``keep_from`` of them are what
    retention wants gone, of which the first ``time_expired`` by the time rule and the rest by the size
    rule. Never more than ``keep_from``."""
    for i in range(keep_from):
        chunk = chunks[i]
        if chunk.last_offset < hold.committed:
            continue  # wholly in the table
        wanted_since = chunk.max_timestamp + retention_ms if i < time_expired else chunk.max_timestamp
        if now_ms < wanted_since + hold.hold_ms:
            return i
    return keep_from
