"""plan_reads: coalescing chunk ranges into as few GETs as the gap rule allows."""

from __future__ import annotations

from agents.chunks import COALESCE_GAP, plan_reads
from storage.metadata.rows import ChunkRow


def chunk(cid: int, key: str, position: int, length: int) -> ChunkRow:
    return ChunkRow(cid, "t", 0, cid * 10, cid * 10 + 9, 10, key, position, length, 0, 0, 0, False)


def test_near_ranges_of_one_object_merge_far_ones_split() -> None:
    chunks = [
        chunk(2, "a", 5000, 100),
        chunk(1, "a", 0, 1000),  # out of order: sorted by position per object
        chunk(3, "a", 5100 + COALESCE_GAP + 1, 50),  # just past the gap: a new GET
        chunk(4, "b", 0, 10),
    ]
    reads = plan_reads(chunks)
    assert [(k, s, e, [c.chunk_id for c in m]) for k, s, e, m in reads] == [
        ("a", 0, 5100, [1, 2]),
        ("a", 5100 + COALESCE_GAP + 1, 5100 + COALESCE_GAP + 51, [3]),
        ("b", 0, 10, [4]),
    ]


def test_overlapping_and_contained_ranges_keep_the_widest_end() -> None:
    reads = plan_reads([chunk(1, "a", 0, 500), chunk(2, "a", 100, 50)])
    assert [(s, e) for _, s, e, _ in reads] == [(0, 500)]
    assert plan_reads([]) == []
