"""The damage log on SQLite and PostgreSQL: damaged ranges recorded once, listed, and quarantined as an
audited hole (the chunk row gone, its file obsolete once empty, reads moving past its offsets)."""

from __future__ import annotations

import uuid

import pytest

from storage.errors import DamagedRange, OffsetOutOfRange, UnknownPartition, UnknownTopic
from storage.metadata import FILE_OBSOLETE, LEVEL_INGEST, MetadataStore, NewChunk, NewFile

pytestmark = pytest.mark.integration

NOW = 1_700_000_000_000


def _flush(store: MetadataStore, counts: list[int], partition: int = 0) -> str:
    """One flush of a file with one chunk per count, each of a partition of its own (``partition`` on);
    the file's key."""
    key = f"L0/{uuid.uuid4().hex}"
    position = 0
    chunks = []
    for i, count in enumerate(counts):
        chunks.append(NewChunk("t", partition + i, count, position, 100 * count, NOW - 5, NOW, 7))
        position += 100 * count
    store.commit_flush(NewFile(key, position, LEVEL_INGEST, NOW), chunks, [], NOW)
    return key


def test_damage_is_recorded_once_and_quarantine_leaves_an_audited_hole(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("t", 2, {}, NOW)
    first = _flush(store, [10])  # offsets 0..9
    second = _flush(store, [5])  # offsets 10..14
    _flush(store, [5])  # offsets 15..19
    damaged = DamagedRange("t", 0, 10, 14, second)
    store.record_damage([damaged], "chunk CRC mismatch", "compaction job 3", NOW)
    store.record_damage([damaged], "found again", "strata scan", NOW + 1)
    (row,) = store.damaged_ranges()
    assert (row.first_offset, row.last_offset, row.detail, row.found_by) == (
        10,
        14,
        "chunk CRC mismatch",
        "compaction job 3",
    )
    assert row.quarantined_ms is None
    assert store.damaged_ranges(quarantined=False) == [row]
    assert store.damaged_ranges(quarantined=True) == []

    done = store.quarantine("t", 0, 12, "User:ops", "bad disk in 2026", NOW + 10)
    assert (done.first_offset, done.last_offset, done.object_key) == (10, 14, second)
    assert (done.quarantined_ms, done.quarantined_by, done.reason) == (
        NOW + 10,
        "User:ops",
        "bad disk in 2026",
    )
    assert done.detail == "chunk CRC mismatch"  # the reader's finding stays
    assert [(c.base_offset, c.last_offset) for c in store.find_chunks("t", 0, 0, 10)] == [(0, 9), (15, 19)]
    assert store.file_states([second])[second].state == FILE_OBSOLETE
    assert store.file_states([first])[first].state != FILE_OBSOLETE
    assert store.partition_state("t", 0).high_watermark == 20  # offsets are never given back

    with pytest.raises(OffsetOutOfRange):
        store.quarantine("t", 0, 12, "User:ops", "again", NOW + 11)  # the hole holds no chunk now
    with pytest.raises(OffsetOutOfRange):
        store.quarantine("t", 1, 0, "User:ops", "empty partition", NOW + 11)
    with pytest.raises(UnknownPartition):
        store.quarantine("t", 5, 0, "User:ops", "no such partition", NOW + 11)
    with pytest.raises(UnknownTopic):
        store.quarantine("nope", 0, 0, "User:ops", "no such topic", NOW + 11)


def test_a_quarantine_without_a_report_records_its_range(metadata_store: MetadataStore) -> None:
    store = metadata_store
    store.create_topic("t", 1, {}, NOW)
    _flush(store, [3])  # 0..2
    _flush(store, [4])  # 3..6
    key = _flush(store, [2])  # 7..8
    row = store.quarantine("t", 0, 8, "User:ops", "operator found it", NOW)
    assert (row.first_offset, row.last_offset, row.object_key, row.found_by) == (7, 8, key, "User:ops")
    assert store.damaged_ranges("t", quarantined=True) == [row]
    assert store.damaged_ranges("other") == []
