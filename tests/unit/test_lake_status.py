"""The lake's status and lag (storage/lake_status.py) over a metadata reader given by hand, and the lag
gauges' series (pipeline/lake/metrics.py) on a real Prometheus registry: where a partition's lag starts
(committed, log start, or the LSO with from_now), the lag in seconds from the chunk index and its
fallbacks, a stale row of an earlier topic of the same name, and series dropped when a table goes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from pipeline.lake.metrics import LakeMetrics
from pipeline.lake.runs import COMMITTED, FAILED, LakeRun
from storage.errors import UnknownTopic
from storage.lake_status import lake_status, lake_statuses
from storage.metadata.lake_state import LakeTableRow
from storage.metadata.rows import ChunkRow, PartitionState, TopicInfo

NOW = 1_700_000_000_000
CREATED = NOW - 10_000_000
RAW = {"strata.iceberg.mode": "raw"}


@dataclass
class Reader:
    """A ``LakeStatusReader`` over fixed facts: topics, partition states, chunks and rows."""

    topics: dict[str, TopicInfo] = field(default_factory=dict)
    states: dict[str, list[PartitionState]] = field(default_factory=dict)
    chunks: dict[tuple[str, int], list[ChunkRow]] = field(default_factory=dict)
    rows: list[LakeTableRow] = field(default_factory=list)

    def add(self, name: str, configs: Mapping[str, str], states: list[tuple[int, int]]) -> None:
        """A topic whose partition p has (log start, high watermark) ``states[p]``."""
        self.topics[name] = TopicInfo(name, len(states), configs, CREATED)
        self.states[name] = [PartitionState(name, p, start, end) for p, (start, end) in enumerate(states)]

    def chunk(self, topic: str, partition: int, base: int, last: int, min_ts: int) -> None:
        row = ChunkRow(0, topic, partition, base, last, last - base + 1, "k", 0, 1, min_ts, min_ts, 0, False)
        self.chunks.setdefault((topic, partition), []).append(row)

    def get_topic(self, name: str) -> TopicInfo:
        if name not in self.topics:
            raise UnknownTopic(name)
        return self.topics[name]

    def partition_states(self, topic: str) -> list[PartitionState]:
        return self.states.get(topic, [])

    def find_chunks(self, topic: str, partition: int, offset: int, limit: int) -> list[ChunkRow]:
        found = [c for c in self.chunks.get((topic, partition), []) if c.last_offset >= offset]
        return sorted(found, key=lambda c: c.base_offset)[:limit]

    def lake_topics(self) -> list[TopicInfo]:
        return [t for _, t in sorted(self.topics.items()) if t.configs.get("strata.iceberg.mode") == "raw"]

    def lake_tables(self) -> list[LakeTableRow]:
        return self.rows


def row(topic: str, committed: Mapping[int, int], **changes: Any) -> LakeTableRow:
    """The row a writer left after a run 50 s ago that committed, with ``changes``."""
    base = LakeTableRow(
        topic,
        f"strata.{topic}",
        "raw",
        True,
        CREATED,
        committed,
        last_commit_ms=NOW - 50_000,
        last_run_ms=NOW - 50_000,
    )
    return replace(base, **changes)


def test_lag_from_the_committed_offsets_and_the_chunk_index() -> None:
    meta = Reader()
    meta.add("orders", RAW, [(0, 10), (0, 4), (0, 7)])
    meta.chunk("orders", 0, 0, 5, NOW - 90_000)
    meta.chunk("orders", 0, 6, 9, NOW - 30_000)
    meta.rows = [row("orders", {0: 6, 1: 4}, last_snapshot_id=42, error="boom", commit_requested=True)]
    status = lake_status(meta, "orders", NOW)
    assert [(p.partition, p.committed_offset, p.lag_records) for p in status.partitions] == [
        (0, 6, 4),
        (1, 4, 0),
        (2, None, 7),  # not in the table yet: from the log start
    ]
    # Partition 0: the chunk holding offset 6 was stamped 30 s ago; partition 2 has no chunk, so the time
    # since the last commit stands in.
    assert [p.lag_seconds for p in status.partitions] == [30.0, 0.0, 50.0]
    assert (status.lag_records, status.lag_seconds) == (11, 50.0)
    assert (status.table, status.last_snapshot_id, status.error, status.commit_requested) == (
        "strata.orders",
        42,
        "boom",
        True,
    )


def test_from_now_a_future_timestamp_and_a_never_committed_table() -> None:
    meta = Reader()
    meta.add("clicks", {**RAW, "strata.iceberg.backfill": "from_now"}, [(0, 10), (3, 8)])
    meta.chunk("clicks", 1, 3, 7, NOW + 60_000)  # a producer clock ahead of ours
    meta.rows = [row("clicks", {1: 3}, last_commit_ms=None)]
    status = lake_status(meta, "clicks", NOW)
    # Partition 0 is not in the table: from_now starts it at its LSO, so it lags nothing.
    assert [(p.lag_records, p.lag_seconds) for p in status.partitions] == [(0, 0.0), (5, 0.0)]
    meta.chunks.clear()
    assert lake_status(meta, "clicks", NOW).lag_seconds == 0.0  # no chunk, no commit: nothing to measure


def test_a_row_of_an_earlier_topic_of_the_same_name_is_not_this_topic_s() -> None:
    meta = Reader()
    meta.add("orders", RAW, [(0, 3)])
    meta.rows = [LakeTableRow("orders", "strata.orders", "raw", True, CREATED - 1, {0: 100}, error="old")]
    status = lake_status(meta, "orders", NOW)
    assert (status.partitions[0].committed_offset, status.lag_records, status.error) == (None, 3, None)


def test_a_table_another_topic_holds_is_reported() -> None:
    meta = Reader()
    meta.add("a", RAW, [(0, 2)])
    meta.add("b", {**RAW, "strata.iceberg.table": "strata.a"}, [(0, 3)])
    meta.rows = [row("a", {0: 2})]
    status = lake_status(meta, "b", NOW)
    assert status.error == (
        "the Iceberg table strata.a is the table of topic 'a';"
        " set strata.iceberg.table of 'b' to another name"
    )
    assert (status.lag_records, status.last_run_ms) == (3, None)
    assert lake_status(meta, "a", NOW).error is None


def test_disabled_unknown_and_the_listing() -> None:
    meta = Reader()
    meta.add("plain", {}, [(0, 5)])
    meta.add("orders", RAW, [(0, 5)])
    plain = lake_status(meta, "plain", NOW)
    assert (plain.enabled, plain.table, plain.partitions) == (False, None, [])
    with pytest.raises(UnknownTopic):
        lake_status(meta, "nope", NOW)
    assert [s.topic for s in lake_statuses(meta, NOW)] == ["orders"]


def samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels.get("topic", "")): s.value
        for family in registry.collect()
        if family.name.startswith("strata_lake_")
        for s in family.samples
    }


def test_the_lag_gauges_follow_the_lake_topics() -> None:
    registry = CollectorRegistry()
    metrics = LakeMetrics(registry)
    meta = Reader()
    meta.add("a", RAW, [(0, 5)])
    meta.add("b", RAW, [(0, 2)])
    metrics.observe_lag(lake_statuses(meta, NOW), every_topic=True)
    assert samples(registry)[("strata_lake_lag_records", "a")] == 5
    metrics.observe_run(LakeRun("a", COMMITTED, {0: 5}, 1, rows=5, chunk_bytes=300), 0.5)
    metrics.observe_run(LakeRun("b", FAILED, error="boom"), 0.1)
    seen = samples(registry)
    assert (seen[("strata_lake_records_total", "a")], seen[("strata_lake_bytes_total", "a")]) == (5, 300)
    assert (seen[("strata_lake_commit_seconds_count", "a")], seen[("strata_lake_errors_total", "b")]) == (
        1,
        1,
    )
    assert ("strata_lake_commits_total", "b") not in seen

    # A round of one topic (strata lake run --topic a) leaves the others' series alone.
    metrics.observe_lag(lake_statuses(meta, NOW)[:1], every_topic=False)
    assert ("strata_lake_lag_records", "b") in samples(registry)
    # b's lake is turned off: the next full round drops its series.
    del meta.topics["b"]
    metrics.observe_lag(lake_statuses(meta, NOW), every_topic=True)
    seen = samples(registry)
    assert ("strata_lake_lag_records", "b") not in seen
    assert ("strata_lake_lag_seconds", "b") not in seen
    assert ("strata_lake_lag_records", "a") in seen
