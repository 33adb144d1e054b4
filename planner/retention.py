"""Time and size retention (``retention.ms``, ``retention.bytes``) for delete and compact,delete topics.

Retention moves a partition's ``log_start_offset`` forward and drops the chunk rows wholly below it, as
Kafka deletes whole segments: a chunk goes when its newest record is older than ``retention.ms``, or while
the partition's live bytes exceed ``retention.bytes`` (oldest chunk first). Nothing is rewritten here;
files left without live chunks become obsolete and GC deletes them after the grace period, and partly
dead files shrink when a merge rewrites them. The newest chunk of a partition is kept by the size rule,
as Kafka keeps the active segment.

A lake-enabled topic's partitions are held back for its Iceberg table, for up to
``strata.iceberg.max.retention.hold.ms`` (``planner/lake_hold.py`` states the rule and why it never lets
retention delete what the table has not committed while the hold lasts).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from planner.lake_hold import LakeHold, held_keep_from, partition_holds
from storage.clock import Clock
from storage.errors import UnknownTopic
from storage.metadata.base import CompactionCatalog
from storage.metadata.lake_state import LakeStore
from storage.topic_config import TopicConfig

log = logging.getLogger("strata.retention")


@dataclass(frozen=True, slots=True)
class RetentionResult:
    partitions_trimmed: int
    chunks_dropped: int


class RetentionCatalog(CompactionCatalog, LakeStore, Protocol):
    """Retention's reads and writes: the partitions' chunks, and the lake tables' committed offsets."""


class Retention:
    def __init__(self, metadata: RetentionCatalog, clock: Clock) -> None:
        self.metadata = metadata
        self.clock = clock

    def run_once(self) -> RetentionResult:
        now = self.clock.now_ms()
        trimmed = dropped = 0
        lake_rows = None
        for name in self.metadata.list_topics():
            try:
                info = self.metadata.get_topic(name)
                config = TopicConfig.from_overrides(info.configs)
                partitions = self.metadata.partition_states(name)
            except UnknownTopic:
                continue
            if not config.deletes:
                continue
            holds: dict[int, LakeHold] = {}
            if any(n.startswith("strata.iceberg.") for n in info.configs):
                if lake_rows is None:  # read once per pass, and only when a topic has a lake
                    lake_rows = {r.topic: r for r in self.metadata.lake_tables()}
                holds = partition_holds(info, lake_rows.get(name))
            for state in partitions:
                hold = holds.get(state.partition)
                new_start = self._new_log_start(name, state.partition, config, now, hold)
                if new_start is None or new_start <= state.log_start_offset:
                    continue
                if hold is not None and new_start > hold.committed:
                    log.warning(
                        "retention: %s/%d passed its lake hold of %d ms: offsets [%d, %d) go before the"
                        " table has committed them",
                        name,
                        state.partition,
                        hold.hold_ms,
                        max(hold.committed, state.log_start_offset),
                        new_start,
                    )
                removed = self.metadata.apply_retention(name, state.partition, new_start, now)
                trimmed += 1
                dropped += removed
                log.info(
                    "retention: %s/%d log start -> %d (%d chunk(s) dropped)",
                    name,
                    state.partition,
                    new_start,
                    removed,
                )
        return RetentionResult(trimmed, dropped)

    def _new_log_start(
        self, topic: str, partition: int, config: TopicConfig, now: int, hold: LakeHold | None = None
    ) -> int | None:
        if config.retention_ms < 0 and config.retention_bytes < 0:
            return None
        chunks = [fc.chunk for fc in self.metadata.partition_chunks(topic, partition)]
        if not chunks:
            return None
        keep_from = 0
        if config.retention_ms >= 0:
            while keep_from < len(chunks) and chunks[keep_from].max_timestamp < now - config.retention_ms:
                keep_from += 1
        time_expired = keep_from
        if config.retention_bytes >= 0:
            total = sum(c.length for c in chunks[keep_from:])
            while keep_from < len(chunks) - 1 and total > config.retention_bytes:
                total -= chunks[keep_from].length
                keep_from += 1
        if hold is not None:
            keep_from = held_keep_from(chunks, time_expired, keep_from, config.retention_ms, hold, now)
        if keep_from == 0:
            return None
        if keep_from == len(chunks):
            return chunks[-1].last_offset + 1  # everything expired: the log is empty up to here
        return chunks[keep_from].base_offset
