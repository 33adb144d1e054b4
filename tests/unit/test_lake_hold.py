"""The lake's retention hold (planner/lake_hold.py): retention's new log start stops at the first chunk the
table has not committed, until the hold has passed since retention first wanted it gone; and which
partitions a topic's lake holds, from its ``lake_tables`` row. And lake maintenance's process settings."""

from __future__ import annotations

from typing import cast

import pytest

from planner.lake_hold import LakeHold, partition_holds
from planner.retention import Retention
from storage.clock import ManualClock
from storage.errors import SettingsError
from storage.metadata.base import MetadataStore
from storage.metadata.lake_state import LakeTableRow
from storage.metadata.rows import ChunkRow, FileChunk, TopicInfo
from storage.topic_config import TopicConfig

NOW = 1_700_000_000_000
HOLD = 60_000


class _Chunks:
    def __init__(self, chunks: list[ChunkRow]) -> None:
        self.chunks = chunks

    def partition_chunks(self, topic: str, partition: int) -> list[FileChunk]:
        return [FileChunk(1, c) for c in self.chunks]


def _chunk(base: int, last: int, max_ts: int, length: int = 100) -> ChunkRow:
    return ChunkRow(0, "t", 0, base, last, last - base + 1, "k", 0, length, max_ts - 10, max_ts, 0, False)


def _new_start(chunks: list[ChunkRow], hold: LakeHold | None, now: int = NOW, **configs: str) -> int | None:
    retention = Retention(cast(MetadataStore, _Chunks(chunks)), ManualClock(now))
    return retention._new_log_start("t", 0, TopicConfig.from_overrides(configs), now, hold)


# Three chunks written 5, 3 and 1 s before NOW; a retention.ms of 500 wants all three gone.
LOG = [_chunk(0, 9, NOW - 5000), _chunk(10, 19, NOW - 3000), _chunk(20, 29, NOW - 1000)]


def test_time_retention_stops_at_the_first_chunk_the_table_lacks_while_the_hold_lasts() -> None:
    assert _new_start(LOG, None, **{"retention.ms": "500"}) == 30
    assert _new_start(LOG, LakeHold(0, HOLD), **{"retention.ms": "500"}) is None
    assert _new_start(LOG, LakeHold(10, HOLD), **{"retention.ms": "500"}) == 10
    assert _new_start(LOG, LakeHold(15, HOLD), **{"retention.ms": "500"}) == 10  # 10..19 not all in it
    assert _new_start(LOG, LakeHold(30, HOLD), **{"retention.ms": "500"}) == 30


def test_past_the_hold_time_retention_wins_chunk_by_chunk() -> None:
    # The first chunk was wanted gone at NOW - 5000 + 500: its hold ends HOLD later; the second's 2 s later.
    first_free = NOW - 4500 + HOLD
    assert _new_start(LOG, LakeHold(0, HOLD), first_free - 1, **{"retention.ms": "500"}) is None
    assert _new_start(LOG, LakeHold(0, HOLD), first_free, **{"retention.ms": "500"}) == 10
    assert _new_start(LOG, LakeHold(0, HOLD), first_free + 2000, **{"retention.ms": "500"}) == 20
    assert _new_start(LOG, LakeHold(0, HOLD), first_free + 4000, **{"retention.ms": "500"}) == 30


def test_size_retention_holds_from_the_chunks_newest_timestamp() -> None:
    size = {"retention.bytes": "100"}  # keeps the newest chunk only
    assert _new_start(LOG, None, **size) == 20
    assert _new_start(LOG, LakeHold(0, HOLD), **size) is None
    assert _new_start(LOG, LakeHold(0, HOLD), NOW - 5000 + HOLD, **size) == 10
    assert _new_start(LOG, LakeHold(0, HOLD), NOW - 3000 + HOLD, **size) == 20
    assert _new_start(LOG, LakeHold(10, HOLD), **size) == 10


def test_a_hold_never_moves_the_log_start_further_than_retention() -> None:
    assert _new_start(LOG, LakeHold(30, HOLD), **{"retention.ms": "2000"}) == 20
    assert _new_start(LOG, LakeHold(0, HOLD), NOW + 10 * HOLD, **{"retention.ms": "-1"}) is None


def _info(**configs: str) -> TopicInfo:
    return TopicInfo("t", 3, {"strata.iceberg.mode": "raw", **configs}, 1000)


def _row(offsets: dict[int, int], table: str = "strata.t", created: int = 1000) -> LakeTableRow:
    return LakeTableRow("t", table, "raw", True, created, offsets)


def test_the_holds_come_from_the_row_of_this_topic_and_table() -> None:
    day = 24 * 3_600_000
    assert partition_holds(_info(), _row({0: 5, 1: 7})) == {
        0: LakeHold(5, day),
        1: LakeHold(7, day),
        2: LakeHold(0, day),  # never committed: held from the log start
    }
    assert partition_holds(_info(), None) == {p: LakeHold(0, day) for p in range(3)}
    # Another incarnation of the topic, or another table: the row says nothing.
    assert partition_holds(_info(), _row({0: 5}, created=999))[0] == LakeHold(0, day)
    assert partition_holds(_info(), _row({0: 5}, table="strata.other"))[0] == LakeHold(0, day)
    hold = {"strata.iceberg.max.retention.hold.ms": "5000"}
    assert partition_holds(_info(**hold), _row({0: 5}))[0] == LakeHold(5, 5000)
    assert partition_holds(_info(**{"strata.iceberg.backfill": "from_now"}), _row({0: 5})) == {
        0: LakeHold(5, day)
    }
    assert partition_holds(_info(**{"strata.iceberg.max.retention.hold.ms": "0"}), _row({0: 5})) == {}
    assert partition_holds(_info(**{"strata.iceberg.mode": "disabled"}), _row({0: 5})) == {}


def test_the_lake_maintenance_settings_are_checked() -> None:
    """A grace shorter than a writer's upload-to-commit time would delete its files before its commit."""
    from strata.settings import load_settings

    settings = load_settings({}, {"STRATA_LAKE_ORPHAN_GRACE_MS": "600000"})
    assert (settings.lake_orphan_grace_ms, settings.lake_maintenance_interval_ms) == (600_000, 3_600_000)
    for environ in (
        {"STRATA_LAKE_ORPHAN_GRACE_MS": "599999"},
        {"STRATA_LAKE_ORPHAN_GRACE_MS": "600000", "STRATA_JOB_LEASE_MS": "60001"},
        {"STRATA_LAKE_MAINTENANCE_INTERVAL_MS": "-1"},
    ):
        with pytest.raises(SettingsError, match="STRATA_LAKE_"):
            load_settings({}, environ)
