"""Time and size retention (``retention.ms``, ``retention.bytes``) for delete and compact,delete topics.

Retention moves a partition's ``log_start_offset`` forward and drops the chunk rows wholly below it, as
Kafka deletes whole segments: a chunk goes when its newest record is older than ``retention.ms``, or while
the partition's live bytes exceed ``retention.bytes`` (oldest chunk first). Nothing is rewritten here;
files left without live chunks become obsolete and GC deletes them after the grace period, and partly
dead files shrink when a merge rewrites them. The newest chunk of a partition is kept by the size rule,
as Kafka keeps the active segment.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from storage.clock import Clock
from storage.errors import UnknownTopic
from storage.metadata.base import CompactionCatalog
from storage.topic_config import TopicConfig

log = logging.getLogger("strata.retention")


@dataclass(frozen=True, slots=True)
class RetentionResult:
    partitions_trimmed: int
    chunks_dropped: int


class Retention:
    def __init__(self, metadata: CompactionCatalog, clock: Clock) -> None:
        self.metadata = metadata
        self.clock = clock

    def run_once(self) -> RetentionResult:
        now = self.clock.now_ms()
        trimmed = dropped = 0
        for name in self.metadata.list_topics():
            try:
                config = TopicConfig.from_overrides(self.metadata.get_topic(name).configs)
                partitions = self.metadata.partition_states(name)
            except UnknownTopic:
                continue
            if not config.deletes:
                continue
            for state in partitions:
                new_start = self._new_log_start(name, state.partition, config, now)
                if new_start is not None and new_start > state.log_start_offset:
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

    def _new_log_start(self, topic: str, partition: int, config: TopicConfig, now: int) -> int | None:
        if config.retention_ms < 0 and config.retention_bytes < 0:
            return None
        chunks = [fc.chunk for fc in self.metadata.partition_chunks(topic, partition)]
        if not chunks:
            return None
        keep_from = 0
        if config.retention_ms >= 0:
            while keep_from < len(chunks) and chunks[keep_from].max_timestamp < now - config.retention_ms:
                keep_from += 1
        if config.retention_bytes >= 0:
            total = sum(c.length for c in chunks[keep_from:])
            while keep_from < len(chunks) - 1 and total > config.retention_bytes:
                total -= chunks[keep_from].length
                keep_from += 1
        if keep_from == 0:
            return None
        if keep_from == len(chunks):
            return chunks[-1].last_offset + 1  # everything expired: the log is empty up to here
        return chunks[keep_from].base_offset
