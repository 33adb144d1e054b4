"""Expiry on Kafka's cadence: consumer-group offsets (offsets.retention.minutes) and retention checks
(log.retention.check.interval.ms), on SQLite and PostgreSQL."""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

import pytest

from agents.group_doc import group_to_json
from agents.group_model import Group, GroupPhase
from planner.round import CompactionRound, RoundConfig
from storage.clock import ManualClock
from storage.metadata import LEVEL_INGEST, MetadataStore, NewChunk, NewFile
from storage.metadata.rows import GroupRow
from storage.objectstore import open_object_store

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000


def test_group_offsets_expire_as_kafkas_once_the_group_is_empty(metadata_store: MetadataStore) -> None:
    """offsets.retention.minutes: a group Empty for the retention loses its offsets and its state; one with
    members keeps them; offsets committed without a group expire one by one after their commit."""
    store = metadata_store
    store.create_topic("t", 2, {}, NOW)
    retention = 1000
    wall = int(time.time() * 1000)

    def state(group: str, phase: GroupPhase) -> None:
        doc = group_to_json(Group(group, phase=phase))
        store.update_group(group, lambda _: (GroupRow(phase.value, "consumer", doc), None))

    store.commit_group_offsets("solo", [("t", 0, 5)], NOW)
    store.commit_group_offsets("solo", [("t", 1, 6)], NOW + 500)
    state("empty", GroupPhase.EMPTY)
    store.commit_group_offsets("empty", [("t", 0, 7)], wall)
    state("busy", GroupPhase.STABLE)
    store.commit_group_offsets("busy", [("t", 0, 8)], NOW)

    assert store.expire_group_offsets(NOW + retention - 1, retention) == 0
    assert store.expire_group_offsets(NOW + retention, retention) == 1  # solo's first, by its commit time
    assert [(o.partition, o.offset) for o in store.group_offsets("solo")] == [(1, 6)]
    assert store.expire_group_offsets(wall + 10 * retention, retention) == 2  # solo's second, and empty's
    assert store.group_offsets("solo") == []
    assert store.group_offsets("empty") == []
    assert store.load_group("empty") is None  # gone with its offsets, as Kafka's group goes Dead
    assert [o.offset for o in store.group_offsets("busy")] == [8]  # members: kept, however old
    assert store.load_group("busy") is not None


def _flush(store: MetadataStore, count: int) -> None:
    """A flush of ``count`` records of ``old``/0, all stamped at 0 (long past retention.ms)."""
    chunk = NewChunk("old", 0, count, 0, 100, 0, 0, 7)
    store.commit_flush(NewFile(f"L0/{uuid.uuid4().hex}", 100, LEVEL_INGEST, NOW), [chunk], [], NOW)


def test_retention_runs_on_kafkas_cadence(metadata_store: MetadataStore, tmp_path: Path) -> None:
    """Records stamped long ago stay readable until the first retention check (the initial delay), and
    between checks; each check applies retention.ms."""
    store = metadata_store
    clock = ManualClock(NOW)
    store.create_topic("old", 1, {"retention.ms": "1000"}, NOW)
    key = f"L0/{uuid.uuid4().hex}"
    store.commit_flush(
        NewFile(key, 100, LEVEL_INGEST, NOW), [NewChunk("old", 0, 3, 0, 100, 0, 0, 7)], [], NOW
    )
    objects = open_object_store(f"file://{tmp_path}")
    config = RoundConfig(retention_check_interval_ms=300_000, retention_initial_delay_ms=30_000)
    compaction_round = CompactionRound(objects, store, clock, random.Random(1), "test", config)
    assert compaction_round.run_once().retention.chunks_dropped == 0  # before the initial delay
    clock.advance(29.0)
    assert compaction_round.run_once().retention.chunks_dropped == 0
    clock.advance(1.0)
    assert compaction_round.run_once().retention.chunks_dropped == 1
    assert store.partition_state("old", 0).log_start_offset == 3
    key2 = f"L0/{uuid.uuid4().hex}"
    store.commit_flush(
        NewFile(key2, 100, LEVEL_INGEST, NOW), [NewChunk("old", 0, 2, 0, 100, 0, 0, 7)], [], NOW
    )
    clock.advance(299.0)
    assert compaction_round.run_once().retention.chunks_dropped == 0  # until the next check
    clock.advance(1.0)
    assert compaction_round.run_once().retention.chunks_dropped == 1
    objects.close()
