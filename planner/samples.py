"""The dirty ratio over time: one sample per compacted topic per minute, from the compaction rounds.

A sample is a topic's dirty and live chunk bytes (``TopicSummary``: the chunks at or after their
partition's cleaned offset, and all of them); its ratio is dirty / live, the figure the HTTP API shows for
a topic now and in its history. The HTTP API never computes history itself: what it shows is what rounds
recorded, so a cluster without a worker has none.

Cost: a round samples only once ``interval_ms`` passed since this sampler last did (one grouped scan of the
topics' chunks, as the planner makes every round), and the store writes a topic's sample only if it has
none newer than ``interval_ms`` (several workers share the work, at most one sample per topic per minute
on SQLite; two PostgreSQL workers sampling at the same instant may both write one). Samples older than
``keep_ms`` are deleted by the same write.
"""

from __future__ import annotations

from storage.clock import Clock
from storage.metadata.base import CompactionCatalog
from storage.metadata.rows import DirtySample
from storage.topic_config import TopicConfig

SAMPLE_INTERVAL_MS = 60_000
SAMPLE_KEEP_MS = 24 * 3_600_000


class DirtySampler:
    def __init__(
        self,
        metadata: CompactionCatalog,
        clock: Clock,
        interval_ms: int = SAMPLE_INTERVAL_MS,
        keep_ms: int = SAMPLE_KEEP_MS,
    ) -> None:
        self.metadata = metadata
        self.clock = clock
        self.interval_ms = interval_ms
        self.keep_ms = keep_ms
        self._last_ms: int | None = None

    def run_once(self) -> int:
        """Sample every compacted topic if this sampler's last run is ``interval_ms`` old; returns how many
        samples were stored."""
        now = self.clock.now_ms()
        if self._last_ms is not None and now - self._last_ms < self.interval_ms:
            return 0
        self._last_ms = now
        summaries = self.metadata.topic_summaries(self.metadata.list_topics())
        samples = [
            DirtySample(s.name, now, s.dirty_bytes, s.live_bytes)
            for s in summaries
            if TopicConfig.from_overrides(s.configs).compacted
        ]
        return self.metadata.record_dirty_samples(samples, now, self.interval_ms, self.keep_ms)
